//! Runs as a library: start a durable run of a verified program in a store, or resume one,
//! then drive it to the end with a driver and an observer. The CLI, the worker, the
//! benchmarks and the tests all go through here, so a run's lifecycle (its record, hold,
//! journal, views and persistent agents) lives in one place, written once against the
//! [`Store`] trait.
//!
//! ```text
//! Program::from_bytes ─┐
//!                      ├─ Run::start(store, program, inputs, driver, options) ─┐
//! run id ──────────────┴─ Run::resume(store, id, place, how) ──────────────────┴─ run.drive(driver, observer)
//! ```

pub mod answer;
pub mod compare;
mod drive;
mod error;
mod fork;
mod place;
pub mod rebuild;
pub mod transcript;

use bytecode_spec::verify::Verified;
use prose_machine::protocol::{Kind, Reply, Request, RequestId};
use prose_machine::value::Value;
use prose_machine::Machine;
use prose_runtime::driver::settings::DriverSettings;
use prose_runtime::program::Program;
use prose_runtime::record::{new_machine, ExecOptions, RunRecord, RunStatus};
use prose_runtime::runner::journal::{JournalSink, Replies};
use prose_store::{agents, journal, HeldRun, JournalCheck, Store, StoreError, Taken, TakenRun};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use error::{RunError, Unequipped};
pub use place::{check_budget, connect, memo_for, models_named, Place};

/// A run ready to be driven: where it is kept (held by this process), its record, machine
/// and the answers to replay.
pub struct Run {
    held: Box<dyn HeldRun>,
    record: RunRecord,
    artifact: Arc<Verified>,
    machine: Machine,
    journal: Box<dyn JournalSink>,
    replay: Replies,
    place: Place,
    /// What the run should be told of as it starts (a skill the mock does not need).
    warnings: Vec<String>,
}

/// What a resume changes, besides taking the run up again.
#[derive(Clone, Debug, Default)]
pub struct Resuming {
    /// A driver replacing the recorded one (and recorded).
    pub driver: Option<DriverSettings>,
    /// Values for inputs the run still needs (a mid-program input it could not get); never
    /// a new value for one it has.
    pub inputs: BTreeMap<String, Value>,
    /// How the journal is checked.
    pub journal: JournalCheck,
    /// A new value size limit (recorded): a run that failed with E213 can go on.
    pub max_value_size: Option<u64>,
    /// A new frame memory limit (recorded): a run that failed with E218 can go on.
    pub max_frame_memory: Option<u64>,
    /// A new limit on parallel branches (recorded): a run that failed with E209 can go on.
    pub max_branches: Option<u64>,
    /// Where its sessions act from now on (a worker's working directory); by default where
    /// they did, or, for a run that recorded none (submitted to a queue), here.
    pub workdir: Option<PathBuf>,
}

/// A run taken that could not be taken up: still held, as it was, and why.
pub struct NotTakenUp {
    /// The hold.
    pub held: Box<dyn HeldRun>,
    /// Its record as it was.
    pub record: RunRecord,
    /// Why it cannot go on.
    pub error: RunError,
}

/// How a resume begins.
pub enum Resumed {
    /// The run had finished: nothing to do.
    Finished(Box<RunRecord>),
    /// The run continues.
    Ready(Box<Run>),
}

impl Run {
    /// Starts a new run of `program` with top-level `inputs`, answered by `driver`, in
    /// `store`: creates it and its record, and holds it.
    pub async fn start(
        store: &dyn Store,
        program: &Program,
        inputs: BTreeMap<String, Value>,
        driver: DriverSettings,
        options: ExecOptions,
        place: &Place,
    ) -> Result<Run, RunError> {
        place.check_trust(&program.bytes)?;
        let artifact = program.artifact.clone();
        let machine = new_machine(&artifact, &inputs, &options).map_err(RunError::Program)?;
        let workdir = match &place.workdir {
            Some(w) => w.clone(),
            None => std::env::current_dir()
                .map_err(|e| RunError::Setup(format!("the working directory: {e}")))?,
        };
        let mut record = RunRecord::new(program, inputs, driver, options, workdir);
        // Skills are resolved before anything is created or asked.
        let (workshop, warnings) = place.workshop(&record, &artifact)?;
        record.skills = workshop.skills_used().to_vec();
        let mut held = store.create(&mut record, program, &[]).await?;
        // Persistent agents: what their memory is as the run starts, kept with the run so
        // that a resume starts from the same memory.
        record.agents = agents::discover(&artifact, held.views(), &place.root())?;
        if !record.agents.is_empty() {
            held.stage_record(&record).await?;
        }
        let journal = held.journal()?;
        let mut run = Run::assemble(
            held,
            record,
            artifact,
            machine,
            (journal, Replies::default()),
            place,
        );
        run.warnings = warnings;
        Ok(run)
    }

