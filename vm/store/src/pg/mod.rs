//! Runs on PostgreSQL: the store for many workers on many machines. One database holds every
//! run's record, its artifact (by content hash), and its journal as append-only rows; workers
//! claim runs with `FOR UPDATE SKIP LOCKED`, hold them by a lease renewed by heartbeat, and
//! fence every write with the epoch of their claim ([`lease`]), so a worker that lost its
//! lease can neither record an answer nor end the run.
//!
//! ```text
//! prose_artifacts (sha256 → bytes)     prose_runs (id, status, record, epoch, owner, lease_until)
//!                                        └── prose_journal (run_id, seq, request_id, answered, reply)
//! prose_memo (key → entry)              model answers across runs (`--memo`), every worker's
//! prose_webhooks (run_id → url)         the URL a run's ends are posted to
//!   prose_webhook_deliveries (id, run_id, state, record)
//! ```
//!
//! The truth is in the database. The human-readable views of a run (`bindings/`,
//! `state.md`) are written by the worker running it into its own state directory, under
//! `pg/<run id>/`: a convenience on that machine, not something any other reads.

pub mod journal;
pub mod lease;
mod memo;
pub mod schema;
mod store;
pub mod tls;
mod webhooks;

pub use memo::PgMemo;
pub use store::PgHeld;

use crate::ids::new_run_id;
use crate::Pruned;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use prose_machine::protocol::Reply;
use prose_machine::value::Value;
use prose_runtime::driver::settings::DriverSettings;
use prose_runtime::program::Program;
use prose_runtime::record::{new_machine, ExecOptions, RunRecord, RunStatus};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// A run's id in the Postgres store (the same shape as a file store's run directory name).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(pub String);

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why the Postgres store cannot do what was asked.
#[derive(Debug)]
pub enum PgError {
    /// The store's URL cannot be understood.
    Url(String),
    /// The server cannot be reached, or refused the connection.
    Connect(String),
    /// The schema cannot be brought up to date.
    Migrate(String),
    /// A statement failed.
    Query(String),
    /// The worker's claim on the run is gone (its lease expired and another worker claimed
    /// the run): nothing it writes is accepted.
    Fenced(String),
    /// No such run.
    NoRun(String),
    /// What the database holds is not what it should be.
    Invalid(String),
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PgError::Url(m) => write!(f, "the store URL: {m}"),
            PgError::Connect(m) => write!(f, "cannot connect to the Postgres store: {m}"),
            PgError::Migrate(m) => write!(f, "cannot migrate the Postgres store: {m}"),
            PgError::Query(m) => write!(f, "the Postgres store: {m}"),
            PgError::Fenced(m) | PgError::NoRun(m) | PgError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for PgError {}

/// A database error in words: the server's message (and detail) when it sent one, else the
/// client's error with its causes.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut m = format!("{}: {}", db.severity(), db.message());
        if let Some(d) = db.detail() {
            m.push_str(&format!(" ({d})"));
        }
        return m;
    }
    let mut m = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        m.push_str(&format!(": {s}"));
        source = s.source();
    }
    m
}

pub(crate) fn query(e: tokio_postgres::Error) -> PgError {
    PgError::Query(describe(&e))
}

fn pool_error(e: deadpool_postgres::PoolError) -> PgError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => PgError::Connect(describe(&e)),
        e => PgError::Connect(e.to_string()),
    }
}

/// Whether `store` names a Postgres store (`postgres://…` or `postgresql://…`).
pub fn is_url(store: &str) -> bool {
    store.starts_with("postgres://") || store.starts_with("postgresql://")
}

/// A connection pool to a Postgres store whose schema is up to date.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// The server and database, for messages (`db.example:5432/prose`; no user, no
    /// password).
    location: String,
    /// Where the views of runs driven on this machine are written (`.prose/pg`).
    views: PathBuf,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PgStore")
            .field("connections", &status.size)
            .field("max", &status.max_size)
            .finish()
    }
}

/// A run as the Postgres store lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PgRow {
    /// The run's id.
    pub id: String,
    /// The program's name.
    pub program: String,
    /// `queued`, `running`, `interrupted`, `paused`, `finished` or `failed`.
    pub status: String,
    /// When it was submitted (UTC, ISO 8601).
    pub submitted: String,
    /// Replies its journal holds.
    pub answered: i64,
    /// The epoch of its last claim (0: never claimed).
    pub epoch: i64,
    /// The worker holding it, while one does.
    pub owner: Option<String>,
    /// Seconds until the holder's lease expires (negative: expired).
    pub lease_left: Option<f64>,
    /// Tokens and cost it used, as of when it last stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<prose_machine::protocol::Usage>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The inputs a waiting run waits for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<prose_runtime::record::WaitingInput>,
    /// The tool calls a waiting run waits for a person's approval of.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<prose_runtime::approvals::WaitingApproval>,
}

