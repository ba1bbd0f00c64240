//! The language server's transport allocates for what a client sends, not for what it
//! claims: measured with a counting allocator, the framing of any bytes read as a client's
//! messages (`prosec::lsp::frame`) costs at most twice a header line's limit or twice the
//! input in any one allocation, and never more than the limit on a message. Before, a
//! `Content-Length` of 100 GB was allocated as soon as it was read.

use proptest::prelude::*;
use prose_benches::counting::{largest_in, Counting};
use prosec::lsp::frame::{read_body, read_message, MAX_CONTENT_LENGTH, MAX_HEADER_LINE};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Reads the frames of `input` (the messages' bodies, unparsed) to its end or its first
/// error; the largest single allocation that took.
fn largest_reading(input: &[u8]) -> usize {
    let ((), largest) = largest_in(|| {
        let mut r = input;
        while let Ok(Some(_)) = read_body(&mut r) {}
    });
    largest
}

/// What framing `input` may allocate at once: a header line (its buffer doubled), or the
/// body received (likewise).
fn allowed(input: &[u8]) -> usize {
    (2 * MAX_HEADER_LINE).max(2 * input.len())
}

#[test]
fn a_length_claimed_but_not_sent_costs_nothing() {
    for claim in [MAX_CONTENT_LENGTH, MAX_CONTENT_LENGTH + 1, usize::MAX] {
        let mut input = format!("Content-Length: {claim}\r\n\r\n").into_bytes();
        input.extend_from_slice(&[b'{'; 1000]);
        let largest = largest_reading(&input);
        assert!(
            largest <= allowed(&input),
            "claiming {claim} bytes allocated {largest} at once"
        );
    }
}

#[test]
fn a_message_is_read_and_parsed_in_allocations_of_its_length() {
    let params = "x".repeat(1 << 20);
    let body = format!(r#"{{"jsonrpc":"2.0","method":"m","params":"{params}"}}"#);
    let input = format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes();
    let (read, largest) = largest_in(|| read_message(&mut &input[..]));
    assert!(read.expect("framed").is_some());
    assert!(largest >= body.len(), "{largest}");
    assert!(
        largest <= 2 * body.len(),
        "{largest} for {} bytes",
        body.len()
    );
}

proptest! {
    /// Any bytes at all.
    #[test]
    fn any_bytes_cost_what_they_are(input in prop::collection::vec(any::<u8>(), 0..2048)) {
        let largest = largest_reading(&input);
        prop_assert!(largest <= allowed(&input) && largest <= MAX_CONTENT_LENGTH, "{largest}");
    }

    /// Frames claiming any length, with any headers besides and any bytes sent.
    #[test]
    fn any_claims_cost_what_is_sent(
        frames in prop::collection::vec(
            (
                prop_oneof![
                    0u64..256,
                    any::<u64>(),
                    (MAX_CONTENT_LENGTH as u64 - 2)..(MAX_CONTENT_LENGTH as u64 + 2),
                ],
                "[ -~]{0,40}",
                prop::collection::vec(any::<u8>(), 0..256),
            ),
            1..4,
        )
    ) {
        let mut input = Vec::new();
        for (len, header, body) in &frames {
            input.extend_from_slice(format!("{header}\r\nContent-Length: {len}\r\n\r\n").as_bytes());
            input.extend_from_slice(body);
        }
        let largest = largest_reading(&input);
        prop_assert!(largest <= allowed(&input) && largest <= MAX_CONTENT_LENGTH, "{largest}");
    }
}
