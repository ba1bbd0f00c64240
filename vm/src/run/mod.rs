//! Runs as a library: start a durable run of a verified program, or resume one, then drive
//! it to the end with a driver and an observer. The CLI, the benchmarks and the tests all go
//! through here, so a run's lifecycle (its directory, record, lock, journal, views and
//! persistent agents) lives in one place.
//!
//! ```text
//! Program::from_bytes ─┐
//!                      ├─ Run::start(program, inputs, driver settings, options) ─┐
//! RunDir::open ────────┴─ Run::resume(dir, override, options) ───────────────────┴─ run.drive(driver, observer)
//! ```

pub mod rebuild;
pub mod record;

use crate::driver::settings::DriverSettings;
use crate::driver::Driver;
use crate::machine::{Limits, Machine, RuntimeError};
use crate::protocol::{Reply, RequestId};
use crate::runner::{run_durable, Durable, Observer, RunConfig};
use crate::snapshot::Snapshot;
use crate::store::view::RunView;
use crate::store::{agents, journal, sha256_hex, Lock, RunDir, StoreError};
use crate::trace::Event;
use crate::value::{Bounds, Value};
use bytecode_spec::artifact::LoadError;
use bytecode_spec::verify::Verified;
use record::{ExecOptions, RunFailure, RunRecord, RunStatus};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A verified program and where it came from.
pub struct Program {
    /// The artifact, verified.
    pub artifact: Arc<Verified>,
    /// Its bytes (kept in the run directory as `artifact.pbc`).
    pub bytes: Vec<u8>,
    /// The `.pbc` or `.prose` file it came from.
    pub origin: PathBuf,
}

impl Program {
    /// Loads and verifies the artifact `bytes`, read or compiled from `origin`.
    pub fn from_bytes(bytes: Vec<u8>, origin: PathBuf) -> Result<Program, LoadError> {
        let (_, artifact) = bytecode_spec::artifact::load(&bytes)?;
        Ok(Program {
            artifact: Arc::new(artifact),
            bytes,
            origin,
        })
    }
}

/// Why a run cannot start or resume.
#[derive(Debug)]
pub enum RunError {
    /// The run directory or its files.
    Store(StoreError),
    /// The program refuses these inputs (a missing or unknown input).
    Program(RuntimeError),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Store(e) => e.fmt(f),
            RunError::Program(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RunError {}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> RunError {
        RunError::Store(e)
    }
}

/// Where runs live and how they are served.
#[derive(Clone, Debug, Default)]
pub struct Place {
    /// The state directory (default: `.prose` in the working directory).
    pub state_dir: Option<PathBuf>,
    /// Concurrency and backoff of the runner.
    pub config: RunConfig,
}

impl Place {
    /// The state directory.
    pub fn root(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(".prose"))
    }
}

/// A run ready to be driven: its directory (held), record, machine and the answers to
/// replay.
pub struct Run {
    dir: RunDir,
    _lock: Lock,
    record: RunRecord,
    artifact: Arc<Verified>,
    machine: Machine,
    journal: journal::Journal,
    replay: HashMap<RequestId, Reply>,
    config: RunConfig,
}

/// What a resume changes, besides taking the run up again.
#[derive(Clone, Debug, Default)]
pub struct Resuming {
    /// A driver replacing the recorded one (and recorded).
    pub driver: Option<DriverSettings>,
    /// How the journal is checked.
    pub journal: JournalCheck,
    /// A new value size limit (recorded): a run that failed with E213 can go on.
    pub max_value_size: Option<u64>,
    /// A new frame memory limit (recorded): a run that failed with E218 can go on.
    pub max_frame_memory: Option<u64>,
}

/// How a resume treats a journal that does not match the run record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JournalCheck {
    /// Refuse a journal that is missing, lost records it held when last closed, or
    /// repeats an answer.
    #[default]
    Strict,
    /// Go on with what the journal holds (`--force`): a missing journal is an empty one, and
    /// a repeating one is rewritten keeping each request's first answer.
    Force,
}

/// How a resume begins.
pub enum Resumed {
    /// The run had finished: nothing to do.
    Finished(Box<RunRecord>),
    /// The run continues.
    Ready(Box<Run>),
}

