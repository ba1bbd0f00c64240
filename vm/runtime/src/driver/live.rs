//! An answer as it is written. A driver that streams tells its [`Live`] each piece of text
//! as it arrives, so that a person sees it on the terminal and a host reads it as events;
//! the first piece of any kind (text or a tool call) marks the time to the first token.
//! A driver also warns here of what went wrong on its side without failing the request (a
//! memo entry that cannot be read). Nothing here is journaled: only the finished answer is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// What a streaming answer reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// More of the answer's text.
    Text(&'a str),
    /// The attempt so far is abandoned (a stream cut off or stalled, asked again): what was
    /// shown of it should go.
    Restart,
    /// Something went wrong that the request survives: a warning for the trace.
    Warning(&'a str),
}

/// Who listens to pieces of an answer.
type Sink = Box<dyn Fn(Piece<'_>) + Send + Sync>;

/// Where a driver reports an answer as it is written, and what it learns from that: when the
/// first token came.
pub struct Live {
    asked: Instant,
    first: OnceLock<u64>,
    sink: Option<Sink>,
    /// Text went out since the last restart.
    shown: AtomicBool,
}

impl Default for Live {
    fn default() -> Live {
        Live::off()
    }
}

impl Live {
    /// Listens to nothing, but still times the first token.
    pub fn off() -> Live {
        Live {
            asked: Instant::now(),
            first: OnceLock::new(),
            sink: None,
            shown: AtomicBool::new(false),
        }
    }

    /// Hands every piece to `sink`; the clock for the first token starts now.
    pub fn to(sink: impl Fn(Piece<'_>) + Send + Sync + 'static) -> Live {
        Live {
            sink: Some(Box::new(sink)),
            ..Live::off()
        }
    }

    /// The answer's first content arrived (text, or a tool call's first piece).
    pub fn started(&self) {
        self.first
            .get_or_init(|| self.asked.elapsed().as_millis() as u64);
    }

    /// More text arrived.
    pub fn text(&self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        self.started();
        self.shown.store(true, Ordering::Relaxed);
        if let Some(sink) = &self.sink {
            sink(Piece::Text(piece));
        }
    }

    /// The attempt so far is abandoned; the next one starts from nothing (said only when
    /// some of it was shown).
    pub fn restart(&self) {
        if !self.shown.swap(false, Ordering::Relaxed) {
            return;
        }
        if let Some(sink) = &self.sink {
            sink(Piece::Restart);
        }
    }

    /// Something went wrong that the request survives (said to the trace as a warning).
    pub fn warn(&self, message: &str) {
        if let Some(sink) = &self.sink {
            sink(Piece::Warning(message));
        }
    }

    /// Milliseconds from the asking to the first content, once it came.
    pub fn first_token_ms(&self) -> Option<u64> {
        self.first.get().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn pieces_reach_the_sink_and_the_first_one_is_timed() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let live = Live::to(move |p| {
            log.lock().expect("log").push(match p {
                Piece::Text(t) => t.to_string(),
                Piece::Restart => "<restart>".into(),
                Piece::Warning(w) => format!("<warning: {w}>"),
            })
        });
        assert_eq!(live.first_token_ms(), None);
        live.restart();
        live.text("");
        assert_eq!(live.first_token_ms(), None, "an empty piece is no token");
        live.text("Hel");
        let first = live.first_token_ms().expect("timed");
        std::thread::sleep(std::time::Duration::from_millis(5));
        live.restart();
        live.text("Hello");
        assert_eq!(live.first_token_ms(), Some(first), "the first one counts");
        live.warn("the memo is full");
        assert_eq!(
            *seen.lock().expect("log"),
            ["Hel", "<restart>", "Hello", "<warning: the memo is full>"]
        );
    }
}
