//! Which runs `runs prune` removes, and what it did with each, for every store.

use crate::RunRow;
use prose_runtime::clock::parse_timestamp;
use prose_runtime::record::RunStatus;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
        let Some(status) = row.run_status() else {
            return false;
        };
        let status_ok = self.statuses().contains(&status);
        let age_ok = match self.older_than {
            None => true,
            Some(min) => age(row, now).is_some_and(|a| a >= min),
        };
        status_ok && age_ok
    }
}

/// How long ago `row`'s run started, as of `now`.
fn age(row: &RunRow, now: SystemTime) -> Option<Duration> {
    let started = parse_timestamp(row.started.as_deref()?)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(now.saturating_sub(started)))
}

/// What pruning did with one run.
#[derive(Clone, Debug, PartialEq)]
pub enum Pruned {
    /// Removed.
    Removed(RunRow),
    /// Would be removed (a dry run).
    WouldRemove(RunRow),
    /// Selected, but kept: a process holds it, or it could not be removed.
    Kept(RunRow, String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: Option<RunStatus>, started: &str) -> RunRow {
        RunRow {
            id: "r".into(),
            path: None,
            program: "p".into(),
            status: status.map(|s| s.as_str().to_string()),
            started: Some(started.into()),
            answered: 0,
            live: false,
            holder: None,
            lease_left: None,
            epoch: None,
            usage: None,
            error: None,
            waiting: Vec::new(),
            approvals: Vec::new(),
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
