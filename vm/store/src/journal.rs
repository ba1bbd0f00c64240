//! The journal: every driver answer, keyed by request id, appended and made durable before
//! the VM consumes it (batched for drivers without side effects). One record per line: a
//! checksum (8 hex digits), a space, the reply as JSON, a newline.
//!
//! The checksums are chained: each is the CRC-32 of every record's JSON so far, starting
//! from a seed taken from the run's id, so a record cannot be dropped, repeated, moved or
//! borrowed from another run without breaking every checksum after it. `run.json` keeps the
//! number of records and the last checksum as of the last time the journal was closed
//! ([`Seal`]): a journal that lost records, or whose sealed records changed, is refused.
//!
//! A crash can leave a partial last line with no newline (a torn tail). Readers skip it in
//! memory and never write; only the process holding the run cuts it, when it opens the
//! journal to append ([`Journal::open`]). A complete line that fails its checksum is
//! corruption, reported with its line.

use crate::fs;
use prose_machine::protocol::{Reply, RequestId};
pub use prose_runtime::record::Seal;
pub use prose_runtime::runner::journal::Replies;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Why a journal cannot be read or trusted.
#[derive(Debug)]
pub enum JournalError {
    /// Reading or writing failed.
    Io(std::io::Error),
    /// There is no journal file, though the run has one from its start.
    Missing,
    /// A complete record is damaged: its checksum or its JSON is wrong.
    Corrupted {
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Fewer records than the journal held when it was last closed.
    Lost {
        /// Records found.
        found: u64,
        /// Records sealed in the run record.
        sealed: u64,
    },
    /// The records the run record sealed are not those in the journal.
    Changed {
        /// Records sealed in the run record.
        sealed: u64,
    },
    /// A second record for a request that already had an answer.
    Repeated {
        /// The request.
        id: RequestId,
        /// 1-based line of the repeat.
        line: usize,
    },
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalError::Io(e) => write!(f, "journal: {e}"),
            JournalError::Missing => f.write_str("the journal is missing"),
            JournalError::Corrupted { line, reason } => {
                write!(f, "the journal is corrupted at line {line}: {reason}")
            }
            JournalError::Lost { found, sealed } => write!(
                f,
                "the journal lost records: it holds {found}, but held {sealed} when it was last closed"
            ),
            JournalError::Changed { sealed } => write!(
                f,
                "the journal's first {sealed} records are not those it held when it was last closed"
            ),
            JournalError::Repeated { id, line } => write!(
                f,
                "the journal repeats the answer to {id} at line {line}"
            ),
        }
    }
}

impl std::error::Error for JournalError {}

impl From<std::io::Error> for JournalError {
    fn from(e: std::io::Error) -> JournalError {
        JournalError::Io(e)
    }
}

/// The chain's starting value for the run `run_id`.
pub fn seed(run_id: &str) -> u32 {
    crc32fast::hash(run_id.as_bytes())
}

/// The chain value after `body`, given the value before it.
fn chain(prev: u32, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(prev);
    h.update(body);
    h.finalize()
}

/// What a journal file holds.
#[derive(Debug, Default)]
pub struct Contents {
    /// The records, in order.
    pub records: Vec<Reply>,
    /// The chain value after each record.
    chain: Vec<u32>,
    /// The chain's seed.
    seed: u32,
    /// Bytes of complete records.
    len: u64,
    /// Bytes after them: a record a crash interrupted.
    torn: u64,
}

impl Contents {
    /// No records yet, for the run whose chain starts at `seed`.
    pub fn empty(seed: u32) -> Contents {
        Contents {
            seed,
            ..Contents::default()
        }
    }

    /// The seal of these records as they stand.
    pub fn seal(&self) -> Seal {
        Seal {
            records: self.records.len() as u64,
            crc: self.chain.last().copied().unwrap_or(self.seed),
        }
    }

    /// Whether a torn record follows the complete ones.
    pub fn torn(&self) -> bool {
        self.torn > 0
    }

    /// Checks that these records begin with the ones `seal` says the journal held when last
    /// closed.
    pub fn check_seal(&self, seal: &Seal) -> Result<(), JournalError> {
        let found = self.records.len() as u64;
        if found < seal.records {
            return Err(JournalError::Lost {
                found,
                sealed: seal.records,
            });
        }
        let at = match seal.records {
            0 => self.seed,
            n => self.chain[n as usize - 1],
        };
        if at != seal.crc {
            return Err(JournalError::Changed {
                sealed: seal.records,
            });
        }
        Ok(())
    }