    /// Takes up run `id` of `store` again: its journal's answers are replayed, never asked
    /// again. A failed run asks the request whose failure ended it again. What `how` says
    /// changes (a driver replacing the recorded one, values for inputs the run still needs,
    /// new limits); the journal is checked as `how.journal` says: one that is missing, lost
    /// records it held when it was last closed, or answers a request twice is refused unless
    /// forced.
    pub async fn resume(
        store: &dyn Store,
        id: &str,
        place: &Place,
        how: Resuming,
    ) -> Result<Resumed, RunError> {
        match store.take(id, how.journal).await? {
            Taken::Finished(record) => Ok(Resumed::Finished(record)),
            Taken::Held(taken) => match Run::take_up(*taken, how, place).await {
                Ok(run) => Ok(Resumed::Ready(Box::new(run))),
                Err(not) => Err(given_back(not.held, not.error).await),
            },
        }
    }

    /// Continues the run `taken` holds (see [`Run::resume`]). A run that cannot go on comes
    /// back still held, with why, for the caller to give back or to record as failed.
    pub async fn take_up(
        taken: TakenRun,
        how: Resuming,
        place: &Place,
    ) -> Result<Run, Box<NotTakenUp>> {
        let TakenRun {
            held,
            record,
            artifact,
            journal,
        } = taken;
        let artifact = match place
            .check_trust(&artifact)
            .and_then(|()| load_artifact(held.id(), &artifact))
        {
            Ok(a) => a,
            Err(error) => {
                return Err(Box::new(NotTakenUp {
                    held,
                    record,
                    error,
                }))
            }
        };
        let failed = record.error.as_ref().and_then(|e| e.request.clone());
        let mut replay = journal::replies(journal);
        if let Some(failed) = &failed {
            replay.retain(|_, r| !is_failure_of(r, failed));
        }
        Run::continue_with(held, record, artifact, replay, how, place).await
    }

    /// Like [`Run::resume`], but for a program edited since the run started: `program` (the
    /// edited one) replaces the run's, and a journaled answer is kept only where the edited
    /// program asks the same kind of question, under the same id, from a statement whose
    /// text has not changed; the rest is asked again. Returns what will be asked again.
    pub async fn resume_edited(
        store: &dyn Store,
        id: &str,
        program: &Program,
        how: Resuming,
        place: &Place,
    ) -> Result<(Resumed, Vec<String>), RunError> {
        // The edited program is what runs from here on: it must pass as a new one would.
        place.check_trust(&program.bytes)?;
        let taken = match store.take(id, how.journal).await? {
            Taken::Finished(record) => return Ok((Resumed::Finished(record), Vec::new())),
            Taken::Held(taken) => *taken,
        };
        let TakenRun {
            mut held,
            mut record,
            artifact,
            journal,
        } = taken;
        let old = match load_artifact(held.id(), &artifact) {
            Ok(a) => a,
            Err(e) => return Err(given_back(held, e).await),
        };
        let failed = record.error.as_ref().and_then(|e| e.request.clone());
        let replies: Vec<Reply> = journal::in_order(journal)
            .into_iter()
            .filter(|r| !failed.as_ref().is_some_and(|f| is_failure_of(r, f)))
            .collect();
        let (kept, asked_again) = match still_holding(&record, &old, program, &replies) {
            Ok(k) => k,
            Err(e) => return Err(given_back(held, e).await),
        };
        let kept: Vec<&Reply> = replies
            .iter()
            .filter(|r| kept.contains(&r.id.whole()))
            .collect();
        // The journal keeps only what still holds, so no later resume can use the rest.
        let rewritten = async {
            record.journal = held.rewrite_journal(&kept).await?;
            held.replace_program(program).await?;
            Ok::<_, StoreError>(())
        };
        if let Err(e) = rewritten.await {
            return Err(given_back(held, e.into()).await);
        }
        record.artifact_sha256 = program.sha256();
        let replay = journal::replies(kept.into_iter().cloned().collect());
        match Run::continue_with(held, record, program.artifact.clone(), replay, how, place).await {
            Ok(run) => Ok((Resumed::Ready(Box::new(run)), asked_again)),
            Err(not) => Err(given_back(not.held, not.error).await),
        }
    }

