//! The journal: every driver answer, keyed by request id, appended and made durable before
//! the VM consumes it. One record per line: the CRC-32 of the JSON (8 hex digits), a space,
//! the JSON, a newline. A crash can leave a partial last line (a torn tail): it is detected
//! and dropped. A bad record anywhere else is corruption, reported with its line.

use crate::protocol::Reply;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;

/// Why a journal cannot be read.
#[derive(Debug)]
pub enum JournalError {
    /// Reading or writing failed.
    Io(std::io::Error),
    /// A record before the last is damaged.
    Corrupted {
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalError::Io(e) => write!(f, "journal: {e}"),
            JournalError::Corrupted { line, reason } => {
                write!(f, "the journal is corrupted at line {line}: {reason}")
            }
        }
    }
}

impl std::error::Error for JournalError {}

impl From<std::io::Error> for JournalError {
    fn from(e: std::io::Error) -> JournalError {
        JournalError::Io(e)
    }
}

/// The records of a journal file, in order; a torn tail is dropped (and cut from the file).
pub fn read(path: &Path) -> Result<Vec<Reply>, JournalError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut records = Vec::new();
    let mut good_end = 0;
    let mut start = 0;
    let mut line = 0;
    while start < bytes.len() {
        line += 1;
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|p| start + p);
        let last = match end {
            Some(e) => e + 1 == bytes.len(),
            None => true,
        };
        let parsed = end.and_then(|e| {
            let rec = std::str::from_utf8(&bytes[start..e]).ok()?;
            let (crc, body) = rec.split_once(' ')?;
            let crc = u32::from_str_radix(crc, 16).ok()?;
            (crc32fast::hash(body.as_bytes()) == crc).then_some(())?;
            Reply::from_json(serde_json::from_str(body).ok()?).ok()
        });
        match parsed {
            Some(r) => {
                records.push(r);
                good_end = end.map_or(bytes.len(), |e| e + 1);
            }
            // Only the last record may be damaged: the write a crash interrupted.
            None if last => break,
            None => {
                return Err(JournalError::Corrupted {
                    line,
                    reason: "bad checksum or record".into(),
                })
            }
        }
        start = end.map_or(bytes.len(), |e| e + 1);
    }
    if good_end < bytes.len() {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(good_end as u64)?;
        f.sync_all()?;
    }
    Ok(records)
}

/// Replaces the journal at `path` with `records`, durably and in one step (a new file
/// renamed over the old one).
pub fn rewrite(path: &Path, records: &[Reply]) -> Result<(), JournalError> {
    let tmp = path.with_extension("rewrite");
    let _ = std::fs::remove_file(&tmp);
    let mut j = Journal::open(&tmp)?;
    for r in records {
        j.append(r)?;
    }
    j.sync()?;
    drop(j);
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// An open journal being appended to.
pub struct Journal {
    out: BufWriter<File>,
    unsynced: usize,
    /// The record being encoded (reused).
    scratch: Vec<u8>,
}

impl Journal {
    /// Opens (creating if needed) the journal at `path` for appending.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Journal {
            out: BufWriter::new(file),
            unsynced: 0,
            scratch: Vec::new(),
        })
    }

    /// Appends one answer (durable only after [`Journal::sync`]).
    pub fn append(&mut self, reply: &Reply) -> Result<(), JournalError> {
        self.scratch.clear();
        serde_json::to_writer(&mut self.scratch, reply).map_err(|e| JournalError::Io(e.into()))?;
        write!(self.out, "{:08x} ", crc32fast::hash(&self.scratch))?;
        self.out.write_all(&self.scratch)?;
        self.out.write_all(b"\n")?;
        self.unsynced += 1;
        Ok(())
    }

    /// Answers appended since the last sync.
    pub fn unsynced(&self) -> usize {
        self.unsynced
    }

    /// Makes every appended answer durable.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        if self.unsynced > 0 {
            self.out.flush()?;
            self.out.get_ref().sync_data()?;
            self.unsynced = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Answer, Kind, SessionAnswer};
    use crate::value::Value;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("prosevm-journal-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        dir
    }

    fn sample() -> Vec<Reply> {
        let id = |s: &str| s.parse().expect("id");
        vec![
            Reply::answer(id("0:0"), Answer::Session(SessionAnswer::text("hello"))),
            Reply::answer(
                id("0:1"),
                Answer::Session(SessionAnswer {
                    text: "t".into(),
                    memory: Some("m".into()),
                }),
            ),
            Reply::answer(id("0/0.1:0"), Answer::Evaluate(true)),
            Reply::answer(id("0:2"), Answer::Choose(2)),
            Reply::answer(id("0:3"), Answer::Convert(Value::Int(7))),
            Reply::failed(id("0:4"), Kind::Session, "boom"),
        ]
    }

    fn write(path: &Path) {
        let mut j = Journal::open(path).expect("open");
        for r in sample() {
            j.append(&r).expect("append");
        }
        j.sync().expect("sync");
    }

    #[test]
    fn records_round_trip() {
        let p = temp("round");
        write(&p);
        assert_eq!(read(&p).expect("read"), sample());
    }

    #[test]
    fn a_torn_tail_is_dropped_and_cut() {
        let p = temp("torn");
        write(&p);
        let full = std::fs::read(&p).expect("bytes");
        // Every cut inside the last record leaves the first five records.
        let last_start = full[..full.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .expect("lines")
            + 1;
        for cut in last_start..full.len() {
            std::fs::write(&p, &full[..cut]).expect("write");
            let got = read(&p).expect("read");
            assert_eq!(got, sample()[..5]);
            assert_eq!(std::fs::read(&p).expect("bytes").len(), last_start);
        }
    }

    #[test]
    fn damage_before_the_last_record_is_corruption() {
        let p = temp("corrupt");
        write(&p);
        let mut bytes = std::fs::read(&p).expect("bytes");
        bytes[20] ^= 0x01;
        std::fs::write(&p, &bytes).expect("write");
        match read(&p) {
            Err(JournalError::Corrupted { line: 1, .. }) => {}
            other => panic!("expected corruption at line 1, got {other:?}"),
        }
    }
}
