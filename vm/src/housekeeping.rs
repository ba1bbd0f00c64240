//! Runs housekeeping: what is under the runs root (each run's program, status, start time,
//! answers journaled, whether a process holds it), filtered by status, and pruning old or
//! ended runs. A run whose lock a process holds is never pruned: the lock (`flock`) is what
//! tells a live run from a killed one, whatever its record says.

use crate::store::RunDir;
use prose_runtime::clock::parse_timestamp;
use prose_runtime::record::RunStatus;
use serde::Serialize;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One run as listed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRow {
    /// Its id.
    pub id: String,
    /// Its directory (absolute when it can be made so).
    pub path: PathBuf,
    /// The program's name (`?` when the record cannot be read).
    pub program: String,
    /// Its status; `None` when `run.json` cannot be read.
    pub status: Option<RunStatus>,
    /// When it started (UTC, ISO 8601).
    pub started: Option<String>,
    /// Answers in its journal.
    pub answered: usize,
    /// A process is running it now (it holds the run's lock).
    pub live: bool,
    /// Tokens and cost it used, as of when it last stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<prose_machine::protocol::Usage>,
    /// Why it failed, or why its record cannot be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RunRow {
    /// The row of the run in `dir`.
    pub fn read(dir: &RunDir) -> RunRow {
        let live = held(&dir.path);
        let path = std::fs::canonicalize(&dir.path).unwrap_or_else(|_| dir.path.clone());
        match dir.record() {
            Ok(r) => RunRow {
                answered: dir.read_journal(&r).map_or(0, |c| c.records.len()),
                id: dir.id.clone(),
                path: path.clone(),
                program: r.program,
                status: Some(r.status),
                started: Some(r.started),
                live,
                usage: r.usage,
                error: r.error.map(|e| e.message),
            },
            Err(e) => RunRow {
                id: dir.id.clone(),
                path,
                program: "?".into(),
                status: None,
                started: None,
                answered: 0,
                live,
                usage: None,
                error: Some(e.to_string()),
            },
        }
    }

    /// The status as `runs` shows it (`unreadable` for a record that cannot be read).
    pub fn status_text(&self) -> &'static str {
        self.status.map_or("unreadable", RunStatus::as_str)
    }

    /// How long ago it started, as of `now`.
    pub fn age(&self, now: SystemTime) -> Option<Duration> {
        let started = parse_timestamp(self.started.as_deref()?)?;
        let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
        Some(Duration::from_secs(now.saturating_sub(started)))
    }
}

/// Every run under the state directory, oldest first.
pub fn list(state_dir: Option<&Path>) -> Vec<RunRow> {
    RunDir::list(state_dir).iter().map(RunRow::read).collect()
}