/// A run as the store holds it: its row and record.
#[derive(Clone, Debug)]
pub struct PgRun {
    /// The run's row.
    pub row: PgRow,
    /// Its record.
    pub record: RunRecord,
}

impl PgStore {
    /// Connects to the store at `url` with a pool of up to `connections`, over TLS as its
    /// libpq parameters ask ([`tls`]), and applies the migrations it lacks. A bad URL, an
    /// unreachable server, a certificate that does not check out or a failed migration is an
    /// error saying which, before anything is written.
    pub async fn connect(url: &str, connections: usize) -> Result<PgStore, PgError> {
        if !is_url(url) {
            // Not echoed: a URL may carry a password.
            return Err(PgError::Url(
                "it is not a postgres:// or postgresql:// URL".into(),
            ));
        }
        let (url, tls) = tls::split(url)?;
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| PgError::Url(describe(&e)))?;
        let location = {
            let host = match config.get_hosts().first() {
                Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
                #[cfg(unix)]
                Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
                None => "localhost".into(),
            };
            let port = config.get_ports().first().copied().unwrap_or(5432);
            format!(
                "{host}:{port}/{}",
                config.get_dbname().unwrap_or("postgres")
            )
        };
        let connector = tls::apply(&mut config, &tls)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        config.application_name("prosevm");
        let manager = Manager::from_config(
            config,
            connector,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(connections.max(1))
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(Duration::from_secs(15)))
            .wait_timeout(Some(Duration::from_secs(60)))
            .build()
            .map_err(|e| PgError::Connect(e.to_string()))?;
        let store = PgStore {
            pool,
            location,
            views: PathBuf::from(".prose/pg"),
        };
        schema::migrate(&store).await?;
        Ok(store)
    }

    /// The store, writing the views of runs driven here under `dir` (`<state dir>/pg`).
    pub fn with_views(mut self, dir: PathBuf) -> PgStore {
        self.views = dir;
        self
    }

    /// Where the views of run `id` are written on this machine: under the views directory,
    /// whatever a row says (an id that is not a run's is refused).
    pub fn views_of(&self, id: &str) -> Result<PathBuf, PgError> {
        crate::ids::checked(id).map_err(|e| PgError::Invalid(e.to_string()))?;
        Ok(self.views.join(id))
    }

    /// A connection from the pool.
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Client, PgError> {
        self.pool.get().await.map_err(pool_error)
    }

    /// Enqueues a run of `program` with top-level `inputs`, to be answered by `driver`
    /// (settings only: keys are read from each worker's environment), executing as
    /// `options` say; its sessions act in each worker's working directory. Returns its id.
    pub async fn submit(
        &self,
        program: &Program,
        inputs: BTreeMap<String, Value>,
        driver: DriverSettings,
        options: ExecOptions,
    ) -> Result<RunId, PgError> {
        let artifact = &program.artifact;
        if let DriverSettings::Stdio { .. } = driver {
            return Err(PgError::Invalid(
                "the stdio driver answers through a host on prosevm's stdin, and a worker has none; submit with another driver".into(),
            ));
        }
        // The inputs are checked now, so a run that cannot start is refused at once.
        new_machine(artifact, &inputs, &options).map_err(|e| PgError::Invalid(e.to_string()))?;
        let mut record = RunRecord::new(program, inputs, driver, options, PathBuf::from("."));
        self.insert(&mut record, program, &[], None).await
    }

    /// Inserts a run of `program` that `record` describes (giving it its id and start time)
    /// with `journal` already in its journal: queued, or held by `claim` (a worker and a
    /// lease) as epoch 1 of the run.
    pub(crate) async fn insert(
        &self,
        record: &mut RunRecord,
        program: &Program,
        journal: &[Reply],
        claim: Option<(&lease::WorkerId, Duration)>,
    ) -> Result<RunId, PgError> {
        let sha = program.sha256();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(query)?;
        insert_artifact(&tx, program).await?;
        let (status, epoch, owner, lease) = match claim {
            None => ("queued", 0i64, None, None),
            Some((w, l)) => ("running", 1, Some(w.0.as_str()), Some(l.as_secs_f64())),
        };
        let id = loop {
            let (id, started) = new_run_id();
            record.id = id;
            record.started = started;
            let json = serde_json::to_string(&*record)
                .map_err(|e| PgError::Invalid(format!("cannot encode the run record: {e}")))?;
            let n = tx
                .execute(
                    "INSERT INTO prose_runs
                         (id, program, artifact_sha256, status, record, epoch, owner, lease_until)
                     VALUES ($1, $2, $3, $4, $5::text::json, $6, $7,
                             now() + make_interval(secs => $8::float8))
                     ON CONFLICT (id) DO NOTHING",
                    &[
                        &record.id,
                        &record.program,
                        &sha,
                        &status,
                        &json,
                        &epoch,
                        &owner,
                        &lease,
                    ],
                )
                .await
                .map_err(query)?;
            if n == 1 {
                break RunId(record.id.clone());
            }
        };
        let seeded: Vec<&Reply> = journal.iter().collect();
        journal::insert_rows(&tx, &id.0, epoch, &seeded).await?;
        tx.commit().await.map_err(query)?;
        Ok(id)
    }

    /// Every run, oldest first.
    pub async fn list(&self) -> Result<Vec<PgRow>, PgError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!("{ROW_SELECT} ORDER BY r.submitted, r.id"),
                &[&Option::<String>::None],
            )
            .await
            .map_err(query)?;
        Ok(rows
            .iter()
            .map(|r| run_row(r, parsed(r).as_ref()))
            .collect())
    }

    /// The run `id`: its row and record.
    pub async fn run(&self, id: &str) -> Result<PgRun, PgError> {
        let client = self.client().await?;
        let row = client
            .query_opt(ROW_SELECT, &[&Some(id.to_string())])
            .await
            .map_err(query)?
            .ok_or_else(|| PgError::NoRun(format!("no run `{id}` in the Postgres store")))?;
        let record: String = row.get("record");
        let record = serde_json::from_str(&record)
            .map_err(|e| PgError::Invalid(format!("run {id}: its record: {e}")))?;
        let record =
            crate::ids::checked_record(id, record).map_err(|e| PgError::Invalid(e.to_string()))?;
        Ok(PgRun {
            row: run_row(&row, Some(&record)),
            record,
        })
    }

    /// The replies the journal of run `id` holds, in the order they were recorded.
    pub async fn journal(&self, id: &str) -> Result<Vec<Reply>, PgError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT seq, reply::text FROM prose_journal WHERE run_id = $1 ORDER BY seq",
                &[&id],
            )
            .await
            .map_err(query)?;
        rows.iter()
            .map(|r| {
                let seq: i64 = r.get(0);
                let text: String = r.get(1);
                serde_json::from_str(&text)
                    .map_err(|e| e.to_string())
                    .and_then(|j| Reply::from_json(j).map_err(|e| e.to_string()))
                    .map_err(|e| {
                        PgError::Invalid(format!(
                            "run {id}: journal record {seq}: not a reply: {e}"
                        ))
                    })
            })
            .collect()
    }

    /// The artifact whose SHA-256 is `sha256`.
    pub async fn artifact(&self, sha256: &str) -> Result<Vec<u8>, PgError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT bytes FROM prose_artifacts WHERE sha256 = $1",
                &[&sha256],
            )
            .await
            .map_err(query)?
            .ok_or_else(|| PgError::Invalid(format!("no artifact {sha256} in the store")))?;
        Ok(row.get(0))
    }
}

