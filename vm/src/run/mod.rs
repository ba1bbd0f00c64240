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
mod fork;
pub mod rebuild;
pub mod transcript;

use bytecode_spec::bundle::BundledSkill;
use bytecode_spec::signature::{self, TrustKey};
use bytecode_spec::verify::Verified;
use bytecode_spec::Code;
use prose_agent::mcp::McpHub;
use prose_agent::people::People;
use prose_agent::protected::Protected;
use prose_agent::skills::{bundled_skills_dir, user_skills_dir, SkillSearch};
use prose_agent::workshop::{SkillPlaces, Workshop};
use prose_machine::protocol::{Kind, Reply, Request, RequestId};
use prose_machine::snapshot::Snapshot;
use prose_machine::trace::Event;
use prose_machine::value::Value;
use prose_machine::{Machine, RuntimeError};
use prose_runtime::driver::settings::{AnyDriver, DriverSettings};
use prose_runtime::driver::Driver;
use prose_runtime::memo::{MemoStore, Memoised};
use prose_runtime::observe::Observer;
use prose_runtime::program::Program;
use prose_runtime::record::{
    new_machine, ExecOptions, RunFailure, RunRecord, RunStatus, WaitingInput,
};
use prose_runtime::runner::journal::{JournalSink, Replies};
use prose_runtime::runner::program_skill::ProgramTool;
use prose_runtime::runner::{run_durable, Durable, RunConfig};
use prose_settings::McpConfig;
use prose_store::view::RunView;
use prose_store::{agents, journal, HeldRun, JournalCheck, Store, StoreError, Taken, TakenRun};
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
    /// The program's sessions cannot be equipped (an MCP server that does not start).
    Setup(String),
    /// A statement's sessions cannot be equipped (a skill no place has): where, and what
    /// to do about it.
    Unequipped(Box<Unequipped>),
    /// Keys are trusted and the artifact is not signed by one of them (or was altered
    /// since): it is refused before anything runs or is written.
    Untrusted(String),
}

impl RunError {
    /// The error's stable code, where it has one (a refused input's, a missing skill's
    /// E219).
    pub fn code(&self) -> Option<bytecode_spec::Code> {
        match self {
            RunError::Program(e) => Some(e.code),
            RunError::Unequipped(u) => Some(u.error.code),
            RunError::Store(_) | RunError::Setup(_) | RunError::Untrusted(_) => None,
        }
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Store(e) => e.fmt(f),
            RunError::Program(e) => e.fmt(f),
            RunError::Setup(e) => f.write_str(e),
            RunError::Unequipped(u) => write!(f, "{}\n  help: {}", u.error, u.help),
            RunError::Untrusted(why) => write!(
                f,
                "refused to run: {why}; only artifacts signed by a trusted key run here \
                 (--trust, PROSE_TRUST, [trust] keys in prose.toml)"
            ),
        }
    }
}

impl std::error::Error for RunError {}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> RunError {
        RunError::Store(e)
    }
}

impl From<prose_store::pg::PgError> for RunError {
    fn from(e: prose_store::pg::PgError) -> RunError {
        RunError::Store(e.into())
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
    /// The keys an artifact must be signed by to run here (`--trust`, `PROSE_TRUST`,
    /// `[trust]`); none: any artifact runs.
    pub trust: Vec<TrustKey>,
    /// Where a new run's sessions act (default: this process's working directory): a test
    /// case's own directory, for one.
    pub workdir: Option<PathBuf>,
}

impl Default for Place {
    fn default() -> Place {
        Place {
            state_dir: None,
            config: RunConfig::default(),
            people: People::Nobody,
            mcp: McpConfig::default(),
            budget: (None, None),
            trust: Vec::new(),
            workdir: None,
        }
    }
}

impl Place {
    /// Refuses the artifact `bytes` unless it is signed by a key this place trusts (any
    /// artifact passes where no key is trusted): unsigned, signed by another key, and
    /// altered after signing are told apart.
    pub fn check_trust(&self, bytes: &[u8]) -> Result<(), RunError> {
        if self.trust.is_empty() {
            return Ok(());
        }
        match signature::check(bytes, &self.trust) {
            Ok(t) if t.is_trusted() => Ok(()),
            Ok(t) => Err(RunError::Untrusted(t.to_string())),
            Err(e) => Err(RunError::Untrusted(format!(
                "the artifact cannot be read: {e}"
            ))),
        }
    }

