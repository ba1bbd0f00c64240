//! Where runs are kept, behind one trait. A [`Store`] keeps each run's record, its artifact
//! and its journal of answers; the run lifecycle, and every command that lists, inspects,
//! reports, resumes or prunes runs, is written once against it. Three stores implement it:
//!
//! - [`file`]: a directory per run under `.prose/runs/` (the default), held by an advisory
//!   lock the kernel releases when the holder dies;
//! - [`pg`]: PostgreSQL, for many workers on many machines, held by leases renewed by a
//!   heartbeat and fenced by the epoch of each claim;
//! - `sqlite`: one SQLite file for one machine, in WAL mode (readers never wait for the
//!   writer), each run held by a live process it names. No other crate names its types:
//!   [`Locator::open`] hands it out as a `dyn Store`.
//!
//! A run taken by this process is a [`HeldRun`]: only its holder writes its record and
//! appends to its journal (through the runner's [`JournalSink`]). Readers take nothing.
//! Besides the truth a store keeps, a run has views for people (`bindings/`, `state.md`:
//! [`view`]) written on the machine that runs it, and persistent agents' memory
//! ([`agents`]). Beside the runs, each store keeps a memo of model answers ([`Store::memo`]),
//! and the webhooks of the runs a server started, with their deliveries ([`webhooks`]).

pub mod agents;
pub mod file;
mod fs;
pub mod ids;
pub mod journal;
pub mod naming;
pub mod pg;
mod prune;
mod sqlite;
pub mod view;
pub mod webhooks;

pub use prune::{PruneRule, Pruned};

use prose_machine::protocol::Reply;
use prose_runtime::approvals::WaitingApproval;
use prose_runtime::memo::MemoStore;
use prose_runtime::program::Program;
use prose_runtime::record::{RunRecord, RunStatus, Seal, WaitingInput};
use prose_runtime::runner::journal::JournalSink;
use prose_runtime::runner::StopSignal;
use serde::Serialize;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

/// Why a store cannot do what was asked.
#[derive(Debug)]
pub enum StoreError {
    /// File-system trouble.
    Io(PathBuf, std::io::Error),
    /// No such run, or a name that cannot be one.
    NoRun(String),
    /// What the store holds is not what it should be.
    Invalid(String),
    /// Another process holds the run.
    Held(String),
    /// The Postgres store.
    Postgres(pg::PgError),
    /// The SQLite store.
    Sqlite(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            StoreError::NoRun(m) | StoreError::Invalid(m) | StoreError::Held(m) => f.write_str(m),
            StoreError::Postgres(e) => e.fmt(f),
            StoreError::Sqlite(m) => write!(f, "the SQLite store: {m}"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<pg::PgError> for StoreError {
    fn from(e: pg::PgError) -> StoreError {
        match e {
            pg::PgError::NoRun(m) => StoreError::NoRun(m),
            e => StoreError::Postgres(e),
        }
    }
}

impl StoreError {
    /// Whether the store or run could not be reached at all (a usage or I/O error: exit
    /// status 2), rather than being found wanting (1).
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            StoreError::Io(..)
                | StoreError::NoRun(_)
                | StoreError::Postgres(
                    pg::PgError::Url(_) | pg::PgError::Connect(_) | pg::PgError::Migrate(_)
                )
        )
    }
}

/// A boxed, sendable future, as the stores' traits return them (so they stay object safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

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

/// A run as a reader finds it: its record, its artifact and its journal.
#[derive(Clone, Debug)]
pub struct StoredRun {
    /// The run's id (a file store's run named by its path is named by its id here).
    pub id: String,
    /// Its record.
    pub record: RunRecord,
    /// Its artifact's bytes.
    pub artifact: Vec<u8>,
    /// Every record its journal holds, in the order they were written.
    pub journal: Vec<Reply>,
}

/// What taking a run found.
pub enum Taken {
    /// It had finished: there is nothing to take (its record is here).
    Finished(Box<RunRecord>),
    /// It is held by this process now.
    Held(Box<TakenRun>),
}

/// A run this process took, with what it holds.
pub struct TakenRun {
    /// The hold.
    pub held: Box<dyn HeldRun>,
    /// Its record (its journal's seal as accepted).
    pub record: RunRecord,
    /// Its artifact's bytes.
    pub artifact: Vec<u8>,
    /// Every record its journal holds, in order.
    pub journal: Vec<Reply>,
}

/// A run as listed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRow {
    /// Its id.
    pub id: String,
    /// Its directory, in the file store (absolute when it can be made so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The program's name (`?` when the record cannot be read).
    pub program: String,
    /// Its status: a run's (`running`, `finished`, ...) or `queued` (submitted to the
    /// Postgres store, not claimed yet); `None` when its record cannot be read.
    pub status: Option<String>,
    /// When it started (or was submitted), UTC, ISO 8601.
    pub started: Option<String>,
    /// Records in its journal.
    pub answered: usize,
    /// A process is running it now.
    pub live: bool,
    /// Who holds it: a process (`pid 42`), or a worker of the Postgres store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Seconds until the holder's lease expires (negative: expired), where holds are leases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_left: Option<f64>,
    /// The epoch of its last claim, where claims are counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    /// Tokens and cost it used, as of when it last stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<prose_machine::protocol::Usage>,
    /// Why it failed, or why its record cannot be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The inputs a waiting run waits for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<WaitingInput>,
    /// The tool calls a waiting run waits for a person's approval of.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<WaitingApproval>,
}

