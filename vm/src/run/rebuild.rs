//! Rebuilding a run's views from its journal without running it: for a run a crash left
//! behind, whose `bindings/` and `state.md` may lag what its journal holds. The program is
//! replayed with the journal's answers through a fresh machine until it needs an answer the
//! journal does not have; nothing is asked of any driver, and persistent agents' memory
//! files (which may live outside the run, where other runs write) are left alone.

use super::{load_artifact, RunError};
use prose_machine::Step;
use prose_runtime::record::{new_machine, RunStatus};
use prose_runtime::runner::Observer;
use prose_store::view::RunView;
use prose_store::{journal, JournalCheck, Store, Taken};

/// What a rebuild found.
#[derive(Debug, PartialEq, Eq)]
pub enum Rebuilt {
    /// The run ended (finished or failed): its views were written when it did.
    Ended,
    /// The views were rebuilt; this many answers were replayed.
    Views(usize),
}

/// Takes run `id` of `store` (refused while another process holds it) and, if it did not
/// end, rewrites its views from its journal. The journal must pass the checks a resume
/// makes.
pub async fn rebuild_views(store: &dyn Store, id: &str) -> Result<Rebuilt, RunError> {
    let ended = |status| matches!(status, RunStatus::Finished | RunStatus::Failed);
    // An ended run is not even taken: nothing is written to it.
    if ended(store.record(id).await?.1.status) {
        return Ok(Rebuilt::Ended);
    }
    let taken = match store.take(id, JournalCheck::Strict).await? {
        Taken::Finished(_) => return Ok(Rebuilt::Ended),
        Taken::Held(t) => t,
    };
    let record = &taken.record;
    if ended(record.status) {
        return Ok(Rebuilt::Ended);
    }
    let artifact = load_artifact(taken.held.id(), &taken.artifact)?;
    let mut replay = journal::replies(taken.journal.clone());
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
        taken.held.views().to_path_buf(),
        taken.held.id().to_string(),
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