/// A run's row with its journal's length; `$1` is one run's id, or null for all.
impl PgStore {
    /// Prunes the runs whose status is one of `statuses` and that were submitted at least
    /// `older_than` ago (any age if `None`): each is deleted with its journal unless a worker
    /// holds it (a live lease), checked in the deleting statement itself; `dry_run` deletes
    /// nothing and says what would go.
    pub async fn prune(
        &self,
        statuses: &[RunStatus],
        older_than: Option<Duration>,
        dry_run: bool,
    ) -> Result<Vec<Pruned>, PgError> {
        let client = self.client().await?;
        let statuses: Vec<String> = statuses.iter().map(|s| s.as_str().to_string()).collect();
        let age = older_than.map(|d| d.as_secs_f64());
        let rows = client
            .query(
                &format!(
                    "{ROW_SELECT} AND r.status = ANY($2)
                     AND ($3::float8 IS NULL OR r.submitted <= now() - make_interval(secs => $3))
                     ORDER BY r.submitted, r.id"
                ),
                &[&Option::<String>::None, &statuses, &age],
            )
            .await
            .map_err(query)?;
        let mut done = Vec::with_capacity(rows.len());
        for row in rows.iter().map(|r| run_row(r, parsed(r).as_ref()).to_row()) {
            if row.status.is_none() {
                done.push(Pruned::Kept(row, "it is not a run's row".into()));
            } else if row.live {
                let why = format!("worker {} holds it", row.holder.as_deref().unwrap_or("?"));
                done.push(Pruned::Kept(row, why));
            } else if dry_run {
                done.push(Pruned::WouldRemove(row));
            } else {
                let deleted = client
                    .execute(
                        "DELETE FROM prose_runs WHERE id = $1
                         AND NOT (owner IS NOT NULL AND lease_until > now())",
                        &[&row.id],
                    )
                    .await
                    .map_err(query)?;
                done.push(if deleted == 1 {
                    // Its views on this machine go with it.
                    if let Ok(views) = self.views_of(&row.id) {
                        let _ = std::fs::remove_dir_all(views);
                    }
                    Pruned::Removed(row)
                } else {
                    Pruned::Kept(row, "a worker claimed it meanwhile".into())
                });
            }
        }
        Ok(done)
    }
}

