//! The language server's transport: LSP's base protocol on a byte stream (headers, each a
//! line ending in `\r\n`, among them `Content-Length: N`; an empty line; then `N` bytes of
//! JSON-RPC), read with limits, so that what a client claims costs nothing until it sends
//! it. A header line is at most [`MAX_HEADER_LINE`] bytes and a message at most
//! [`MAX_CONTENT_LENGTH`]; the body's buffer grows with the bytes that arrive, never past
//! the length claimed. (lsp-server's own reader allocates whatever `Content-Length` says
//! before reading a byte of it.)
//!
//! [`connect`] runs a reader thread and a writer thread around an [`lsp_server::Connection`]
//! whose channels hold one message at a time, so a client sending faster than the server
//! answers waits rather than queueing without end. A framing error ends the session:
//! [`Transport::finish`] gives it as the session's error.

use crossbeam_channel::{bounded, Receiver, Sender};
use lsp_server::{Connection, Message};
use std::fmt;
use std::io::{self, BufRead, Write};
use std::thread::JoinHandle;

/// The longest header line read, its `\r\n` included.
pub const MAX_HEADER_LINE: usize = 8 << 10;
/// The longest message body accepted (a whole document sent on opening it is well within).
pub const MAX_CONTENT_LENGTH: usize = 64 << 20;