impl RunRow {
    /// The row of `record`, as of `answered` journal records, held or not as `live` says.
    pub fn of(record: &RunRecord, answered: usize, live: bool) -> RunRow {
        let (waiting, approvals) = record.awaited();
        RunRow {
            id: record.id.clone(),
            path: None,
            program: record.program.clone(),
            status: Some(record.status.as_str().to_string()),
            started: Some(record.started.clone()),
            answered,
            live,
            holder: None,
            lease_left: None,
            epoch: None,
            usage: record.usage,
            error: record.error.as_ref().map(|e| e.message.clone()),
            waiting,
            approvals,
        }
    }

    /// The status as `runs` shows it (`unreadable` for a record that cannot be read).
    pub fn status_text(&self) -> &str {
        self.status.as_deref().unwrap_or("unreadable")
    }

    /// The run's status, when it is a run's (not `queued`, not unreadable).
    pub fn run_status(&self) -> Option<RunStatus> {
        RunStatus::ALL
            .into_iter()
            .find(|s| Some(s.as_str()) == self.status.as_deref())
    }
}

/// Where runs are kept. Every method names a run by its id (the file store also takes a
/// run directory's path).
pub trait Store: Send + Sync {
    /// The store's name in messages: `file`, `postgres` or `sqlite`.
    fn kind(&self) -> &'static str;

    /// Where it keeps runs, for messages: a directory, a database file, or a server's
    /// database (never a password).
    fn location(&self) -> String;

    /// Creates a run of `program` that `record` describes (giving it its id and start
    /// time), its journal holding `journal` already (the replies of another run's prefix;
    /// empty for a fresh start), and holds it for this process.
    fn create<'a>(
        &'a self,
        record: &'a mut RunRecord,
        program: &'a Program,
        journal: &'a [Reply],
    ) -> BoxFuture<'a, Result<Box<dyn HeldRun>, StoreError>>;

    /// Takes run `id` for this process, to continue it: refused while another process
    /// holds it (naming that process). Its journal is checked as `check` says.
    fn take<'a>(
        &'a self,
        id: &'a str,
        check: JournalCheck,
    ) -> BoxFuture<'a, Result<Taken, StoreError>>;

    /// Reads run `id`'s record without taking it (and its id, a file store's run being
    /// named by its path).
    fn record<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(String, RunRecord), StoreError>>;

    /// Reads run `id` without taking it: its record, artifact and journal.
    fn read<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<StoredRun, StoreError>>;

    /// Every run, oldest first.
    fn list(&self) -> BoxFuture<'_, Result<Vec<RunRow>, StoreError>>;

    /// Removes the runs `rule` selects (each with its journal), keeping those a process
    /// holds; a dry run removes nothing and says what would go.
    fn prune<'a>(&'a self, rule: &'a PruneRule) -> BoxFuture<'a, Result<Vec<Pruned>, StoreError>>;

    /// What `inspect` shows of run `id` beyond its record: where it is and who holds it.
    fn details<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<serde_json::Map<String, serde_json::Value>, StoreError>>;

    /// Keeps `record`, the record of eval `id` (`prosevm eval`), replacing what it held:
    /// evals are kept beside the runs they score, in the same store.
    fn put_eval<'a>(
        &'a self,
        id: &'a str,
        started: &'a str,
        record: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The record of eval `id`.
    fn eval<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<serde_json::Value, StoreError>>;

    /// The records of every eval kept, oldest first.
    fn evals<'a>(&'a self) -> BoxFuture<'a, Result<Vec<serde_json::Value>, StoreError>>;

    /// Where the views of run `id` are on this machine; an id that is not a run's
    /// ([`ids::is_run_id`]) names no place.
    fn views(&self, id: &str) -> Result<PathBuf, StoreError>;

    /// The memo kept beside the runs: model answers by the key of their request, for runs
    /// under `--memo` (files under `memo/` of the file store's state directory, the table
    /// `prose_memo` of a database).
    fn memo(&self) -> Arc<dyn MemoStore>;

    /// The hooks runs name and the deliveries made to them ([`webhooks`]): files in each
    /// run's directory of the file store, the tables `prose_webhooks` and
    /// `prose_webhook_deliveries` of a database.
    fn webhooks(&self) -> Arc<dyn webhooks::Webhooks>;

    /// Whether the views are part of the run (the file store's run directory), so a reader
    /// rebuilds them when a crash left them behind its journal.
    fn views_in_run(&self) -> bool {
        false
    }
}