impl Run {
    /// Starts a new run of `program` with top-level `inputs`, answered by `driver`: creates
    /// its directory and record, and takes it.
    pub fn start(
        program: &Program,
        inputs: BTreeMap<String, Value>,
        driver: DriverSettings,
        options: ExecOptions,
        place: &Place,
    ) -> Result<Run, RunError> {
        let artifact = program.artifact.clone();
        let machine = new_machine(&artifact, &inputs, &options).map_err(RunError::Program)?;
        let mut record = RunRecord {
            id: String::new(),
            program: artifact.modules[0].name.clone(),
            origin: program.origin.clone(),
            artifact_sha256: sha256_hex(&program.bytes),
            inputs,
            started: String::new(),
            status: RunStatus::Running,
            driver,
            options,
            agents: Vec::new(),
            journal: journal::Seal::default(),
            outputs: None,
            error: None,
        };
        let dir = RunDir::create(
            place.state_dir.as_deref(),
            &mut record,
            &artifact.modules[0].source,
            &program.bytes,
        )?;
        let lock = dir.lock()?;
        // Persistent agents: what their memory is as the run starts, kept with the run so
        // that a resume starts from the same memory.
        record.agents = agents::discover(&artifact, &dir.path, &place.root())?;
        dir.stage_record(&record)?;
        let contents = journal::Contents::empty(journal::seed(&record.id));
        let mut journal = open_journal(&dir, &contents)?;
        journal.sync_first(dir.start_files());
        Ok(Run::assemble(
            dir,
            lock,
            record,
            artifact,
            machine,
            (journal, HashMap::new()),
            place,
        ))
    }

    /// Takes up the run in `dir` again: its journal's answers are replayed, never asked
    /// again. A failed run asks the request whose failure ended it again. `driver` replaces
    /// the recorded driver (and is recorded).
    pub fn resume(
        dir: RunDir,
        driver: Option<DriverSettings>,
        place: &Place,
    ) -> Result<Resumed, RunError> {
        let how = Resuming {
            driver,
            ..Resuming::default()
        };
        Run::resume_with(dir, place, how)
    }

    /// [`Run::resume`], changing what `how` says. The journal is checked as `how.journal`
    /// says: one that is missing, lost records it held when it was last closed (`run.json`
    /// keeps how many, and their chained checksum), or answers a request twice is refused
    /// unless forced.
    pub fn resume_with(dir: RunDir, place: &Place, how: Resuming) -> Result<Resumed, RunError> {
        let Resuming {
            driver,
            journal: check,
            max_value_size,
            max_frame_memory,
        } = how;
        let lock = dir.lock()?;
        let mut record = dir.record()?;
        if record.status == RunStatus::Finished {
            return Ok(Resumed::Finished(Box::new(record)));
        }
        let bytes = std::fs::read(dir.path.join("artifact.pbc"))
            .map_err(|e| StoreError::Io(dir.path.join("artifact.pbc"), e))?;
        let artifact = match bytecode_spec::artifact::load(&bytes) {
            Ok((_, a)) => Arc::new(a),
            Err(e) => {
                return Err(RunError::Store(StoreError::Invalid(format!(
                    "run {}: artifact.pbc: {e}",
                    dir.id
                ))))
            }
        };
        let contents = checked_journal(&dir, &mut record, check)?;
        let journal = open_journal(&dir, &contents)?;
        let mut replay = contents.replies();
        // A failure is not an answer: the request that ended the run is asked again.
        if let Some(failed) = record.error.as_ref().and_then(|e| e.request.as_ref()) {
            replay.remove(failed);
        }
        if let Some(d) = driver {
            record.driver = d;
        }
        if let Some(n) = max_value_size {
            record.options.max_value_size = n;
        }
        if let Some(n) = max_frame_memory {
            record.options.max_frame_memory = n;
        }
        record.status = RunStatus::Running;
        record.error = None;
        dir.write_record(&record)?;
        let machine =
            new_machine(&artifact, &record.inputs, &record.options).map_err(RunError::Program)?;
        Ok(Resumed::Ready(Box::new(Run::assemble(
            dir,
            lock,
            record,
            artifact,
            machine,
            (journal, replay),
            place,
        ))))
    }

    fn assemble(
        dir: RunDir,
        lock: Lock,
        record: RunRecord,
        artifact: Arc<Verified>,
        mut machine: Machine,
        (journal, replay): (journal::Journal, HashMap<RequestId, Reply>),
        place: &Place,
    ) -> Run {
        for h in &record.agents {
            if let Some(memory) = &h.memory {
                machine.preload_memory(&h.name, memory.clone());
            }
        }
        Run {
            dir,
            _lock: lock,
            record,
            artifact,
            machine,
            journal,
            replay,
            config: place.config.clone(),
        }
    }

    /// The run's record as it stands.
    pub fn record(&self) -> &RunRecord {
        &self.record
    }

    /// The run's directory.
    pub fn path(&self) -> &Path {
        &self.dir.path
    }

    /// Answers that will be replayed from the journal.
    pub fn replayed(&self) -> usize {
        self.replay.len()
    }