    /// The run taken up, continuing with its journal and the answers to replay, changed as
    /// `how` says; budgets given in `place` replace the recorded ones.
    async fn continue_with(
        mut held: Box<dyn HeldRun>,
        record: RunRecord,
        artifact: Arc<Verified>,
        replay: Replies,
        how: Resuming,
        place: &Place,
    ) -> Result<Run, Box<NotTakenUp>> {
        let prepared = async {
            let journal = held.journal()?;
            let (changed, machine) =
                Run::changed(record.clone(), &artifact, held.views(), how, place)?;
            held.write_record(&changed).await?;
            Ok::<_, RunError>((journal, changed, machine))
        };
        let (journal, record, machine) = match prepared.await {
            Ok(p) => p,
            Err(error) => {
                return Err(Box::new(NotTakenUp {
                    held,
                    record,
                    error,
                }))
            }
        };
        Ok(Run::assemble(
            held,
            record,
            artifact,
            machine,
            (journal, replay),
            place,
        ))
    }

    /// `record` changed as `how` says (budgets given in `place` replacing the recorded
    /// ones), running again, and a machine for it. A run that never began (submitted to a
    /// queue) finds its persistent agents' memory now, for views in `views`.
    fn changed(
        mut record: RunRecord,
        artifact: &Arc<Verified>,
        views: &Path,
        how: Resuming,
        place: &Place,
    ) -> Result<(RunRecord, Machine), RunError> {
        let Resuming {
            driver,
            inputs,
            journal: _,
            max_value_size,
            max_frame_memory,
            max_branches,
            workdir,
        } = how;
        if let Some(d) = driver {
            record.driver = d;
        }
        match workdir {
            Some(w) => record.workdir = w,
            None if record.workdir.is_relative() => {
                record.workdir = std::env::current_dir()
                    .map_err(|e| RunError::Setup(format!("the working directory: {e}")))?
            }
            None => {}
        }
        record.agents = if record.journal.records == 0 && record.agents.is_empty() {
            agents::discover(artifact, views, &place.root())?
        } else {
            agents::rehome(
                std::mem::take(&mut record.agents),
                artifact,
                views,
                &place.root(),
            )?
        };
        if let Some(n) = max_value_size {
            record.options.max_value_size = n;
        }
        if let Some(n) = max_frame_memory {
            record.options.max_frame_memory = n;
        }
        if let Some(n) = max_branches {
            record.options.max_branches = n;
        }
        if let Some(t) = place.budget.0 {
            record.options.max_tokens = Some(t);
        }
        if let Some(c) = place.budget.1 {
            record.options.max_cost = Some(c);
        }
        for (name, value) in inputs {
            match record.inputs.get(&name) {
                Some(old) if *old != value => {
                    return Err(RunError::Setup(format!(
                    "input `{name}` was given as {:?} when the run started; a resumed run keeps it",
                    old.display()
                )))
                }
                _ => {
                    record.inputs.insert(name, value);
                }
            }
        }
        let machine =
            new_machine(artifact, &record.inputs, &record.options).map_err(RunError::Program)?;
        record.status = RunStatus::Running;
        record.error = None;
        // What it still waits for, it asks again (and waits again if no one answers). The
        // approvals stay listed until the run stops again: they tell the calls that waited
        // (and never ran) from calls a crash cut short.
        record.waiting.clear();
        Ok((record, machine))
    }

    fn assemble(
        held: Box<dyn HeldRun>,
        record: RunRecord,
        artifact: Arc<Verified>,
        mut machine: Machine,
        (journal, replay): (Box<dyn JournalSink>, Replies),
        place: &Place,
    ) -> Run {
        for h in &record.agents {
            if let Some(memory) = &h.memory {
                machine.preload_memory(&h.name, memory.clone());
            }
        }
        Run {
            held,
            record,
            artifact,
            machine,
            journal,
            replay,
            place: place.clone(),
            warnings: Vec::new(),
        }
    }

