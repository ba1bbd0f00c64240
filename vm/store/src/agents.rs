//! Where persistent agents keep their memory: `memory.md` (the memory as the driver last
//! returned it) and `segments.md`, one numbered segment per session appended to the one
//! file (a file per segment cost a file creation per session: 400 of them were most of a
//! patrol loop's time under the mock), in a directory chosen by the agent's `persist:` scope.
//! What each agent had when a run started is recorded in `run.json`, so a resumed run starts
//! from the same memory even if another run has changed the files since, and gives its
//! segments the same numbers; a resumed run appends none that the log already has.

use super::{fs, StoreError};
use bytecode_spec::{Artifact, Persist};
use prose_runtime::record::AgentHome;
use std::path::{Path, PathBuf};

/// The persistent agents of `artifact`'s program (module 0), their directories for a run in
/// `run_dir` whose state root is `state_root` (`.prose` or `--state-dir`), and what those
/// directories hold now. An agent name or persist path that cannot be a path (the verifier
/// already refuses them) is an error, never a directory elsewhere.
pub fn discover(
    artifact: &Artifact,
    run_dir: &Path,
    state_root: &Path,
) -> Result<Vec<AgentHome>, StoreError> {
    places(artifact, run_dir, state_root)?
        .into_iter()
        .map(|(name, scope, dir)| {
            let memory = fs::read_to_string(&dir.join("memory.md")).ok();
            let segments = count_segments(&dir, &name).max(read_log(&dir, "").last);
            Ok(AgentHome {
                name,
                scope: scope.into(),
                dir,
                memory,
                segments,
            })
        })
        .collect()
}

/// `recorded`, the persistent agents a run's record names, each in the directory the
/// program gives it for a run in `run_dir` (as [`discover`] finds them), with the memory
/// and segment count the record kept. A record read from a store is not trusted to say
/// where files go: only the program and the run's place decide, and an agent the program
/// does not declare is dropped.
pub fn rehome(
    recorded: Vec<AgentHome>,
    artifact: &Artifact,
    run_dir: &Path,
    state_root: &Path,
) -> Result<Vec<AgentHome>, StoreError> {
    let places = places(artifact, run_dir, state_root)?;
    Ok(recorded
        .into_iter()
        .filter_map(|mut h| {
            let (_, scope, dir) = places.iter().find(|(name, _, _)| *name == h.name)?;
            h.scope = (*scope).into();
            h.dir = dir.clone();
            Some(h)
        })
        .collect())
}

/// Each persistent agent of `artifact`'s program with its scope and directory, for a run in
/// `run_dir` whose state root is `state_root`.
fn places(
    artifact: &Artifact,
    run_dir: &Path,
    state_root: &Path,
) -> Result<Vec<(String, &'static str, PathBuf)>, StoreError> {
    let m = &artifact.modules[0];
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("~"), PathBuf::from);
    let mut places = Vec::new();
    for a in m.agents.values() {
        let name = m.strings[a.name].clone();
        let file = fs::file_name(&name)?;
        let (scope, dir) = match a.persist {
            Persist::None => continue,
            Persist::Run => ("execution", run_dir.join("agents").join(file)),
            Persist::Project => ("project", state_root.join("agents").join(file)),
            Persist::User => ("user", home.join(".prose").join("agents").join(file)),
            Persist::Path(p) => ("path", fs::relative_dir(Path::new(""), &m.strings[p])?),
        };
        places.push((name, scope, dir));
    }
    Ok(places)
}

/// The highest segment number among `dir`'s `{name}-NNN.md` files, one per segment as
/// versions before the log wrote them (0 if none): numbering goes on after them.
fn count_segments(dir: &Path, name: &str) -> u32 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            let n = file
                .strip_prefix(name)?
                .strip_prefix('-')?
                .strip_suffix(".md")?;
            n.parse::<u32>().ok()
        })
        .max()
        .unwrap_or(0)
}

/// The file in an agent's directory that holds its segments, one after another.
pub const SEGMENT_LOG: &str = "segments.md";

/// Segment `n` as the log holds it: a header naming the run and request it records and the
/// length of the answer, so a reader finds where each segment ends whatever the answer
/// says, and a segment cut short (a crash while appending) is told from a whole one.
pub fn segment_entry(n: u32, run: &str, request: &str, answer: &str) -> String {
    format!(
        "# Segment {n:03}\n\nrun: {run}\nrequest: {request}\nbytes: {}\n\n## Answer\n\n{answer}\n\n",
        answer.len()
    )
}