    /// Drives the run to its end with `driver` (which should be `record().driver`
    /// connected): every answer is journaled before it is used, the run directory's views
    /// follow the run, and `observer` sees every trace event. The record is updated with
    /// how the run ended. Returns the outputs, or the error that ended the run.
    pub async fn drive<D: Driver>(
        self,
        driver: Arc<D>,
        observer: &mut impl Observer,
    ) -> Result<Result<Vec<(String, Value)>, RuntimeError>, StoreError> {
        let Run {
            dir,
            _lock,
            mut record,
            artifact,
            machine,
            journal,
            replay,
            config,
        } = self;
        let mut durable = Durable {
            journal,
            replay,
            batch: driver.side_effect_free(),
        };
        let inputs: Vec<(String, Value)> = record
            .inputs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut watch = Watch {
            view: RunView::new(
                dir.path.clone(),
                dir.id.clone(),
                record.started.clone(),
                artifact,
                &inputs,
                record.agents.clone(),
            ),
            observer,
        };
        let result = run_durable(machine, driver, &config, Some(&mut durable), &mut watch).await;
        match &result {
            Ok(outputs) => {
                record.status = RunStatus::Finished;
                record.outputs = Some(
                    outputs
                        .iter()
                        .map(|(k, v)| (k.clone(), v.to_json()))
                        .collect(),
                );
            }
            Err(e) => {
                record.status = RunStatus::Failed;
                record.error = Some(RunFailure {
                    code: e.code.to_string(),
                    message: e.to_string(),
                    request: e.request.clone(),
                });
            }
        }
        record.journal = durable
            .journal
            .close()
            .map_err(|e| StoreError::Invalid(format!("run {}: {e}", dir.id)))?;
        // The views first: the record saying the run ended is the commit point, so a run
        // killed in between is resumed (and its views rebuilt) rather than reported ended.
        watch.view.finish(record.status.as_str())?;
        dir.write_record(&record)?;
        Ok(result)
    }
}

/// Opens the run's journal for appending (cutting a torn tail: the caller holds the run).
fn open_journal(
    dir: &RunDir,
    contents: &journal::Contents,
) -> Result<journal::Journal, StoreError> {
    journal::Journal::open(&dir.journal_path(), contents)
        .map_err(|e| StoreError::Invalid(format!("run {}: {e}", dir.id)))
}

/// The run's journal, checked against its record as `check` says. When forced, what is
/// accepted becomes the record's seal.
fn checked_journal(
    dir: &RunDir,
    record: &mut RunRecord,
    check: JournalCheck,
) -> Result<journal::Contents, StoreError> {
    let path = dir.journal_path();
    let seed = journal::seed(&record.id);
    let refused = |e: journal::JournalError| {
        StoreError::Invalid(format!(
            "run {}: {e}; refusing to resume (`prosevm resume --force` goes on with what the journal holds)",
            dir.id
        ))
    };
    let corrupted = |e: journal::JournalError| StoreError::Invalid(format!("run {}: {e}", dir.id));
    match check {
        JournalCheck::Strict => {
            let contents = journal::read(&path, seed).map_err(|e| match e {
                journal::JournalError::Missing => refused(e),
                e => corrupted(e),
            })?;
            contents.check_seal(&record.journal).map_err(refused)?;
            contents.check_repeats().map_err(refused)?;
            Ok(contents)
        }
        JournalCheck::Force => {
            let contents = match journal::read(&path, seed) {
                Err(journal::JournalError::Missing) => journal::Contents::empty(seed),
                read => read.map_err(corrupted)?,
            };
            let contents = match contents.check_repeats() {
                Ok(()) => contents,
                Err(_) => journal::rewrite(&path, seed, &contents.kept()).map_err(corrupted)?,
            };
            record.journal = contents.seal();
            Ok(contents)
        }
    }
}

/// A machine for `artifact` with `inputs`, executing as `options` say.
fn new_machine(
    artifact: &Arc<Verified>,
    inputs: &BTreeMap<String, Value>,
    options: &ExecOptions,
) -> Result<Machine, RuntimeError> {
    let inputs: FxHashMap<String, Value> =
        inputs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let defaults = Limits::default();
    let limits = Limits {
        iterations: options.max_iterations,
        frame_bytes: size(options.max_frame_memory),
        values: Bounds {
            bytes: size(options.max_value_size),
            ..defaults.values
        },
        ..defaults
    };
    let mut machine = Machine::new(artifact.clone(), &inputs, limits)?;
    machine.set_strict(options.strict);
    Ok(machine)
}

/// The run directory's views and the caller's observer, watching together.
struct Watch<'a, O> {
    view: RunView,
    observer: &'a mut O,
}

impl<O: Observer> Observer for Watch<'_, O> {
    fn event(&mut self, e: &Event) {
        self.view.observe(e);
        self.observer.event(e);
    }

    fn wants_snapshot(&mut self, idle: bool) -> bool {
        self.view.due(idle)
    }

    fn snapshot(&mut self, snapshot: &Snapshot) {
        self.view.write(snapshot);
    }
}