    /// What the run was warned of as it started: skills no place has, which the mock driver
    /// does not need.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// What stops the run when asked (Ctrl-C): it then ends interrupted, resumable.
    pub fn stop_handle(&self) -> prose_runtime::runner::StopSignal {
        self.place.config.stop.clone()
    }

    /// The run's record as it stands.
    pub fn record(&self) -> &RunRecord {
        &self.record
    }

    /// The run's directory (for a run in the Postgres store, where its views are written
    /// on this machine).
    pub fn path(&self) -> &Path {
        self.held.views()
    }

    /// The run's id.
    pub fn id(&self) -> &str {
        self.held.id()
    }

    /// Gives the run back as it was, without driving it (its driver cannot be connected).
    pub async fn give_back(self) -> Result<(), StoreError> {
        self.held.release().await
    }

    /// The hold on the run and its record, without driving it (to record that it cannot be
    /// driven here).
    pub fn into_held(self) -> (Box<dyn HeldRun>, RunRecord) {
        (self.held, self.record)
    }

    /// A task keeping this process's hold on the run while it goes on (a lease's
    /// heartbeat), stopping the run if the hold is lost; none where the hold needs no
    /// keeping. Spawn it on the runtime that drives the run.
    pub fn keeper(&self) -> Option<prose_store::BoxFuture<'static, ()>> {
        self.held.keep(self.stop_handle())
    }

    /// Answers that will be replayed from the journal.
    pub fn replayed(&self) -> usize {
        self.replay.len()
    }

    /// The verified program the run executes.
    pub fn artifact(&self) -> &Arc<Verified> {
        &self.artifact
    }
}

/// The artifact `bytes` of run `id`, verified.
fn load_artifact(id: &str, bytes: &[u8]) -> Result<Arc<Verified>, RunError> {
    bytecode_spec::artifact::load(bytes)
        .map(|(_, a)| Arc::new(a))
        .map_err(|e| RunError::Store(StoreError::Invalid(format!("run {id}: its artifact: {e}"))))
}

/// Gives the run `held` holds back as it was, and returns `e`, why it could not go on.
async fn given_back(held: Box<dyn HeldRun>, e: RunError) -> RunError {
    let _ = held.release().await;
    e
}

/// Which of `replies` (the run's journal, in order) still hold for `program`, an edit of the
/// run's program `old`: the requests whose answers are kept, and a line for each of the
/// others, asked again.
fn still_holding(
    record: &RunRecord,
    old: &Arc<Verified>,
    program: &Program,
    replies: &[Reply],
) -> Result<(HashSet<RequestId>, Vec<String>), RunError> {
    let statement = |a: &Verified, r: &Request| -> String {
        a.modules
            .get(r.site.module as usize)
            .and_then(|m| m.source.lines().nth((r.site.line as usize).checked_sub(1)?))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let before: HashMap<RequestId, (Kind, String)> =
        transcript::exchanges(record, old, replies.to_vec())
            .map_err(RunError::Setup)?
            .into_iter()
            .map(|x| {
                (
                    x.request.id.clone(),
                    (x.request.kind(), statement(old, &x.request)),
                )
            })
            .collect();
    let new = &program.artifact;
    let now = transcript::exchanges_where(record, new, replies.to_vec(), |req, _| {
        before
            .get(&req.id)
            .is_some_and(|(kind, text)| *kind == req.kind() && *text == statement(new, req))
    })
    .map_err(RunError::Setup)?;
    let kept: HashSet<RequestId> = now
        .iter()
        .filter(|x| x.reply.is_some())
        .map(|x| x.request.id.clone())
        .collect();
    let asked_again: Vec<String> = now
        .iter()
        .filter(|x| x.reply.is_none() && before.contains_key(&x.request.id))
        .map(|x| {
            format!(
                "{} at {}: {}",
                x.request.id,
                x.request.site,
                statement(new, &x.request)
            )
        })
        .collect();
    Ok((kept, asked_again))
}

/// Whether `r` records a failure of request `failed` (the one that ended the run) or of one
/// of its steps (an agent loop's turn, say). A failure is not an answer: a resume does not
/// replay such a record, so the request is asked again from the step that failed, while
/// the steps it completed before are kept.
fn is_failure_of(r: &Reply, failed: &RequestId) -> bool {
    r.outcome.is_err() && r.id.whole() == *failed
}
