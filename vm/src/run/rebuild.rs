//! A run's views rebuilt from its journal, in memory, for a reader: a run a crash left
//! behind may have `bindings/` and `state.md` that lag what its journal holds. The program
//! is replayed with the journal's answers through a fresh machine until it needs an answer
//! the journal does not have; nothing is asked of any driver and nothing is written, so a
//! reader never takes the run from a writer (the next writer rewrites the files as it
//! replays).

use super::{load_artifact, RunError};
use prose_machine::Reached;
use prose_runtime::record::new_machine;
use prose_store::journal;
use prose_store::view::{Rendered, RunView};
use prose_store::StoredRun;
use std::path::Path;

/// The views of `run` (kept in `views`) as its journal has them, and how many answers were
/// replayed to get there.
pub fn views_in_memory(run: &StoredRun, views: &Path) -> Result<(Rendered, usize), RunError> {
    let record = &run.record;
    let artifact = load_artifact(&run.id, &run.artifact)?;
    let mut replay = journal::replies(run.journal.clone());
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
    let mut view = RunView::in_memory(
        views.to_path_buf(),
        run.id.clone(),
        record.started.clone(),
        artifact,
        &inputs,
        record.agents.clone(),
    );
    let mut replayed = 0;
    loop {
        let step = machine.run();
        for e in machine.take_events() {
            view.observe(&e);
        }
        let Reached::Waiting { requests, .. } = step else {
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
    let rendered = view.rendered(&machine.snapshot(), record.status.as_str());
    Ok((rendered, replayed))
}