/// Whether a process holds the lock of the run in `dir` (probed with a shared lock taken and
/// dropped at once, so the lock file is neither created nor written).
pub fn held(dir: &Path) -> bool {
    let Ok(file) = std::fs::File::open(dir.join("lock")) else {
        return false;
    };
    // SAFETY: flock(2) on a descriptor this function owns; no memory is shared.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

/// A status by its name in `run.json` (`running`, `finished`, ...).
pub fn parse_status(s: &str) -> Result<RunStatus, String> {
    RunStatus::ALL
        .into_iter()
        .find(|status| status.as_str() == s)
        .ok_or_else(|| {
            let names: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            format!("unknown status `{s}` (want one of: {})", names.join(", "))
        })
}

/// A duration such as `7d`, `12h`, `30m`, `45s`, `2w` or `1d12h`.
pub fn parse_age(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration (for example 7d, 12h, 30m, 1d12h)");
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in s.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        digits.clear();
    }
    if !digits.is_empty() || total == 0 && s.trim().is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

/// Which runs to prune.
#[derive(Clone, Debug, Default)]
pub struct PruneRule {
    /// Only runs that started at least this long ago.
    pub older_than: Option<Duration>,
    /// Only runs with one of these statuses (default: ended runs, `finished` and `failed`).
    pub statuses: Vec<RunStatus>,
    /// Say what would be removed, remove nothing.
    pub dry_run: bool,
}

impl PruneRule {
    /// The statuses this rule prunes: those it names, else the ended ones.
    pub fn statuses(&self) -> Vec<RunStatus> {
        if self.statuses.is_empty() {
            vec![RunStatus::Finished, RunStatus::Failed]
        } else {
            self.statuses.clone()
        }
    }

    /// Whether `row` is one of the runs this rule prunes, as of `now`.
    pub fn selects(&self, row: &RunRow, now: SystemTime) -> bool {
        let Some(status) = row.status else {
            return false;
        };
        let status_ok = self.statuses().contains(&status);
        let age_ok = match self.older_than {
            None => true,
            Some(min) => row.age(now).is_some_and(|a| a >= min),
        };
        status_ok && age_ok
    }
}

/// What pruning did with one run (a row of the file store's listing, or of another store's).
#[derive(Clone, Debug, PartialEq)]
pub enum Pruned<Row = RunRow> {
    /// Removed.
    Removed(Row),
    /// Would be removed (a dry run).
    WouldRemove(Row),
    /// Selected, but kept: a process holds it, or it could not be removed.
    Kept(Row, String),
}

/// Prunes the runs under `state_dir` that `rule` selects as of `now`: each is taken with its
/// lock first (so a run being run is kept, and none can start while it goes), then removed.
pub fn prune(state_dir: Option<&Path>, rule: &PruneRule, now: SystemTime) -> Vec<Pruned> {
    let mut done = Vec::new();
    for dir in RunDir::list(state_dir) {
        let row = RunRow::read(&dir);
        if !rule.selects(&row, now) {
            continue;
        }
        let lock = match dir.lock() {
            Ok(l) => l,
            Err(e) => {
                done.push(Pruned::Kept(row, e.to_string()));
                continue;
            }
        };
        if rule.dry_run {
            done.push(Pruned::WouldRemove(row));
            continue;
        }
        let removed = std::fs::remove_dir_all(&dir.path);
        drop(lock);
        done.push(match removed {
            Ok(()) => Pruned::Removed(row),
            Err(e) => Pruned::Kept(row, format!("cannot remove {}: {e}", dir.path.display())),
        });
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_reads_by_its_name_and_others_are_refused() {
        for status in RunStatus::ALL {
            assert_eq!(parse_status(status.as_str()), Ok(status));
        }
        let e = parse_status("done").expect_err("unknown");
        assert_eq!(
            e,
            "unknown status `done` (want one of: running, interrupted, paused, finished, failed)"
        );
    }

    #[test]
    fn ages_read_in_the_usual_units() {
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("1d12h"), Ok(Duration::from_secs(36 * 3600)));
        assert_eq!(parse_age("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_age("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_age("0d"), Ok(Duration::ZERO));
        for bad in ["", "7", "d", "7x", "-1d", "1.5d", "99999999999999999999w"] {
            assert!(parse_age(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn statuses_are_named_as_in_the_record() {
        assert_eq!(parse_status("failed"), Ok(RunStatus::Failed));
        assert!(parse_status("done").is_err_and(|e| e.contains("finished")));
    }

    fn row(status: Option<RunStatus>, started: &str) -> RunRow {
        RunRow {
            id: "r".into(),
            path: PathBuf::from("r"),
            program: "p".into(),
            status,
            started: Some(started.into()),
            answered: 0,
            live: false,
            usage: None,
            error: None,
        }
    }

    #[test]
    fn a_rule_selects_by_status_and_age() {
        let now =
            UNIX_EPOCH + Duration::from_secs(parse_timestamp("2025-01-10T00:00:00Z").unwrap_or(0));
        let old = "2025-01-01T00:00:00Z";
        let new = "2025-01-09T12:00:00Z";
        let week = PruneRule {
            older_than: Some(Duration::from_secs(7 * 86_400)),
            ..PruneRule::default()
        };
        assert!(week.selects(&row(Some(RunStatus::Finished), old), now));
        assert!(week.selects(&row(Some(RunStatus::Failed), old), now));
        assert!(!week.selects(&row(Some(RunStatus::Finished), new), now));
        // Resumable runs only when asked for by status; unreadable ones never.
        assert!(!week.selects(&row(Some(RunStatus::Running), old), now));
        assert!(!week.selects(&row(None, old), now));
        let running = PruneRule {
            statuses: vec![RunStatus::Running],
            ..PruneRule::default()
        };
        assert!(running.selects(&row(Some(RunStatus::Running), new), now));
        assert!(!running.selects(&row(Some(RunStatus::Finished), new), now));
    }
}
