//! Rebuilding a run's views from its journal without running it: for a run a crash left
//! behind, whose `bindings/` and `state.md` may lag what its journal holds. The program is
//! replayed with the journal's answers through a fresh machine until it needs an answer the
//! journal does not have; nothing is asked of any driver, and persistent agents' memory
//! files (which may live outside the run, where other runs write) are left alone.

use super::{new_machine, RunError};
use crate::store::view::RunView;
use crate::store::{RunDir, StoreError};
use prose_machine::Step;
use prose_runtime::record::RunStatus;
use prose_runtime::runner::Observer;
use std::sync::Arc;

/// What a rebuild found.
#[derive(Debug, PartialEq, Eq)]
pub enum Rebuilt {
    /// The run ended (finished or failed): its views were written when it did.
    Ended,
    /// The views were rebuilt; this many answers were replayed.
    Views(usize),
}

/// Takes the run in `dir` (refused while another process holds it) and, if it did not
/// end, rewrites its views from its journal. The journal must pass the checks a resume
/// makes.
pub fn rebuild_views(dir: &RunDir) -> Result<Rebuilt, RunError> {
    let ended = |status| matches!(status, RunStatus::Finished | RunStatus::Failed);
    // An ended run is not even locked: nothing is written to it.
    if ended(dir.record()?.status) {
        return Ok(Rebuilt::Ended);
    }
    let _lock = dir.lock()?;
    let record = dir.record()?;
    if ended(record.status) {
        return Ok(Rebuilt::Ended);
    }
    let invalid = |e: &dyn std::fmt::Display| StoreError::Invalid(format!("run {}: {e}", dir.id));
    let bytes = crate::store::fs::read(&dir.path.join("artifact.pbc"))
        .map_err(|e| StoreError::Io(dir.path.join("artifact.pbc"), e))?;
    let artifact = Arc::new(
        bytecode_spec::artifact::load(&bytes)
            .map_err(|e| invalid(&e))?
            .1,
    );
    let contents = dir.read_journal(&record).map_err(|e| invalid(&e))?;
    contents
        .check_seal(&record.journal)
        .map_err(|e| invalid(&e))?;
    contents.check_repeats().map_err(|e| invalid(&e))?;
    let mut replay = contents.replies();
    if let Some(failed) = record.error.as_ref().and_then(|e| e.request.as_ref()) {
        replay.remove(failed);
    }
    let mut machine =
        new_machine(&artifact, &record.inputs, &record.options).map_err(RunError::Program)?;
    for h in &record.agents {
        if let Some(memory) = &h.memory {
            machine.preload_memory(&h.name, memory.clone());
        }
    }
    let inputs: Vec<_> = record
        .inputs
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut view = RunView::new(
        dir.path.clone(),
        dir.id.clone(),
        record.started.clone(),
        artifact,
        &inputs,
        record.agents.clone(),
    );
    view.leave_agent_files();
    let mut replayed = 0;
    loop {
        let step = machine.run();
        for e in machine.take_events() {
            view.event(&e);
        }
        let Step::Waiting { requests, .. } = step else {
            break;
        };
        let mut any = false;
        for req in requests {
            if let Some(reply) = replay.remove(&req.id) {
                machine.complete(reply);
                replayed += 1;
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    view.write_as(&machine.snapshot(), record.status.as_str())?;
    Ok(Rebuilt::Views(replayed))
}