    /// Checks that no request has a record after one that answered it. A failure may be
    /// followed by another record for the same request: a failed run's resume asks the
    /// request whose failure ended it again. Nothing else may repeat.
    pub fn check_repeats(&self) -> Result<(), JournalError> {
        let mut answered: HashMap<&RequestId, bool> = HashMap::with_capacity(self.records.len());
        for (i, r) in self.records.iter().enumerate() {
            if answered.insert(&r.id, r.outcome.is_ok()) == Some(true) {
                return Err(JournalError::Repeated {
                    id: r.id.clone(),
                    line: i + 1,
                });
            }
        }
        Ok(())
    }

    /// The reply to replay for each request: its answer, or its last failure when it has
    /// none. When records repeat (a journal accepted with `--force`), the first answer wins:
    /// it is the one the run went on with.
    pub fn replies(self) -> Replies {
        replies(self.records)
    }

    /// Each request's reply as [`Contents::replies`] picks it, in the order the requests first
    /// appear in the journal: the run's exchanges as it went on with them.
    pub fn in_order(self) -> Vec<Reply> {
        in_order(self.records)
    }

    /// The records `--force` keeps: each request's records up to and including its first
    /// answer.
    pub fn kept(&self) -> Vec<&Reply> {
        let mut answered: std::collections::HashSet<&RequestId> = Default::default();
        let mut kept = Vec::with_capacity(self.records.len());
        for r in &self.records {
            if answered.contains(&r.id) {
                continue;
            }
            if r.outcome.is_ok() {
                answered.insert(&r.id);
            }
            kept.push(r);
        }
        kept
    }
}

/// The reply to replay for each request of a journal holding `records` (in the order they
/// were written): its answer, or its last failure when it has none. When records repeat (a
/// journal accepted with `--force`), the first answer wins: it is the one the run went on
/// with.
pub fn replies(records: Vec<Reply>) -> Replies {
    let mut map = Replies::with_capacity_and_hasher(records.len(), Default::default());
    for r in records {
        match map.get(&r.id) {
            Some(kept) if kept.outcome.is_ok() => {}
            _ => {
                map.insert(r.id.clone(), r);
            }
        }
    }
    map
}

/// Each request's reply as [`replies`] picks it, in the order the requests first appear in
/// `records`: the run's exchanges as it went on with them.
pub fn in_order(records: Vec<Reply>) -> Vec<Reply> {
    let order: Vec<RequestId> = records.iter().map(|r| r.id.clone()).collect();
    let mut map = replies(records);
    order.iter().filter_map(|id| map.remove(id)).collect()
}

/// Reads the journal at `path` of the run whose chain starts at `seed`. Never writes: a torn
/// tail is skipped, and left for the process holding the run to cut.
pub fn read(path: &Path, seed: u32) -> Result<Contents, JournalError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(JournalError::Missing),
        Err(e) => return Err(e.into()),
    };
    parse(&bytes, seed)
}

/// The records in `bytes`, a journal whose chain starts at `seed`.
pub fn parse(bytes: &[u8], seed: u32) -> Result<Contents, JournalError> {
    let mut c = Contents::empty(seed);
    let mut prev = seed;
    let mut start = 0;
    let mut line = 0;
    while start < bytes.len() {
        line += 1;
        let Some(end) = memchr::memchr(b'\n', &bytes[start..]).map(|p| start + p) else {
            // No newline: the write a crash interrupted.
            c.torn = (bytes.len() - start) as u64;
            break;
        };
        let record = &bytes[start..end];
        let corrupted = |reason: &str| JournalError::Corrupted {
            line,
            reason: reason.into(),
        };
        let (crc, body) = match record.iter().position(|&b| b == b' ') {
            Some(8) => (&record[..8], &record[9..]),
            _ => return Err(corrupted("no checksum")),
        };
        let crc = std::str::from_utf8(crc)
            .ok()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| corrupted("no checksum"))?;
        let next = chain(prev, body);
        if next != crc {
            return Err(corrupted(
                "bad checksum (the record, or one before it, was changed, removed or inserted)",
            ));
        }
        let reply = serde_json::from_slice(body)
            .map_err(|e| e.to_string())
            .and_then(|j| Reply::from_json(j).map_err(|e| e.to_string()))
            .map_err(|e| corrupted(&format!("not a reply: {e}")))?;
        c.records.push(reply);
        c.chain.push(next);
        prev = next;
        start = end + 1;
        c.len = start as u64;
    }
    Ok(c)
}

