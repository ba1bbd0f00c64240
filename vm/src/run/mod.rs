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
pub mod transcript;

use crate::store::pg::journal::PgJournal;
use crate::store::pg::lease::Claim;
use crate::store::sink::FileSink;
use crate::store::view::RunView;
use crate::store::{self, agents, journal, Lock, RunDir, StoreError};
use bytecode_spec::verify::Verified;
use prose_machine::protocol::{Kind, Reply, Request, RequestId};
use prose_machine::snapshot::Snapshot;
use prose_machine::trace::Event;
use prose_machine::value::{Bounds, Value};
use prose_machine::{Limits, Machine, RuntimeError};
use prose_runtime::agent::mcp::{McpConfig, McpHub};
use prose_runtime::agent::protected::Protected;
use prose_runtime::agent::skills::{user_skills_dir, SkillSearch};
use prose_runtime::agent::workshop::Workshop;
use prose_runtime::driver::settings::DriverSettings;
use prose_runtime::driver::Driver;
use prose_runtime::people::People;
use prose_runtime::program::sha256_hex;
use prose_runtime::program::Program;
use prose_runtime::record::{ExecOptions, RunFailure, RunRecord, RunStatus};
use prose_runtime::runner::journal::JournalSink;
use prose_runtime::runner::program_skill::ProgramTool;
use prose_runtime::runner::{run_durable, Durable, Observer, RunConfig};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a run cannot start or resume.
#[derive(Debug)]
pub enum RunError {
    /// The run directory or its files.
    Store(StoreError),
    /// The program refuses these inputs (a missing or unknown input).
    Program(RuntimeError),
    /// The program's sessions cannot be equipped (an unresolvable skill, an MCP server
    /// that does not start).
    Setup(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Store(e) => e.fmt(f),
            RunError::Program(e) => e.fmt(f),
            RunError::Setup(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for RunError {}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> RunError {
        RunError::Store(e)
    }
}

impl From<store::pg::PgError> for RunError {
    fn from(e: store::pg::PgError) -> RunError {
        RunError::Store(StoreError::Postgres(e))
    }
}

/// Where runs live and how they are served.
#[derive(Clone)]
pub struct Place {
    /// The state directory (default: `.prose` in the working directory).
    pub state_dir: Option<PathBuf>,
    /// Concurrency and backoff of the runner.
    pub config: RunConfig,
    /// Who answers a person's questions when the driver's host does not: the terminal, or
    /// no one.
    pub people: People,
    /// The MCP servers that skills may name (`[mcp]` in `prose.toml`).
    pub mcp: McpConfig,
    /// A token and a cost budget given for a resumed run, replacing the recorded ones.
    pub budget: (Option<u64>, Option<f64>),
}

impl Default for Place {
    fn default() -> Place {
        Place {
            state_dir: None,
            config: RunConfig::default(),
            people: People::Nobody,
            mcp: McpConfig::default(),
            budget: (None, None),
        }
    }
}

impl Place {
    /// The state directory.
    pub fn root(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(".prose"))
    }

    /// A workshop for `record`'s sessions: its working directory and allowances, the skills
    /// the program's agents name resolved (an MCP server's name, else a skill directory
    /// beside the program, in the state directory or the user's), and this place's people.
    fn workshop(&self, record: &RunRecord, artifact: &Verified) -> Result<Workshop, String> {
        let mut w = Workshop::new(
            record.workdir.clone(),
            record.options.allow,
            self.people.clone(),
        );
        w.max_turns = record.options.max_turns;
        w.session_timeout = record
            .options
            .session_timeout_s
            .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok());
        w.tools = record.options.tools;
        let program_dir = record
            .origin
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        w.protected = protected_places(&record.origin, &program_dir, artifact, &self.root());
        let search = SkillSearch::new(program_dir, self.root()).with_user_dir(user_skills_dir());
        let servers: Vec<String> = self.mcp.servers.keys().cloned().collect();
        let programs: Vec<(String, u32)> = artifact
            .modules
            .iter()
            .flat_map(|m| {
                m.programs
                    .values()
                    .map(move |p| (m.strings[p.alias].clone(), p.module))
            })
            .collect();
        w.resolve_skills(skill_names(artifact), &servers, &programs, &search)?;
        Ok(w)
    }
}