/// Why the byte stream is not a sequence of LSP messages.
#[derive(Debug)]
pub enum FrameError {
    /// Reading failed.
    Io(io::Error),
    /// The input ended inside a message.
    Truncated,
    /// A header line is longer than [`MAX_HEADER_LINE`].
    LongHeader,
    /// A header line is not `Name: value\r\n`, or `Content-Length` is not a number or is
    /// given twice; the text says which.
    Malformed(String),
    /// The headers end without `Content-Length`.
    NoLength,
    /// `Content-Length` is more than [`MAX_CONTENT_LENGTH`].
    TooLong(u64),
    /// The body is not a JSON-RPC message.
    NotMessage(String),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "cannot read the client's messages: {e}"),
            FrameError::Truncated => write!(f, "the client's input ended inside a message"),
            FrameError::LongHeader => write!(
                f,
                "a header line of the client's is longer than {MAX_HEADER_LINE} bytes"
            ),
            FrameError::Malformed(why) => write!(f, "malformed header from the client: {why}"),
            FrameError::NoLength => {
                write!(f, "a message from the client has no Content-Length header")
            }
            FrameError::TooLong(n) => write!(
                f,
                "a message from the client claims Content-Length {n}, more than the \
                 {MAX_CONTENT_LENGTH} bytes a message may have"
            ),
            FrameError::NotMessage(why) => {
                write!(f, "a message from the client is not JSON-RPC: {why}")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// The bytes `r` has ready, waiting for some; empty at the end of the input.
fn ready(r: &mut impl BufRead) -> Result<&[u8], FrameError> {
    loop {
        match r.fill_buf() {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    // Filled above: this returns the same bytes without reading.
    r.fill_buf().map_err(FrameError::Io)
}

/// Reads one header line into `line` (cleared first), `\n` included: `false` when the input
/// ends before its first byte.
fn header_line(r: &mut impl BufRead, line: &mut Vec<u8>) -> Result<bool, FrameError> {
    line.clear();
    loop {
        let chunk = ready(r)?;
        if chunk.is_empty() {
            return if line.is_empty() {
                Ok(false)
            } else {
                Err(FrameError::Truncated)
            };
        }
        let (take, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if line.len() + take > MAX_HEADER_LINE {
            return Err(FrameError::LongHeader);
        }
        line.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if done {
            return Ok(true);
        }
    }
}

/// The `Content-Length` of the headers `r` holds next (through the empty line that ends
/// them), or `None` at the end of the input before a message starts.
fn content_length(r: &mut impl BufRead) -> Result<Option<usize>, FrameError> {
    let mut line = Vec::new();
    let mut length: Option<u64> = None;
    let mut first = true;
    loop {
        if !header_line(r, &mut line)? {
            return if first {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        }
        first = false;
        let Some(text) = line.strip_suffix(b"\r\n") else {
            return Err(FrameError::Malformed(
                "a header line does not end with \\r\\n".into(),
            ));
        };
        if text.is_empty() {
            break;
        }
        let shown = || {
            String::from_utf8_lossy(text)
                .chars()
                .take(80)
                .collect::<String>()
        };
        let Some(colon) = memchr::memchr(b':', text) else {
            return Err(FrameError::Malformed(format!("{:?} has no colon", shown())));
        };
        let (name, value) = (&text[..colon], text[colon + 1..].trim_ascii());
        if !name.eq_ignore_ascii_case(b"Content-Length") {
            continue;
        }
        if length.is_some() {
            return Err(FrameError::Malformed(
                "Content-Length is given twice".into(),
            ));
        }
        if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
            return Err(FrameError::Malformed(format!(
                "{:?}: Content-Length is not a number",
                shown()
            )));
        }
        // Digits only: the one failure is a number past u64, which is too long too.
        let n = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(u64::MAX);
        length = Some(n);
    }
    let n = length.ok_or(FrameError::NoLength)?;
    match usize::try_from(n) {
        Ok(n) if n <= MAX_CONTENT_LENGTH => Ok(Some(n)),
        _ => Err(FrameError::TooLong(n)),
    }
}

/// Reads exactly `len` bytes, the buffer growing (by doubling, never past `len`) as they
/// arrive, so a length claimed but not sent is not allocated.
fn body(r: &mut impl BufRead, len: usize) -> Result<Vec<u8>, FrameError> {
    /// The first room made for a body.
    const FIRST: usize = 4 << 10;
    let mut body: Vec<u8> = Vec::new();
    while body.len() < len {
        let chunk = ready(r)?;
        if chunk.is_empty() {
            return Err(FrameError::Truncated);
        }
        let n = chunk.len().min(len - body.len());
        if body.capacity() - body.len() < n {
            let want = (body.capacity() * 2)
                .max(FIRST)
                .max(body.len() + n)
                .min(len);
            body.reserve_exact(want - body.len());
        }
        body.extend_from_slice(&chunk[..n]);
        r.consume(n);
    }
    Ok(body)
}

/// The body of the next message of `r`, or `None` at the end of the input between
/// messages.
pub fn read_body(r: &mut impl BufRead) -> Result<Option<Vec<u8>>, FrameError> {
    match content_length(r)? {
        Some(len) => body(r, len).map(Some),
        None => Ok(None),
    }
}

/// The next message of `r`, or `None` at the end of the input between messages.
pub fn read_message(r: &mut impl BufRead) -> Result<Option<Message>, FrameError> {
    let Some(bytes) = read_body(r)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| FrameError::NotMessage(e.to_string()))
}

/// The reader and writer threads of a [`connect`]ed connection.
pub struct Transport {
    /// How the reader ended, sent before it lets go of the connection's input.
    reader: Receiver<Result<(), FrameError>>,
    writer: JoinHandle<io::Result<()>>,
}

/// Messages read from `input`, until its end, an `exit` notification, the server's
/// leaving, or a framing error.
fn pump(mut input: impl BufRead, to_server: &Sender<Message>) -> Result<(), FrameError> {
    while let Some(msg) = read_message(&mut input)? {
        let exit = matches!(&msg, Message::Notification(n) if n.method == "exit");
        if to_server.send(msg).is_err() || exit {
            break;
        }
    }
    Ok(())
}

/// A connection for a server reading `input` and writing `output` (standard input and
/// output, for `prosec lsp`), with the threads that carry its messages.
pub fn connect(
    input: impl BufRead + Send + 'static,
    output: impl Write + Send + 'static,
) -> (Connection, Transport) {
    let (to_server, from_client) = bounded::<Message>(0);
    let (to_client, from_server) = bounded::<Message>(0);
    let (outcome, reader) = bounded(1);
    std::thread::Builder::new()
        .name("lsp-reader".into())
        .spawn(move || {
            let ended = pump(input, &to_server);
            // Told before the server sees its input end, so the server's end finds it.
            let _ = outcome.send(ended);
            drop(to_server);
        })
        .expect("a thread for the client's messages");
    let writer = std::thread::Builder::new()
        .name("lsp-writer".into())
        .spawn(move || {
            let mut output = output;
            for msg in from_server {
                msg.write(&mut output)?;
            }
            Ok(())
        })
        .expect("a thread for the server's messages");
    let connection = Connection {
        sender: to_client,
        receiver: from_client,
    };
    (connection, Transport { reader, writer })
}

impl Transport {
    /// Ends the session once the server is done with `connection` (`served` being how it
    /// ended): everything it sent is written, then the session's outcome is the framing
    /// error that ended the client's input, if one did, else `served`, else a failure to
    /// write.
    pub fn finish(self, connection: Connection, served: Result<(), String>) -> Result<(), String> {
        drop(connection);
        let written = match self.writer.join() {
            Ok(written) => written,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        if let Ok(Err(framing)) = self.reader.try_recv() {
            return Err(framing.to_string());
        }
        served?;
        written.map_err(|e| format!("cannot write to the client: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    fn all(input: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut r = input;
        let mut out = Vec::new();
        while let Some(b) = read_body(&mut r)? {
            out.push(b);
        }
        Ok(out)
    }

    #[test]
    fn messages_are_read_one_after_another() {
        let a = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        let b = r#"{"jsonrpc":"2.0","method":"exit"}"#;
        let input = format!(
            "{}content-length: {}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{b}",
            frame(a),
            b.len()
        );
        let mut r = input.as_bytes();
        let first = read_message(&mut r).expect("read").expect("a message");
        assert!(matches!(first, Message::Request(req) if req.method == "initialize"));
        let second = read_message(&mut r).expect("read").expect("a message");
        assert!(matches!(second, Message::Notification(n) if n.method == "exit"));
        assert!(read_message(&mut r).expect("the end").is_none());
        // Spaces around the value, and a body of nothing.
        assert_eq!(all(b"Content-Length:  0 \r\n\r\n").expect("read"), [b""]);
    }

    #[test]
    fn a_claimed_length_past_the_limit_is_refused_before_the_body() {
        let input = b"Content-Length: 100000000000\r\n\r\n{";
        let e = all(input).expect_err("too long");
        assert!(matches!(e, FrameError::TooLong(100_000_000_000)), "{e}");
        assert!(e.to_string().contains("100000000000"), "{e}");
        let over = format!("Content-Length: {}\r\n\r\n", MAX_CONTENT_LENGTH + 1);
        assert!(matches!(all(over.as_bytes()), Err(FrameError::TooLong(_))));
        let huge = format!("Content-Length: 1{}\r\n\r\n", "0".repeat(40));
        assert!(matches!(
            all(huge.as_bytes()),
            Err(FrameError::TooLong(u64::MAX))
        ));
    }

    /// (What the body's buffer costs is measured in `benches/tests/lsp_frame.rs`, under a
    /// counting allocator.)
    #[test]
    fn a_length_claimed_but_not_sent_is_waited_for() {
        let head = format!("Content-Length: {MAX_CONTENT_LENGTH}\r\n\r\n");
        let mut input = head.as_bytes().to_vec();
        input.extend_from_slice(&[b'x'; 100]);
        let mut r = &input[..];
        let len = content_length(&mut r).expect("headers").expect("a message");
        assert_eq!(len, MAX_CONTENT_LENGTH);
        assert!(matches!(body(&mut r, len), Err(FrameError::Truncated)));
        assert!(r.is_empty(), "what was sent is read");
    }

    #[test]
    fn a_body_is_read_whole_across_many_small_reads() {
        let text = format!(
            r#"{{"jsonrpc":"2.0","method":"x","params":"{}"}}"#,
            "é".repeat(5000)
        );
        let input = frame(&text);
        // One byte at a time.
        let mut r = io::BufReader::with_capacity(1, input.as_bytes());
        let msg = read_message(&mut r).expect("read").expect("a message");
        assert!(
            matches!(msg, Message::Notification(n) if n.params.as_str().is_some_and(|p| p.len() == 10_000))
        );
    }

    #[test]
    fn malformed_frames_say_what_is_wrong() {
        let long_line = format!("X: {}\r\n", "a".repeat(MAX_HEADER_LINE));
        for (input, want) in [
            (&b"Content-Length: 2\r\n\r\n{"[..], "ended inside a message"),
            (b"Content-Length: 2\r\n", "ended inside a message"),
            (b"Content-Length: 2\r\nX", "ended inside a message"),
            (b"Content-Length: 2\n\n{}", "does not end with \\r\\n"),
            (b"Content-Length 2\r\n\r\n{}", "has no colon"),
            (b"Content-Length: -2\r\n\r\n{}", "not a number"),
            (b"Content-Length: 0x2\r\n\r\n{}", "not a number"),
            (
                b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
                "given twice",
            ),
            (b"Content-Type: x\r\n\r\n{}", "no Content-Length"),
            (b"Content-Length: 2\r\n\r\n{}", "not JSON-RPC"),
            (long_line.as_bytes(), "longer than 8192 bytes"),
        ] {
            let mut r = input;
            let e = loop {
                match read_message(&mut r) {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("{:?} was read", String::from_utf8_lossy(input)),
                    Err(e) => break e,
                }
            };
            assert!(
                e.to_string().contains(want),
                "{:?}: {e}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn a_framing_error_ends_the_session_with_it() {
        let input = b"Content-Length: 100000000000\r\n\r\n{".to_vec();
        let (connection, transport) = connect(io::Cursor::new(input), io::sink());
        // The server sees its input end, and the session's outcome is the framing error.
        assert!(connection.receiver.recv().is_err());
        let e = transport
            .finish(connection, Ok(()))
            .expect_err("the session failed");
        assert!(e.contains("Content-Length 100000000000"), "{e}");
    }

    #[test]
    fn a_session_carries_messages_both_ways() {
        let exit = r#"{"jsonrpc":"2.0","method":"exit"}"#;
        let req = r#"{"jsonrpc":"2.0","id":7,"method":"shutdown"}"#;
        let input = format!("{}{}", frame(req), frame(exit));
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        /// Output shared with the test.
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.0.lock().expect("lock").write(buf)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (connection, transport) = connect(io::Cursor::new(input), Shared(out.clone()));
        let Ok(Message::Request(req)) = connection.receiver.recv() else {
            panic!("no request");
        };
        assert_eq!(req.method, "shutdown");
        connection
            .sender
            .send(lsp_server::Response::new_ok(req.id, ()).into())
            .expect("sent");
        assert!(matches!(
            connection.receiver.recv(),
            Ok(Message::Notification(_))
        ));
        transport.finish(connection, Ok(())).expect("a clean end");
        let written = String::from_utf8(out.lock().expect("lock").clone()).expect("text");
        let mut r = written.as_bytes();
        let answer = read_message(&mut r).expect("framed").expect("a message");
        assert!(matches!(answer, Message::Response(resp) if resp.id == 7.into()));
    }

    proptest! {
        /// Whatever the bytes, reading ends (with messages, the end, or an error) without a
        /// panic, and every body read is exactly as long as its header said.
        #[test]
        fn any_bytes_are_read_or_refused(input in prop::collection::vec(any::<u8>(), 0..512)) {
            let mut r = &input[..];
            while let Ok(Some(b)) = read_body(&mut r) {
                prop_assert!(b.len() <= input.len());
            }
        }

        /// Frames with any length claimed, any headers and any body.
        #[test]
        fn any_frames_are_read_or_refused(
            frames in prop::collection::vec(
                (
                    prop_oneof![0u64..64, any::<u64>(), Just(MAX_CONTENT_LENGTH as u64 + 1)],
                    "[ -~]{0,40}",
                    prop::collection::vec(any::<u8>(), 0..80),
                ),
                0..4,
            )
        ) {
            let mut input = Vec::new();
            for (len, header, body) in &frames {
                input.extend_from_slice(format!("{header}\r\nContent-Length: {len}\r\n\r\n").as_bytes());
                input.extend_from_slice(body);
            }
            let mut r = &input[..];
            while let Ok(Some(b)) = read_body(&mut r) {
                prop_assert!(b.len() <= input.len());
            }
        }
    }
}