    /// The state directory.
    pub fn root(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(".prose"))
    }

    /// A workshop for `record`'s sessions: its working directory and allowances, the skills
    /// the program's agents name resolved (an MCP server's name, an imported program, a
    /// skill the artifact carries, else a skill directory beside the program, in the state
    /// directory or the user's), and this place's people. A skill no place has is an E219
    /// error at the first statement naming it; under the mock driver, which never reads a
    /// skill, it is a warning instead (returned with the workshop).
    fn workshop(
        &self,
        record: &RunRecord,
        artifact: &Verified,
    ) -> Result<(Workshop, Vec<String>), RunError> {
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
        w.approval_timeout = record
            .options
            .approval_timeout_s
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
        let bundled: Vec<(&str, &BundledSkill)> = skill_sites(artifact)
            .into_iter()
            .filter_map(|(name, module, _)| Some((name, artifact.skill(module as usize, name)?)))
            .collect();
        let unpack_to = bundled_skills_dir();
        let places = SkillPlaces {
            servers: &servers,
            programs: &programs,
            bundled: &bundled,
            unpack_to: &unpack_to,
            search: &search,
        };
        let missing = w.resolve_skills(skill_names(artifact), &places);
        let Some((name, why)) = missing.first() else {
            return Ok((w, Vec::new()));
        };
        if matches!(record.driver, DriverSettings::Mock(_)) {
            let warnings = missing
                .iter()
                .map(|(_, why)| {
                    format!(
                        "{why}\n  (the mock driver reads no skill, so the run goes on; \
                         any other driver stops here with E219)"
                    )
                })
                .collect();
            return Ok((w, warnings));
        }
        let (module, line) = skill_sites(artifact)
            .into_iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, m, l)| (m, l))
            .unwrap_or((0, 0));
        Err(RunError::Unequipped(Box::new(Unequipped {
            error: RuntimeError::at(artifact, module, line, Code::E219, why.to_string()),
            help: format!(
                "import it from where it is published (`import \"{name}\" from \"github:OWNER/REPO\"`, \
                 or `npm:PACKAGE`, or `./path`) and build again, so that the artifact carries it; \
                 or install it as skills/{name}/SKILL.md beside the program, or in ~/.prose/skills/{name}/"
            ),
        })))
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

/// The driver `settings` describe, connected, with `memo` in front of it (answers kept
/// across runs), once its provider is known to offer every model `artifact`'s sessions
/// name: what a run is driven with. Call it on the runtime that will drive the run (the
/// driver's HTTP client and reader threads belong to it).
pub async fn connect(
    settings: &DriverSettings,
    artifact: &Verified,
    memo: Option<Arc<dyn MemoStore>>,
) -> Result<Arc<Memoised<AnyDriver>>, String> {
    use prose_runtime::driver::Driver;
    let driver = Arc::new(Memoised::new(settings.connect()?, memo));
    driver.check_models(&models_named(artifact)).await?;
    Ok(driver)
}

/// The memo of `store` for a run whose options say `on` (`--memo`, `memo = true`).
pub fn memo_for(store: &dyn Store, on: bool) -> Option<Arc<dyn MemoStore>> {
    on.then(|| store.memo())
}

/// Refuses a budget (`max_tokens`, `max_cost`) that the driver `settings` describe cannot
/// keep for `artifact`'s sessions ([`DriverSettings::keeps_budget`]): said before anything
/// runs, never ignored.
pub fn check_budget(
    settings: &DriverSettings,
    artifact: &Verified,
    max_tokens: Option<u64>,
    max_cost: Option<f64>,
) -> Result<(), String> {
    settings.keeps_budget(
        &models_named(artifact),
        max_tokens.is_some(),
        max_cost.is_some(),
    )
}