/// What the run's tools may never change beyond the fixed names: its state directory
/// `state` and the user's agent memory (`~/.prose/agents`), and the program's directory and
/// files: `origin` and the files its relative `use`
/// paths name (each looked up from the program's directory and from every imported file's
/// directory, as the compiler resolves a path from the file that wrote it).
fn protected_places(
    origin: &Path,
    program_dir: &Path,
    artifact: &Verified,
    state: &Path,
) -> Protected {
    let mut protected = Protected::new()
        .state_dir(state)
        .program_dir(program_dir)
        .program_file(origin);
    // The memory of `persist: user` agents is run state too.
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        protected = protected.state_dir(&Path::new(&home).join(".prose").join("agents"));
    }
    let relative: Vec<&str> = artifact
        .modules
        .iter()
        .map(|m| m.import_path.as_str())
        .filter(|p| !p.is_empty() && !p.starts_with('@'))
        .collect();
    let mut dirs = vec![program_dir.to_path_buf()];
    let mut i = 0;
    while i < dirs.len() {
        for use_path in &relative {
            let mut file = dirs[i].join(use_path);
            if file.extension().is_none() {
                file.set_extension("prose");
            }
            let Ok(file) = std::fs::canonicalize(&file) else {
                continue;
            };
            if !file.is_file() || protected.program_files().contains(&file) {
                continue;
            }
            protected = protected.program_file(&file);
            if let Some(dir) = file.parent() {
                if !dirs.iter().any(|d| d == dir) {
                    dirs.push(dir.to_path_buf());
                }
            }
        }
        i += 1;
    }
    protected
}

/// Every model the program's sessions name (as written: an alias or a provider id), and
/// `None` for sessions naming none.
pub fn models_named(artifact: &Verified) -> Vec<Option<String>> {
    let mut models: Vec<Option<String>> = artifact
        .modules
        .iter()
        .flat_map(|m| {
            m.sessions
                .values()
                .map(move |s| s.model.map(|id| m.strings[id].clone()))
        })
        .collect();
    models.sort();
    models.dedup();
    models
}