/// Replaces the journal at `path`, durably and in one step, by `records` chained from
/// `seed`; returns what it then holds (whose [`Contents::seal`] the run record must take).
pub fn rewrite(path: &Path, seed: u32, records: &[&Reply]) -> Result<Contents, JournalError> {
    let bytes = encode(seed, records)?;
    fs::write_durable(path, &bytes).map_err(|e| JournalError::Io(std::io::Error::other(e)))?;
    parse(&bytes, seed)
}

/// `records` as a journal whose chain starts at `seed`.
pub fn encode(seed: u32, records: &[&Reply]) -> Result<Vec<u8>, JournalError> {
    let mut bytes = Vec::new();
    let mut prev = seed;
    for r in records {
        let body = serde_json::to_vec(r).map_err(|e| JournalError::Io(e.into()))?;
        prev = chain(prev, &body);
        bytes.extend_from_slice(format!("{prev:08x} ").as_bytes());
        bytes.extend_from_slice(&body);
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// Syncs `files` and runs `also` (another sync) at the same time: the file system commits
/// syncs that wait together in one go, where one after another each waits for its own.
fn sync_together(
    files: &[std::path::PathBuf],
    also: impl FnOnce() -> std::io::Result<()>,
) -> std::io::Result<()> {
    std::thread::scope(|s| {
        let syncs: Vec<_> = files
            .iter()
            .map(|f| s.spawn(move || fs::sync_path(f)))
            .collect();
        let mine = also();
        syncs.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| Err(std::io::Error::other("a sync thread panicked")))
        })?;
        mine
    })
}

/// Bytes of answers gathered before a write reaches the file (a sync writes them sooner): a
/// persistent agent's answers carry its whole memory, and with 8 KiB a loop around one
/// took a write call per session.
const JOURNAL_BUFFER: usize = 64 * 1024;

/// An open journal being appended to, by the process holding the run.
pub struct Journal {
    out: BufWriter<File>,
    unsynced: usize,
    /// The chain value after the last record.
    crc: u32,
    /// Records in the journal.
    records: u64,
    /// The record being encoded (reused).
    scratch: Vec<u8>,
    /// Files to make durable before the first answer is.
    first: Vec<std::path::PathBuf>,
}

impl Journal {
    /// Opens the journal at `path`, which holds `contents`, for appending: a torn tail is cut
    /// first. Only the process holding the run may call this.
    pub fn open(path: &Path, contents: &Contents) -> Result<Journal, JournalError> {
        let file = if contents.torn() {
            let f = fs::open_rw(path)?;
            f.set_len(contents.len)?;
            f.sync_all()?;
            drop(f);
            fs::open_append(path)?
        } else {
            fs::open_append(path)?
        };
        let seal = contents.seal();
        Ok(Journal {
            out: BufWriter::with_capacity(JOURNAL_BUFFER, file),
            unsynced: 0,
            crc: seal.crc,
            records: seal.records,
            scratch: Vec::new(),
            first: Vec::new(),
        })
    }

    /// Has the next sync make `files` durable (in order) before the answers: a new run's
    /// files, written without syncing.
    pub fn sync_first(&mut self, files: Vec<std::path::PathBuf>) {
        self.first = files;
    }

    /// Appends one answer (durable only after [`Journal::sync`]).
    pub fn append(&mut self, reply: &Reply) -> Result<(), JournalError> {
        self.scratch.clear();
        serde_json::to_writer(&mut self.scratch, reply).map_err(|e| JournalError::Io(e.into()))?;
        self.crc = chain(self.crc, &self.scratch);
        write!(self.out, "{:08x} ", self.crc)?;
        self.out.write_all(&self.scratch)?;
        self.out.write_all(b"\n")?;
        self.unsynced += 1;
        self.records += 1;
        Ok(())
    }

    /// Answers appended since the last sync.
    pub fn unsynced(&self) -> usize {
        self.unsynced
    }