const ROW_SELECT: &str =
    "SELECT r.id, r.program, r.status, r.epoch, r.owner, r.record::text AS record,
        to_char(r.submitted AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS submitted,
        EXTRACT(EPOCH FROM (r.lease_until - now()))::float8 AS lease_left,
        (SELECT count(*) FROM prose_journal j WHERE j.run_id = r.id) AS answered
    FROM prose_runs r WHERE ($1::text IS NULL OR r.id = $1)";

/// The record of a row [`ROW_SELECT`] read, when it reads.
fn parsed(r: &tokio_postgres::Row) -> Option<RunRecord> {
    let record = serde_json::from_str(r.get::<_, &str>("record")).ok()?;
    crate::ids::checked_record(r.get::<_, &str>("id"), record).ok()
}

/// The row [`ROW_SELECT`] read, whose record is `record`.
fn run_row(r: &tokio_postgres::Row, record: Option<&RunRecord>) -> PgRow {
    let (waiting, approvals) = record.map(RunRecord::awaited).unwrap_or_default();
    PgRow {
        id: r.get("id"),
        program: r.get("program"),
        status: r.get("status"),
        submitted: r.get("submitted"),
        answered: r.get("answered"),
        epoch: r.get("epoch"),
        owner: r.get("owner"),
        lease_left: r.get("lease_left"),
        usage: record.and_then(|rec| rec.usage),
        error: record.and_then(|rec| rec.error.as_ref().map(|e| e.message.clone())),
        waiting,
        approvals,
    }
}

impl PgRow {
    /// The row as every store lists runs.
    pub fn to_row(&self) -> crate::RunRow {
        // A row whose id is not a run's is listed as unreadable, and so is never selected
        // to be resumed or pruned.
        let readable = crate::ids::is_run_id(&self.id);
        crate::RunRow {
            id: self.id.clone(),
            path: None,
            program: self.program.clone(),
            status: readable.then(|| self.status.clone()),
            started: Some(self.submitted.clone()),
            answered: usize::try_from(self.answered).unwrap_or(0),
            live: self.owner.is_some() && self.lease_left.is_some_and(|l| l > 0.0),
            holder: self.owner.clone(),
            lease_left: self.lease_left,
            epoch: Some(self.epoch),
            usage: self.usage,
            error: self.error.clone(),
            waiting: self.waiting.clone(),
            approvals: self.approvals.clone(),
        }
    }
}

/// Keeps `program`'s artifact in transaction `tx`, by its content (once for many runs).
pub(crate) async fn insert_artifact(
    tx: &deadpool_postgres::Transaction<'_>,
    program: &Program,
) -> Result<(), PgError> {
    tx.execute(
        "INSERT INTO prose_artifacts (sha256, bytes, source) VALUES ($1, $2, $3)
         ON CONFLICT (sha256) DO NOTHING",
        &[
            &program.sha256(),
            &program.bytes,
            &program.artifact.modules[0].source,
        ],
    )
    .await
    .map_err(query)?;
    Ok(())
}