/// Every skill name the program's sessions carry (agents' skills are merged into them).
fn skill_names(artifact: &Verified) -> Vec<&str> {
    let mut names: Vec<&str> = artifact
        .modules
        .iter()
        .flat_map(|m| {
            m.sessions
                .values()
                .flat_map(move |s| s.skills.iter().map(move |n| m.strings[*n].as_str()))
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// A run ready to be driven: where it is kept (held), its record, machine and the answers
/// to replay.
pub struct Run {
    home: Home,
    record: RunRecord,
    artifact: Arc<Verified>,
    machine: Machine,
    journal: Box<dyn JournalSink>,
    replay: journal::Replies,
    place: Place,
}

/// Where a run is kept, and how this process holds it.
enum Home {
    /// A run directory of the file store, locked by this process.
    Files {
        /// The directory.
        dir: RunDir,
        /// Its lock, held until the run is dropped.
        _lock: Lock,
    },
    /// A run in the Postgres store, claimed by this worker; its views are written to a
    /// local directory.
    Postgres {
        /// The claim every write is fenced with.
        claim: Box<Claim>,
        /// Where the run's views go on this machine.
        views: PathBuf,
        /// Whether they are written at all (persistent agents' memory always is).
        files: bool,
    },
}

impl Home {
    /// The run's id.
    fn id(&self) -> &str {
        match self {
            Home::Files { dir, .. } => &dir.id,
            Home::Postgres { claim, .. } => &claim.run.0,
        }
    }

    /// The directory the run's views (and its run-scoped agents' memory) are written to.
    fn path(&self) -> &Path {
        match self {
            Home::Files { dir, .. } => &dir.path,
            Home::Postgres { views, .. } => views,
        }
    }

    /// Writes the run's record: `run.json`, or the run's row (fenced by the claim).
    async fn write_record(&self, record: &RunRecord) -> Result<(), StoreError> {
        match self {
            Home::Files { dir, .. } => dir.write_record(record),
            Home::Postgres { claim, .. } => Ok(claim.write_record(record).await?),
        }
    }
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
        let workdir = std::env::current_dir()
            .map_err(|e| RunError::Setup(format!("the working directory: {e}")))?;
        let mut record = RunRecord::new(program, inputs, driver, options, workdir);
        // Skills are resolved before anything is created or asked.
        place
            .workshop(&record, &artifact)
            .map_err(RunError::Setup)?;
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
        if !record.agents.is_empty() {
            dir.stage_record(&record)?;
        }
        let contents = journal::Contents::empty(journal::seed(&record.id));
        let mut journal = open_journal(&dir, &contents)?;
        journal.sync_first(dir.start_files());
        let sink = FileSink {
            journal,
            run: record.id.clone(),
        };
        Ok(Run::assemble(
            Home::Files { dir, _lock: lock },
            record,
            artifact,
            machine,
            (Box::new(sink), journal::Replies::default()),
            place,
        ))
    }

    /// Takes up the run in `dir` again: its journal's answers are replayed, never asked
    /// again. A failed run asks the request whose failure ended it again. `driver` replaces
    /// the recorded driver (and is recorded); `inputs` give values the run still needs
    /// (a mid-program input it could not get), never a new value for one it has.
    pub fn resume(
        dir: RunDir,
        driver: Option<DriverSettings>,
        inputs: BTreeMap<String, Value>,
        place: &Place,
    ) -> Result<Resumed, RunError> {
        let how = Resuming {
            driver,
            inputs,
            ..Resuming::default()
        };
        Run::resume_with(dir, place, how)
    }

    /// [`Run::resume`], changing what `how` says. The journal is checked as `how.journal`
    /// says: one that is missing, lost records it held when it was last closed (`run.json`
    /// keeps how many, and their chained checksum), or answers a request twice is refused
    /// unless forced.
    pub fn resume_with(dir: RunDir, place: &Place, how: Resuming) -> Result<Resumed, RunError> {
        let (lock, record, artifact, contents) = match Run::take_up(&dir, how.journal)? {
            Some(parts) => parts,
            None => return Ok(Resumed::Finished(Box::new(dir.record()?))),
        };
        let journal = open_journal(&dir, &contents)?;
        let mut replay = contents.replies();
        if let Some(failed) = record.error.as_ref().and_then(|e| e.request.as_ref()) {
            replay.retain(|_, r| !is_failure_of(r, failed));
        }
        Run::continue_with(dir, lock, record, artifact, (journal, replay), how, place)
    }

    /// Like [`Run::resume`], but for a program edited since the run started: `program` (the
    /// edited one) replaces the run's, and a journaled answer is kept only where the edited
    /// program asks the same kind of question, under the same id, from a statement whose
    /// text has not changed; the rest is asked again. Returns what will be asked again.
    pub fn resume_edited(
        dir: RunDir,
        program: &Program,
        how: Resuming,
        place: &Place,
    ) -> Result<(Resumed, Vec<String>), RunError> {
        let (lock, mut record, old, contents) = match Run::take_up(&dir, how.journal)? {
            Some(parts) => parts,
            None => return Ok((Resumed::Finished(Box::new(dir.record()?)), Vec::new())),
        };
        let failed = record.error.as_ref().and_then(|e| e.request.clone());
        let replies: Vec<Reply> = contents
            .in_order()
            .into_iter()
            .filter(|r| !failed.as_ref().is_some_and(|f| is_failure_of(r, f)))
            .collect();
        let statement = |a: &Verified, r: &Request| -> String {
            a.modules
                .get(r.site.module as usize)
                .and_then(|m| m.source.lines().nth((r.site.line as usize).checked_sub(1)?))
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        let before: HashMap<RequestId, (Kind, String)> =
            transcript::exchanges(&record, &old, replies.clone())
                .map_err(RunError::Setup)?
                .into_iter()
                .map(|x| {
                    (
                        x.request.id.clone(),
                        (x.request.kind(), statement(&old, &x.request)),
                    )
                })
                .collect();
        let new = program.artifact.clone();
        let now = transcript::exchanges_where(&record, &new, replies.clone(), |req, _| {
            before
                .get(&req.id)
                .is_some_and(|(kind, text)| *kind == req.kind() && *text == statement(&new, req))
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
                    statement(&new, &x.request)
                )
            })
            .collect();
        let kept: Vec<&Reply> = replies
            .iter()
            .filter(|r| kept.contains(&r.id.whole()))
            .collect();
        // The journal keeps only what still holds, so no later resume can use the rest.
        let rewritten = journal::rewrite(&dir.journal_path(), journal::seed(&record.id), &kept)
            .map_err(|e| StoreError::Invalid(format!("run {}: {e}", dir.id)))?;
        record.journal = rewritten.seal();
        store::fs::write_durable(&dir.path.join("artifact.pbc"), &program.bytes)?;
        store::fs::write_durable(
            &dir.path.join("program.prose"),
            new.modules[0].source.as_bytes(),
        )?;
        record.artifact_sha256 = sha256_hex(&program.bytes);
        let journal = open_journal(&dir, &rewritten)?;
        let replay = rewritten.replies();
        let resumed = Run::continue_with(dir, lock, record, new, (journal, replay), how, place)?;
        Ok((resumed, asked_again))
    }

    /// Takes the run in `dir` (its lock) and reads what it holds: its record, its artifact
    /// and its journal, checked as `check` says; none when it has finished.
    #[allow(clippy::type_complexity)]
    fn take_up(
        dir: &RunDir,
        check: JournalCheck,
    ) -> Result<Option<(Lock, RunRecord, Arc<Verified>, journal::Contents)>, RunError> {
        let lock = dir.lock()?;
        let mut record = dir.record()?;
        if record.status == RunStatus::Finished {
            return Ok(None);
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
        let contents = checked_journal(dir, &mut record, check)?;
        Ok(Some((lock, record, artifact, contents)))
    }

    /// The run taken up, continuing with its journal and the answers to replay, changed as
    /// `how` says; budgets given in `place` replace the recorded ones.
    fn continue_with(
        dir: RunDir,
        lock: Lock,
        record: RunRecord,
        artifact: Arc<Verified>,
        (journal, replay): (journal::Journal, journal::Replies),
        how: Resuming,
        place: &Place,
    ) -> Result<Resumed, RunError> {
        let (record, machine) = Run::changed(record, &artifact, how, place)?;
        dir.write_record(&record)?;
        let sink = FileSink {
            journal,
            run: record.id.clone(),
        };
        Ok(Resumed::Ready(Box::new(Run::assemble(
            Home::Files { dir, _lock: lock },
            record,
            artifact,
            machine,
            (Box::new(sink), replay),
            place,
        ))))
    }

    /// `record` changed as `how` says (budgets given in `place` replacing the recorded
    /// ones), running again, and a machine for it.
    fn changed(
        mut record: RunRecord,
        artifact: &Arc<Verified>,
        how: Resuming,
        place: &Place,
    ) -> Result<(RunRecord, Machine), RunError> {
        let Resuming {
            driver,
            inputs,
            journal: _,
            max_value_size,
            max_frame_memory,
        } = how;
        if let Some(d) = driver {
            record.driver = d;
        }
        if let Some(n) = max_value_size {
            record.options.max_value_size = n;
        }
        if let Some(n) = max_frame_memory {
            record.options.max_frame_memory = n;
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
        Ok((record, machine))
    }

    /// Takes up the run `claim` holds in the Postgres store: its journal's answers are
    /// replayed, never asked again (a failed run asks the request whose failure ended it
    /// again). Its sessions act in `workdir`; its views are written under the state
    /// directory's `pg/<run id>/`, unless `views` is false (then only persistent agents'
    /// memory is written there). The record saying it runs is written under the claim.
    pub async fn take_up_claimed(
        claim: Claim,
        workdir: PathBuf,
        views: bool,
        how: Resuming,
        place: &Place,
    ) -> Result<Run, RunError> {
        let store = claim.store.clone();
        let id = claim.run.0.clone();
        let mut record = claim.record.clone();
        let bytes = store.artifact(&record.artifact_sha256).await?;
        let artifact = match bytecode_spec::artifact::load(&bytes) {
            Ok((_, a)) => Arc::new(a),
            Err(e) => {
                return Err(RunError::Store(StoreError::Invalid(format!(
                    "run {id}: its artifact: {e}"
                ))))
            }
        };
        let mut contents = journal::Contents::empty(journal::seed(&id));
        contents.records = store.journal(&id).await?;
        let records = contents.records.len();
        let files = views;
        let views = place.root().join("pg").join(&id);
        if files {
            std::fs::create_dir_all(&views).map_err(|e| StoreError::Io(views.clone(), e))?;
        }
        record.workdir = workdir;
        if records == 0 && record.agents.is_empty() {
            record.agents = agents::discover(&artifact, &views, &place.root())?;
        }
        let mut replay = contents.replies();
        if let Some(failed) = record.error.as_ref().and_then(|e| e.request.as_ref()) {
            replay.remove(failed);
        }
        let (record, machine) = Run::changed(record, &artifact, how, place)?;
        claim.write_record(&record).await?;
        let journal = PgJournal::new(claim.clone(), records);
        Ok(Run::assemble(
            Home::Postgres {
                claim: Box::new(claim),
                views,
                files,
            },
            record,
            artifact,
            machine,
            (Box::new(journal), replay),
            place,
        ))
    }

    fn assemble(
        home: Home,
        record: RunRecord,
        artifact: Arc<Verified>,
        mut machine: Machine,
        (journal, replay): (Box<dyn JournalSink>, journal::Replies),
        place: &Place,
    ) -> Run {
        for h in &record.agents {
            if let Some(memory) = &h.memory {
                machine.preload_memory(&h.name, memory.clone());
            }
        }
        Run {
            home,
            record,
            artifact,
            machine,
            journal,
            replay,
            place: place.clone(),
        }
    }

    /// What stops the run when asked (Ctrl-C): it then ends interrupted, resumable.
    pub fn stop_handle(&self) -> prose_runtime::runner::Stop {
        self.place.config.stop.clone()
    }

    /// The run's record as it stands.
    pub fn record(&self) -> &RunRecord {
        &self.record
    }

    /// The run's directory (for a run in the Postgres store, where its views are written
    /// on this machine).
    pub fn path(&self) -> &Path {
        self.home.path()
    }

    /// Answers that will be replayed from the journal.
    pub fn replayed(&self) -> usize {
        self.replay.len()
    }

    /// The verified program the run executes.
    pub fn artifact(&self) -> &Arc<Verified> {
        &self.artifact
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
            home,
            mut record,
            artifact,
            machine,
            journal,
            replay,
            mut place,
        } = self;
        place.config.budget =
            prose_runtime::runner::Budget::new(record.options.max_tokens, record.options.max_cost);
        let mut workshop = place
            .workshop(&record, &artifact)
            .map_err(StoreError::Invalid)?;
        let servers: Vec<&str> = skill_names(&artifact)
            .into_iter()
            .filter(|n| place.mcp.servers.contains_key(*n))
            .collect();
        if !servers.is_empty() {
            let mut config = McpConfig::default();
            for s in &servers {
                config
                    .servers
                    .insert(s.to_string(), place.mcp.servers[*s].clone());
            }
            let hub = McpHub::start(&config, &record.workdir)
                .await
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
            workshop.set_mcp(hub);
        }
        let config = place.config.clone();
        let workshop = Arc::new_cyclic(|weak| {
            workshop.bind_programs(|name, module| {
                let tool = ProgramTool::new(
                    name,
                    artifact.clone(),
                    module,
                    driver.clone(),
                    weak.clone(),
                    config.clone(),
                )?;
                Some(Arc::new(tool) as Arc<dyn prose_runtime::agent::tools::Tool>)
            });
            workshop
        });
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
        let mut view = RunView::new(
            home.path().to_path_buf(),
            home.id().to_string(),
            record.started.clone(),
            artifact,
            &inputs,
            record.agents.clone(),
        );
        if let Home::Postgres { files: false, .. } = home {
            view.without_files();
        }
        let mut watch = Watch { view, observer };
        let result = run_durable(
            machine,
            driver,
            workshop.clone(),
            &place.config,
            Some(&mut durable),
            &mut watch,
        )
        .await;
        if let Some(hub) = workshop.take_mcp() {
            hub.stop().await;
        }
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
            Err(e) if e.code == bytecode_spec::Code::E216 => {
                record.status = RunStatus::Interrupted;
            }
            Err(e) if e.code == bytecode_spec::Code::E217 => {
                record.status = RunStatus::Paused;
                record.error = Some(RunFailure {
                    code: e.code.to_string(),
                    message: e.message.clone(),
                    request: None,
                });
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
        record.usage = Some(place.config.budget.spent()).filter(|u| u.tokens() > 0);
        record.journal = durable
            .journal
            .close()
            .await
            .map_err(|e| StoreError::Invalid(e.0))?;
        // The views first: the record saying the run ended is the commit point, so a run
        // killed in between is resumed (and its views rebuilt) rather than reported ended.
        watch.view.finish(record.status.as_str())?;
        home.write_record(&record).await?;
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
pub(crate) fn new_machine(
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

/// Whether `r` records a failure of request `failed` (the one that ended the run) or of one
/// of its steps (an agent loop's turn, say). A failure is not an answer: a resume does not
/// replay such a record, so the request is asked again from the step that failed, while
/// the steps it completed before are kept.
fn is_failure_of(r: &Reply, failed: &RequestId) -> bool {
    r.outcome.is_err() && r.id.whole() == *failed
}
