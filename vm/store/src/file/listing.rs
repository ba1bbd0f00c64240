//! What is under the runs root (each run's program, status, start time, answers journaled,
//! whether a process holds it), and pruning old or ended runs. A run whose lock a process
//! holds is never pruned: the lock is what tells a live run from a killed one,
//! whatever its record says.

use super::RunDir;
use crate::{PruneRule, Pruned, RunRow};
use std::path::Path;
use std::time::SystemTime;

/// The row of the run in `dir`.
pub(super) fn row(dir: &RunDir) -> RunRow {
    let live = dir.held();
    let path = std::fs::canonicalize(&dir.path).unwrap_or_else(|_| dir.path.clone());
    let mut row = match dir.record() {
        Ok(r) => RunRow::of(
            &r,
            dir.read_journal(&r).map_or(0, |c| c.records.len()),
            live,
        ),
        Err(e) => RunRow {
            id: dir.id.clone(),
            path: None,
            program: "?".into(),
            status: None,
            started: None,
            answered: 0,
            live,
            holder: None,
            lease_left: None,
            epoch: None,
            usage: None,
            error: Some(e.to_string()),
            waiting: Vec::new(),
            approvals: Vec::new(),
        },
    };
    row.id = dir.id.clone();
    row.path = Some(path);
    row
}

/// Every run under the state directory, oldest first.
pub(super) fn list(state_dir: Option<&Path>) -> Vec<RunRow> {
    RunDir::list(state_dir).iter().map(row).collect()
}

/// Prunes the runs under `state_dir` that `rule` selects as of `now`: each is taken with its
/// lock first (so a run being run is kept, and none can start while it goes), then removed.
pub(super) fn prune(state_dir: Option<&Path>, rule: &PruneRule, now: SystemTime) -> Vec<Pruned> {
    let mut done = Vec::new();
    for dir in RunDir::list(state_dir) {
        let row = row(&dir);
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