/// What an agent's segment log holds.
#[derive(Debug, Default, PartialEq)]
pub struct SegmentLog {
    /// The highest segment number in it (0 if none).
    pub last: u32,
    /// The bytes of whole segments from the start; anything after them (a segment cut short,
    /// or text not written by the VM) is not a segment.
    pub whole: u64,
    /// The requests whose segments it holds for the run asked about.
    pub requests: std::collections::HashSet<String>,
}

/// Reads the segment log in `dir`, collecting the requests recorded for run `run`.
pub fn read_log(dir: &Path, run: &str) -> SegmentLog {
    let mut log = SegmentLog::default();
    let Ok(bytes) = fs::read(&dir.join(SEGMENT_LOG)) else {
        return log;
    };
    let mut rest: &[u8] = &bytes;
    while let Some((n, entry_run, request, len)) = parse_entry(rest) {
        log.last = log.last.max(n);
        log.whole += len as u64;
        if entry_run == run.as_bytes() {
            log.requests
                .insert(String::from_utf8_lossy(request).into_owned());
        }
        rest = &rest[len..];
    }
    log
}

/// The segment at the start of `bytes`: its number, run, request and whole length.
fn parse_entry(bytes: &[u8]) -> Option<(u32, &[u8], &[u8], usize)> {
    fn field<'a>(b: &'a [u8], prefix: &str, end: &str) -> Option<(&'a [u8], &'a [u8])> {
        let b = b.strip_prefix(prefix.as_bytes())?;
        let at = b.iter().position(|&c| c == b'\n')?;
        Some((&b[..at], b[at..].strip_prefix(end.as_bytes())?))
    }
    let (n, b) = field(bytes, "# Segment ", "\n\n")?;
    let (run, b) = field(b, "run: ", "\n")?;
    let (request, b) = field(b, "request: ", "\n")?;
    let (len, b) = field(b, "bytes: ", "\n\n## Answer\n\n")?;
    let n: u32 = std::str::from_utf8(n).ok()?.parse().ok()?;
    let len: usize = std::str::from_utf8(len).ok()?.parse().ok()?;
    let after = b.get(len..)?.strip_prefix(b"\n\n")?;
    Some((n, run, request, bytes.len() - after.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_counted_by_their_highest_number() {
        let dir = std::env::temp_dir().join(format!("prose-agents-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        assert_eq!(count_segments(&dir, "captain"), 0);
        for f in [
            "captain-001.md",
            "captain-007.md",
            "captain-x.md",
            "cap-009.md",
        ] {
            std::fs::write(dir.join(f), "").expect("file");
        }
        assert_eq!(count_segments(&dir, "captain"), 7);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_log_is_read_segment_by_segment_whatever_the_answers_say() {
        let dir = std::env::temp_dir().join(format!("prose-agents-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        assert_eq!(read_log(&dir, "r1"), SegmentLog::default());
        // An answer that looks like a segment of its own is read as text.
        let forged = segment_entry(999, "r1", "9:9", "forged");
        let entries = [
            segment_entry(4, "r0", "0:0", "old run"),
            segment_entry(5, "r1", "0:1", &format!("{forged}# Segment 998\n")),
            segment_entry(6, "r1", "0:2", "ünïcode answer"),
        ];
        let text = entries.concat();
        std::fs::write(dir.join(SEGMENT_LOG), &text).expect("log");
        let log = read_log(&dir, "r1");
        assert_eq!(log.last, 6);
        assert_eq!(log.whole, text.len() as u64);
        let mut requests: Vec<_> = log.requests.into_iter().collect();
        requests.sort();
        assert_eq!(requests, ["0:1", "0:2"]);
        // A segment cut short is not one: the log ends before it.
        let cut = &entries[2][..entries[2].len() - 5];
        std::fs::write(
            dir.join(SEGMENT_LOG),
            format!("{}{}{cut}", entries[0], entries[1]),
        )
        .expect("log");
        let log = read_log(&dir, "r1");
        assert_eq!(
            (log.last, log.whole),
            (5, (entries[0].len() + entries[1].len()) as u64)
        );
        assert_eq!(read_log(&dir, "r0").requests.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn homes_round_trip_through_run_json() {
        let homes = vec![AgentHome {
            name: "captain".into(),
            scope: "project".into(),
            dir: PathBuf::from(".prose/agents/captain"),
            memory: Some("- decided X".into()),
            segments: 3,
        }];
        let json = serde_json::to_string(&homes).expect("serialize");
        assert_eq!(
            serde_json::from_str::<Vec<AgentHome>>(&json).expect("parse"),
            homes
        );
    }
}
