//! A run's event log: the lines `--trace json` prints for it, numbered across every drive of
//! the run (started, then resumed after a stop or a crash), kept in `events.jsonl` beside
//! its views and, while the server drives it, in memory for the streams that follow it.
//!
//! A line's number is its place in the log, and the id of its server-sent event: a client
//! that reconnects with `Last-Event-ID: N` gets the lines after `N`, whichever drive wrote
//! them. Each drive starts again from `program_start` (a resumed run replays its journal),
//! so a client showing the run starts over when it sees one.

use crate::observe::envelope::Envelope;
use prose_machine::trace::Event;
use prose_runtime::record::RunStatus;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

/// The name of the log in a run's views directory.
pub const FILE: &str = "events.jsonl";

/// The log of a run the server drives: what was written, and a signal for those waiting for
/// more.
pub struct EventLog {
    inner: Mutex<Inner>,
    changed: watch::Sender<()>,
}

struct Inner {
    lines: Vec<Arc<str>>,
    file: Option<std::fs::File>,
    path: PathBuf,
    ended: bool,
}

impl EventLog {
    /// The log in `views` (a run's views directory): its lines so far, a torn last line (the
    /// server was killed as it wrote it) dropped, open to append more.
    pub fn open(views: &Path) -> std::io::Result<EventLog> {
        let path = views.join(FILE);
        let mut lines = read(&path);
        // A line cut short by a kill is cut off the file too, so the next one starts clean.
        let keep: usize = lines.iter().map(|l| l.len() + 1).sum();
        std::fs::create_dir_all(views)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        if file.metadata()?.len() != keep as u64 {
            file.set_len(keep as u64)?;
        }
        lines.shrink_to_fit();
        Ok(EventLog {
            inner: Mutex::new(Inner {
                lines: lines.into_iter().map(Arc::from).collect(),
                file: Some(file),
                path,
                ended: false,
            }),
            changed: watch::channel(()).0,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many lines the log holds: the number the next one gets.
    pub fn len(&self) -> usize {
        self.lock().lines.len()
    }

    /// Whether the log holds no line yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `line` (one JSON object, no newline), in memory and on disk. A log that can no
    /// longer be written keeps the lines in memory: the streams following the run go on.
    pub fn push(&self, line: String) {
        let mut inner = self.lock();
        let failed = match inner.file.as_mut() {
            Some(f) => writeln!(f, "{line}").is_err(),
            None => false,
        };
        if failed {
            eprintln!(
                "prosevm serve: cannot write {}; its stream goes on from memory",
                inner.path.display()
            );
            inner.file = None;
        }
        inner.lines.push(Arc::from(line));
        drop(inner);
        self.changed.send_replace(());
    }

    /// Says that this drive of the run is over: streams end once they have sent every line.
    pub fn end(&self) {
        let mut inner = self.lock();
        inner.ended = true;
        inner.file = None;
        drop(inner);
        self.changed.send_replace(());
    }

    /// The lines from number `from` on, and whether the drive is over.
    pub fn since(&self, from: usize) -> (Vec<Arc<str>>, bool) {
        let inner = self.lock();
        let lines = inner
            .lines
            .get(from..)
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        (lines, inner.ended)
    }

    /// A receiver that sees a change whenever a line is pushed or the drive ends.
    pub fn watch(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }
}

/// The complete lines of the log at `path` (none when it does not exist).
pub fn read(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read(path) else {
        return Vec::new();
    };
    let complete = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    String::from_utf8_lossy(&text[..complete])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Writes a drive's events to a run's log, stamped as `--trace json` stamps them.
pub struct Writer {
    envelope: Envelope,
    log: Arc<EventLog>,
}

impl Writer {
    /// A writer to `log`, for run `id`, numbering on from the lines it holds.
    pub fn new(id: &str, log: Arc<EventLog>) -> Writer {
        Writer {
            envelope: Envelope::numbered_from(id, log.len() as u64),
            log,
        }
    }

    /// Writes the `error` line (when the drive ended with one) and the `end` line, and
    /// ends the log's streams.
    pub fn ended(mut self, status: RunStatus, error: Option<&str>, code: Option<&str>) {
        if let Some(e) = error {
            self.log.push(self.envelope.error(e, code));
        }
        self.log.push(self.envelope.end(status, error));
        self.log.end();
    }
}

impl prose_runtime::observe::Observer for Writer {
    fn event(&mut self, e: &Event) {
        self.log.push(self.envelope.event(e));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("prose-events-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_numbering_goes_on() {
        let dir = scratch("torn");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join(FILE), "{\"seq\":0}\n{\"seq\":1}\n{\"se").expect("log");
        let log = Arc::new(EventLog::open(&dir).expect("open"));
        assert_eq!(log.len(), 2);
        let mut w = Writer::new("r", log.clone());
        prose_runtime::observe::Observer::event(&mut w, &Event::TryEnter);
        w.ended(RunStatus::Finished, None, None);
        let lines = read(&dir.join(FILE));
        assert_eq!(lines.len(), 4, "{lines:?}");
        let third: serde_json::Value = serde_json::from_str(&lines[2]).expect("json");
        assert_eq!(
            (&third["seq"], &third["event"]),
            (&2.into(), &"try_enter".into())
        );
        let (tail, ended) = log.since(3);
        assert!(ended);
        assert!(tail[0].contains("\"end\""), "{tail:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