/// A run held by this process: the only one that writes its record and journal.
pub trait HeldRun: Send + Sync {
    /// The run's id.
    fn id(&self) -> &str;

    /// Where its views (and its run-scoped agents' memory) are written.
    fn views(&self) -> &Path;

    /// Whether views are written at all (persistent agents' memory always is).
    fn writes_views(&self) -> bool {
        true
    }

    /// Its journal, open for appending after the records it holds. The first sync of a new
    /// run's journal makes the run's own files durable first.
    fn journal(&mut self) -> Result<Box<dyn JournalSink>, StoreError>;

    /// Writes its record (durably: a record saying the run ended is the commit point).
    fn write_record<'a>(&'a self, record: &'a RunRecord) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Writes a new run's record before its first answer, which makes it durable.
    fn stage_record<'a>(&'a self, record: &'a RunRecord) -> BoxFuture<'a, Result<(), StoreError>> {
        self.write_record(record)
    }

    /// Replaces its journal by `keep` (an edited program's resume keeps only what still
    /// holds); returns the new journal's seal.
    fn rewrite_journal<'a>(
        &'a mut self,
        keep: &'a [&'a Reply],
    ) -> BoxFuture<'a, Result<Seal, StoreError>>;

    /// Replaces its program (an edited program's resume).
    fn replace_program<'a>(&'a self, program: &'a Program)
        -> BoxFuture<'a, Result<(), StoreError>>;

    /// Gives the run back as it was (a resume that could not begin).
    fn release(&self) -> BoxFuture<'_, Result<(), StoreError>>;

    /// A task keeping the hold while the run goes on (a lease's heartbeat) that asks `stop`
    /// when the hold is lost; none where the hold needs no keeping.
    fn keep(&self, stop: StopSignal) -> Option<BoxFuture<'static, ()>> {
        let _ = stop;
        None
    }
}

/// How `--store` names a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Locator {
    /// The file store under a state directory (`DIR` or `file:DIR`; none: `.prose`).
    File(Option<PathBuf>),
    /// A PostgreSQL database (`postgres://…` or `postgresql://…`).
    Postgres(String),
    /// A SQLite database file (`sqlite:PATH`).
    Sqlite(PathBuf),
}

impl Locator {
    /// The store `spec` names: `postgres://…`, `sqlite:PATH`, `file:DIR`, or a directory.
    pub fn parse(spec: &str) -> Result<Locator, StoreError> {
        if pg::is_url(spec) {
            return Ok(Locator::Postgres(spec.to_string()));
        }
        if let Some(path) = spec.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err(StoreError::NoRun(
                    "`sqlite:` needs the database's path (sqlite:PATH)".into(),
                ));
            }
            return Ok(Locator::Sqlite(PathBuf::from(path)));
        }
        if let Some(dir) = spec.strip_prefix("file:") {
            return Ok(Locator::File(Some(PathBuf::from(dir))));
        }
        // Not echoed: a mistyped database URL may carry a password.
        if spec.contains("://") {
            return Err(StoreError::Postgres(pg::PgError::Url(
                "it is not a postgres:// or postgresql:// URL (a store is one of those, sqlite:PATH, file:DIR or a directory)".into(),
            )));
        }
        Ok(Locator::File(Some(PathBuf::from(spec))))
    }

    /// Opens the store, with `state_dir` as the state directory of this machine (where the
    /// views of runs kept elsewhere are written; default `.prose`) and up to `connections`
    /// connections to a database.
    pub async fn open(
        &self,
        state_dir: Option<&Path>,
        connections: usize,
    ) -> Result<Box<dyn Store>, StoreError> {
        let root = state_root(state_dir);
        Ok(match self {
            Locator::File(dir) => Box::new(file::FileStore::new(
                dir.clone().or_else(|| state_dir.map(Path::to_path_buf)),
            )),
            Locator::Postgres(url) => Box::new(
                pg::PgStore::connect(url, connections)
                    .await?
                    .with_views(root.join("pg")),
            ),
            Locator::Sqlite(path) => {
                Box::new(sqlite::SqliteStore::open(path, root.join("sqlite"))?)
            }
        })
    }
}

/// The state directory: `state_dir`, else `.prose` in the working directory.
pub fn state_root(state_dir: Option<&Path>) -> PathBuf {
    state_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".prose"))
}
