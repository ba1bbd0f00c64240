//! Feeds arbitrary bytes to the language server's transport (`prosec::lsp::frame`) as a
//! client's input: messages are read until the end or an error, never a panic, and never a
//! body longer than the input or the limit. Every message read, written back as the server
//! writes its own, reads back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prosec::lsp::frame::{read_body, read_message, MAX_CONTENT_LENGTH};

fuzz_target!(|data: &[u8]| {
    let mut r = data;
    while let Ok(Some(body)) = read_body(&mut r) {
        assert!(body.len() <= data.len() && body.len() <= MAX_CONTENT_LENGTH);
    }
    let mut r = data;
    while let Ok(Some(msg)) = read_message(&mut r) {
        let mut written = Vec::new();
        msg.write(&mut written).expect("written to memory");
        let again = read_message(&mut &written[..])
            .expect("what the server writes reads back")
            .expect("a message");
        assert_eq!(
            serde_json::to_value(&again).expect("JSON"),
            serde_json::to_value(&msg).expect("JSON")
        );
    }
});
