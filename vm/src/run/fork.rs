//! Forking a run: a new run of another run's program and inputs that reuses that run's
//! answers up to a request and asks its own driver for the rest, so that two models (or two
//! settings) can be compared on the same program without paying twice for what they share.
//! The run forked from is only read; any store holds either.

use super::{load_artifact, Place, Run, RunError};
use prose_machine::protocol::{Reply, RequestId};
use prose_runtime::driver::settings::DriverSettings;
use prose_runtime::program::Program;
use prose_runtime::record::{new_machine, ForkedFrom, RunRecord};
use prose_store::{agents, journal, Store, StoreError};

impl Run {
    /// Starts a new run in `store` of run `id`'s program with its inputs, options and
    /// persistent agents' memory, answered by `driver`. Its journal starts with the answers
    /// `id` journaled before request `from` was first answered (every answer, without
    /// `from`); failures are never reused, so a failed request is asked again. The record
    /// says where the run was forked from. Returns the run and how many answers it reuses.
    pub async fn fork(
        store: &dyn Store,
        id: &str,
        from: Option<&RequestId>,
        driver: DriverSettings,
        place: &Place,
    ) -> Result<(Run, usize), RunError> {
        let source = store.read(id).await?;
        place.check_trust(&source.artifact)?;
        let artifact = load_artifact(&source.id, &source.artifact)?;
        let prefix = prefix(&source.journal, from)
            .map_err(|e| RunError::Store(StoreError::Invalid(format!("run {}: {e}", source.id))))?;
        let program = Program {
            artifact: artifact.clone(),
            bytes: source.artifact,
            origin: source.record.origin.clone(),
        };
        let machine = new_machine(&artifact, &source.record.inputs, &source.record.options)
            .map_err(RunError::Program)?;
        let workdir = std::env::current_dir()
            .map_err(|e| RunError::Setup(format!("the working directory: {e}")))?;
        let mut record = RunRecord::new(
            &program,
            source.record.inputs.clone(),
            driver,
            source.record.options.clone(),
            workdir,
        );
        record.forked_from = Some(ForkedFrom {
            run: source.id.clone(),
            from: from.map(RequestId::to_string),
            reused: prefix.len(),
        });
        // The memory its persistent agents started from, so the reused answers replay.
        record.agents = source.record.agents.clone();
        let (workshop, warnings) = place.workshop(&record, &artifact)?;
        record.skills = workshop.skills_used().to_vec();
        let mut held = store.create(&mut record, &program, &prefix).await?;
        if !record.agents.is_empty() {
            // Its own homes: an agent kept with a run (`persist: true`) keeps this run's
            // memory in this run's directory, not in the run it forks.
            record.agents = agents::rehome(
                std::mem::take(&mut record.agents),
                &artifact,
                held.views(),
                &place.root(),
            )?;
            held.stage_record(&record).await?;
        }
        let sink = held.journal()?;
        let reused = prefix.len();
        let mut run = Run::assemble(
            held,
            record,
            artifact,
            machine,
            (sink, journal::replies(prefix)),
            place,
        );
        run.warnings = warnings;
        Ok((run, reused))
    }
}

/// The answers of `records` (a journal, in the order written) written before the first
/// record of request `from` (all of them without `from`), failures left out; an error when
/// the journal never mentions `from`.
fn prefix(records: &[Reply], from: Option<&RequestId>) -> Result<Vec<Reply>, String> {
    let cut = match from {
        None => records.len(),
        Some(from) => {
            let from = from.whole();
            records
                .iter()
                .position(|r| r.id.whole() == from)
                .ok_or_else(|| {
                    let mut asked: Vec<String> = Vec::new();
                    for r in records {
                        let id = r.id.whole().to_string();
                        if !asked.contains(&id) {
                            asked.push(id);
                        }
                    }
                    format!(
                        "request {from} was never asked; its requests are: {}",
                        if asked.is_empty() {
                            "none".to_string()
                        } else {
                            asked.join(", ")
                        }
                    )
                })?
        }
    };
    Ok(journal::in_order(records[..cut].to_vec())
        .into_iter()
        .filter(|r| r.outcome.is_ok())
        .collect())
}