    /// Makes every appended answer durable (and, the first time, the files given to
    /// [`Journal::sync_first`], together with them: none of these answers is used before
    /// both are durable).
    pub fn sync(&mut self) -> Result<(), JournalError> {
        if self.unsynced > 0 {
            self.out.flush()?;
            let files = std::mem::take(&mut self.first);
            let journal = self.out.get_ref();
            sync_together(&files, || journal.sync_data())?;
            self.unsynced = 0;
        }
        Ok(())
    }

    /// Syncs everything, and returns the seal to keep in the run record.
    pub fn close(&mut self) -> Result<Seal, JournalError> {
        let files = std::mem::take(&mut self.first);
        sync_together(&files, || Ok(()))?;
        self.sync()?;
        Ok(Seal {
            records: self.records,
            crc: self.crc,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prose_machine::protocol::{Answer, Kind, SessionAnswer};
    use prose_machine::value::Value;
    use std::path::PathBuf;

    const SEED: &str = "20250101-000000-abcdef";

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("prosevm-journal-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        dir
    }

    fn id(s: &str) -> RequestId {
        s.parse().expect("id")
    }

    fn sample() -> Vec<Reply> {
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

    fn write(path: &Path, replies: &[Reply]) -> Seal {
        let _ = std::fs::remove_file(path);
        let mut j = Journal::open(path, &Contents::empty(seed(SEED))).expect("open");
        for r in replies {
            j.append(r).expect("append");
        }
        j.close().expect("close")
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .expect("journal")
            .lines()
            .map(String::from)
            .collect()
    }

    fn set_lines(path: &Path, lines: &[String]) {
        std::fs::write(path, lines.join("\n") + "\n").expect("write");
    }

    #[test]
    fn records_round_trip_and_seal() {
        let p = temp("round");
        let seal = write(&p, &sample());
        let c = read(&p, seed(SEED)).expect("read");
        assert_eq!(c.records, sample());
        assert_eq!(c.seal(), seal);
        assert_eq!(seal.records, 6);
        c.check_seal(&seal).expect("sealed");
        c.check_repeats().expect("no repeats");
        // The same journal read as another run's is refused at its first record.
        match read(&p, seed("another-run")) {
            Err(JournalError::Corrupted { line: 1, .. }) => {}
            other => panic!("expected corruption at line 1, got {other:?}"),
        }
    }

    #[test]
    fn a_torn_tail_is_skipped_without_writing_and_cut_by_the_holder() {
        let p = temp("torn");
        write(&p, &sample());
        let full = std::fs::read(&p).expect("bytes");
        let last_start = full[..full.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .expect("lines")
            + 1;
        for cut in last_start + 1..full.len() {
            std::fs::write(&p, &full[..cut]).expect("write");
            let c = read(&p, seed(SEED)).expect("read");
            assert_eq!(c.records, sample()[..5]);
            assert!(c.torn());
            // Reading changed nothing.
            assert_eq!(std::fs::read(&p).expect("bytes"), &full[..cut]);
            // The holder cuts the tail when it opens the journal, and appends after it.
            let mut j = Journal::open(&p, &c).expect("open");
            j.append(&sample()[5]).expect("append");
            j.close().expect("close");
            assert_eq!(std::fs::read(&p).expect("bytes"), full);
        }
    }

    #[test]
    fn damage_to_a_complete_record_is_corruption() {
        let p = temp("corrupt");
        write(&p, &sample());
        let mut bytes = std::fs::read(&p).expect("bytes");
        bytes[20] ^= 0x01;
        std::fs::write(&p, &bytes).expect("write");
        match read(&p, seed(SEED)) {
            Err(JournalError::Corrupted { line: 1, .. }) => {}
            other => panic!("expected corruption at line 1, got {other:?}"),
        }
        // The last line, complete but damaged, is corruption too, not a torn tail.
        write(&p, &sample());
        let mut bytes = std::fs::read(&p).expect("bytes");
        let n = bytes.len();
        bytes[n - 3] ^= 0x01;
        std::fs::write(&p, &bytes).expect("write");
        assert!(matches!(
            read(&p, seed(SEED)),
            Err(JournalError::Corrupted { line: 6, .. })
        ));
    }

    #[test]
    fn removed_moved_or_repeated_records_break_the_chain() {
        let p = temp("chain");
        write(&p, &sample());
        let all = lines(&p);
        let edits: Vec<(&str, Vec<String>)> = vec![
            (
                "removed",
                [&all[..2], &all[3..]].concat().into_iter().collect(),
            ),
            ("moved", {
                let mut v = all.clone();
                v.swap(1, 2);
                v
            }),
            ("repeated", {
                let mut v = all.clone();
                v.insert(3, all[2].clone());
                v
            }),
        ];
        for (what, edited) in edits {
            set_lines(&p, &edited);
            assert!(
                matches!(read(&p, seed(SEED)), Err(JournalError::Corrupted { .. })),
                "{what}"
            );
        }
    }

    #[test]
    fn the_seal_finds_records_cut_from_the_end() {
        let p = temp("seal");
        let seal = write(&p, &sample());
        let all = lines(&p);
        set_lines(&p, &all[..4]);
        let c = read(&p, seed(SEED)).expect("a shorter journal still chains");
        match c.check_seal(&seal) {
            Err(JournalError::Lost {
                found: 4,
                sealed: 6,
            }) => {}
            other => panic!("expected lost records, got {other:?}"),
        }
        // A journal rewritten from scratch with other answers chains, but is not the sealed one.
        let mut other = sample();
        other[0] = Reply::answer(id("0:0"), Answer::Session(SessionAnswer::text("forged")));
        write(&p, &other);
        let c = read(&p, seed(SEED)).expect("reads");
        assert!(matches!(
            c.check_seal(&seal),
            Err(JournalError::Changed { sealed: 6 })
        ));
        // More records than sealed (appended after the last close) are fine.
        let mut more = sample();
        more.push(Reply::answer(id("0:5"), Answer::Evaluate(false)));
        write(&p, &more);
        read(&p, seed(SEED))
            .expect("reads")
            .check_seal(&seal)
            .expect("a sealed prefix");
    }

    #[test]
    fn only_a_failure_may_be_followed_by_another_record_for_its_request() {
        let p = temp("repeats");
        // A failed request asked again when the failed run was resumed: legitimate.
        let mut replies = sample();
        replies.push(Reply::failed(id("0:4"), Kind::Session, "boom again"));
        replies.push(Reply::answer(
            id("0:4"),
            Answer::Session(SessionAnswer::text("at last")),
        ));
        write(&p, &replies);
        let c = read(&p, seed(SEED)).expect("reads");
        c.check_repeats().expect("failures may be asked again");
        let replay = c.replies();
        assert_eq!(
            replay[&id("0:4")],
            Reply::answer(id("0:4"), Answer::Session(SessionAnswer::text("at last")))
        );
        // An answered request answered again: refused, unless forced (the first answer wins,
        // and the journal is rewritten without the repeat).
        let mut replies = sample();
        replies.push(Reply::answer(
            id("0:1"),
            Answer::Session(SessionAnswer::text("second")),
        ));
        write(&p, &replies);
        let c = read(&p, seed(SEED)).expect("reads");
        match c.check_repeats() {
            Err(JournalError::Repeated { id: r, line: 7 }) if r == id("0:1") => {}
            other => panic!("expected a repeat at line 7, got {other:?}"),
        }
        let fixed = rewrite(&p, seed(SEED), &c.kept()).expect("rewritten");
        assert_eq!(fixed.records, sample());
        fixed.check_repeats().expect("no repeats left");
        assert_eq!(read(&p, seed(SEED)).expect("reads").records, sample());
    }

    #[test]
    fn the_first_sync_syncs_the_files_given_first() {
        let p = temp("first");
        let _ = std::fs::remove_file(&p);
        let mut j = Journal::open(&p, &Contents::empty(seed(SEED))).expect("open");
        j.sync_first(vec![p.clone(), p.with_extension("missing")]);
        j.sync().expect("nothing appended: nothing to sync yet");
        j.append(&sample()[0]).expect("append");
        assert!(j.sync().is_err(), "the missing file was synced first");
        // Once tried, they are not tried again.
        j.append(&sample()[1]).expect("append");
        j.close().expect("close");
    }

    #[test]
    fn a_missing_journal_is_reported() {
        let p = temp("missing");
        let _ = std::fs::remove_file(&p);
        assert!(matches!(read(&p, 0), Err(JournalError::Missing)));
    }
}