/// Every skill name the program's sessions carry (agents' skills are merged into them).
fn skill_names(artifact: &Verified) -> Vec<&str> {
    let mut names: Vec<&str> = skill_sites(artifact)
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Each skill name a session carries, with the session's module and line, in the
/// artifact's order.
fn skill_sites(artifact: &Verified) -> Vec<(&str, u32, u32)> {
    artifact
        .modules
        .iter()
        .enumerate()
        .flat_map(|(mi, m)| {
            m.sessions.values().flat_map(move |s| {
                s.skills
                    .iter()
                    .map(move |n| (m.strings[*n].as_str(), mi as u32, s.line))
            })
        })
        .collect()
}

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

/// A statement whose sessions cannot be equipped (a skill no place has): where, and what
/// to do about it.
#[derive(Debug)]
pub struct Unequipped {
    /// The error, located at the statement.
    pub error: RuntimeError,
    /// What to do about it.
    pub help: String,
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
            held,
            mut record,
            artifact,
            machine,
            journal,
            replay,
            mut place,
            warnings: _,
        } = self;
        place.config.budget =
            prose_runtime::runner::Budget::new(record.options.max_tokens, record.options.max_cost);
        let (mut workshop, _) = place
            .workshop(&record, &artifact)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
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
        // A program run as a tool runs within its session's place: it shares no places
        // with other runs (it would wait for the place its own session holds).
        let config = prose_runtime::runner::RunConfig {
            shared: None,
            ..place.config.clone()
        };
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
                Some(Arc::new(tool) as Arc<dyn prose_agent::tools::Tool>)
            });
            workshop
        });
        let mut durable = Durable {
            journal,
            replay,
            batch: driver.side_effect_free(),
            approvals: std::mem::take(&mut record.approvals),
        };
        let inputs: Vec<(String, Value)> = record
            .inputs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut view = RunView::new(
            held.views().to_path_buf(),
            held.id().to_string(),
            record.started.clone(),
            artifact,
            &inputs,
            record.agents.clone(),
        );
        if !held.writes_views() {
            view.without_files();
        }
        let mut watch = Watch {
            view,
            observer,
            waiting: Vec::new(),
        };
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
        // The calls that wait for an approval, as the run left them (none once it finished).
        record.approvals = std::mem::take(&mut durable.approvals);
        match &result {
            Ok(outputs) => {
                record.status = RunStatus::Finished;
                record.approvals.clear();
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
            Err(e) if e.code == bytecode_spec::Code::E220 => {
                record.status = RunStatus::Waiting;
                record.waiting = std::mem::take(&mut watch.waiting);
                record.error = Some(RunFailure {
                    code: e.code.to_string(),
                    message: e.message.clone(),
                    request: None,
                });
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
        // Tokens, or answers the memo gave (a run it answered whole spent none).
        record.usage =
            Some(place.config.budget.spent()).filter(|u| u.tokens() > 0 || u.from_memo > 0);
        record.journal = durable
            .journal
            .close()
            .await
            .map_err(|e| StoreError::Invalid(e.0))?;
        // The views first: the record saying the run ended is the commit point, so a run
        // killed in between is resumed (and its views rebuilt) rather than reported ended.
        watch.view.finish(record.status.as_str())?;
        held.write_record(&record).await?;
        Ok(result)
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

/// The run directory's views and the caller's observer, watching together; and the inputs
/// the run waits for, as the runner reports them.
struct Watch<'a, O> {
    view: RunView,
    observer: &'a mut O,
    waiting: Vec<WaitingInput>,
}

impl<O: Observer> Observer for Watch<'_, O> {
    fn event(&mut self, e: &Event) {
        if let Event::Waiting { id, name, question } = e {
            self.waiting.push(WaitingInput {
                request: id.clone(),
                name: name.clone(),
                question: question.clone(),
            });
        }
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
