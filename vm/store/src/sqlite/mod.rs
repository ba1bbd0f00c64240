//! Runs in one SQLite file: the store for one machine that wants its runs in a single
//! inspectable file, with readers that never wait. The database runs in WAL mode (a reader
//! sees the last commit while the holder of a run writes) with full syncs (an answer is
//! durable before the run uses it), and holds every run's record, its artifact (by content
//! hash) and its journal as rows.
//!
//! A run is held by a process of this machine: its row names the holder (host, pid, and the
//! process's start time, so a reused pid is not taken for it). A run whose holder is alive
//! is refused, naming it; a holder that died (`kill -9`) holds nothing, so its run can be
//! resumed at once. Every take increments the run's epoch, and every write names the epoch
//! it took, so a process that lost its run can write nothing.
//!
//! ```text
//! prose_artifacts (sha256 → bytes)     prose_runs (id, status, record, epoch, holder)
//!                                        └── prose_journal (run_id, seq, request_id, answered, reply)
//! prose_memo (key → entry)              model answers across runs (`--memo`)
//! prose_webhooks (run_id → url)         the URL a run's ends are posted to
//!   prose_webhook_deliveries (id, run_id, state, record)
//! ```

mod holder;
mod memo;
mod schema;
mod webhooks;

use crate::ids::new_run_id;
use crate::{
    BoxFuture, HeldRun, JournalCheck, PruneRule, Pruned, RunRow, Store, StoreError, StoredRun,
    Taken, TakenRun,
};
use holder::Holder;
use prose_machine::protocol::Reply;
use prose_runtime::memo::MemoStore;
use prose_runtime::program::Program;
use prose_runtime::record::{RunRecord, RunStatus, Seal};
use prose_runtime::runner::journal::{JournalSink, SinkError, SinkFuture};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long a statement waits for another process's write to finish.
const BUSY: Duration = Duration::from_secs(10);

fn sql(e: rusqlite::Error) -> StoreError {
    StoreError::Sqlite(e.to_string())
}

/// A connection, opened and configured for the store.
type Shared = Arc<Mutex<Connection>>;

fn lock(conn: &Shared) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|p| p.into_inner())
}

/// The SQLite store at a path.
pub struct SqliteStore {
    path: PathBuf,
    conn: Shared,
    /// Where the views of runs driven here are written.
    views: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, bringing its schema up to date; the
    /// views of runs driven here go under `views`.
    pub fn open(path: &Path, views: PathBuf) -> Result<SqliteStore, StoreError> {
        let conn = connect(path)?;
        Ok(SqliteStore {
            path: path.to_path_buf(),
            conn: Arc::new(Mutex::new(conn)),
            views,
        })
    }

    fn held(&self, id: &str, epoch: i64, records: usize) -> Result<SqliteHeld, StoreError> {
        let views = self.views.join(crate::ids::checked(id)?);
        std::fs::create_dir_all(&views).map_err(|e| StoreError::Io(views.clone(), e))?;
        Ok(SqliteHeld {
            conn: Arc::new(Mutex::new(connect(&self.path)?)),
            id: id.to_string(),
            epoch,
            records,
            views,
        })
    }

    /// The record of run `id`.
    fn record(conn: &Connection, id: &str) -> Result<RunRecord, StoreError> {
        let text: String = conn
            .query_row(
                "SELECT record FROM prose_runs WHERE id = ?1",
                params![id],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql)?
            .ok_or_else(|| no_run(id))?;
        let record = serde_json::from_str(&text)
            .map_err(|e| StoreError::Invalid(format!("run {id}: its record: {e}")))?;
        crate::ids::checked_record(id, record)
    }
}

fn no_run(id: &str) -> StoreError {
    StoreError::NoRun(format!("no run `{id}` in the SQLite store"))
}

/// A connection to the database at `path` in WAL mode with full syncs, its schema up to
/// date.
fn connect(path: &Path) -> Result<Connection, StoreError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io(dir.to_path_buf(), e))?;
    }
    let mut conn = Connection::open(path)
        .map_err(|e| StoreError::Sqlite(format!("{}: {e}", path.display())))?;
    conn.busy_timeout(BUSY).map_err(sql)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(sql)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Sqlite(format!(
            "{}: the database cannot use write-ahead logging (it is in {mode} mode)",
            path.display()
        )));
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(sql)?;
    // Migrations first, with foreign keys not enforced (the bundled SQLite enforces them
    // by default): one makes a table anew.
    conn.pragma_update(None, "foreign_keys", "OFF")
        .map_err(sql)?;
    schema::migrate(&mut conn)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(sql)?;
    Ok(conn)
}

/// The columns a listing reads, and the journal's length.
const ROW_SELECT: &str = "SELECT r.id, r.program, r.status, r.started, r.epoch, r.record,
        r.holder_host, r.holder_pid, r.holder_start,
        (SELECT count(*) FROM prose_journal j WHERE j.run_id = r.id)
    FROM prose_runs r";

/// A listed run, and who holds it if anyone alive does.
fn run_row(r: &rusqlite::Row) -> rusqlite::Result<(RunRow, Option<Holder>)> {
    let id: String = r.get(0)?;
    let record: String = r.get(5)?;
    // A row whose id or record is not a run's is listed as unreadable, and so is never
    // selected to be resumed or pruned.
    let parsed: Option<RunRecord> = serde_json::from_str(&record)
        .ok()
        .and_then(|p| crate::ids::checked_record(&id, p).ok());
    let readable = parsed.is_some();
    let holder = Holder::from_columns(r.get(6)?, r.get(7)?, r.get(8)?).filter(Holder::alive);
    let answered: i64 = r.get(9)?;
    let (waiting, approvals) = parsed.as_ref().map(RunRecord::awaited).unwrap_or_default();
    let row = RunRow {
        id,
        path: None,
        program: r.get(1)?,
        status: readable.then(|| r.get(2)).transpose()?,
        started: Some(r.get(3)?),
        answered: usize::try_from(answered).unwrap_or(0),
        live: holder.is_some(),
        holder: holder.as_ref().map(Holder::to_string),
        lease_left: None,
        epoch: Some(r.get(4)?),
        usage: parsed.as_ref().and_then(|p| p.usage),
        waiting,
        approvals,
        error: parsed.and_then(|p| p.error.map(|e| e.message)),
    };
    Ok((row, holder))
}

/// Every journal record of run `id`, in order.
fn journal(conn: &Connection, id: &str) -> Result<Vec<Reply>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT seq, reply FROM prose_journal WHERE run_id = ?1 ORDER BY seq")
        .map_err(sql)?;
    let rows = stmt
        .query_map(params![id], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(sql)?;
    rows.map(|row| {
        let (seq, text) = row.map_err(sql)?;
        serde_json::from_str(&text)
            .map_err(|e| e.to_string())
            .and_then(|j| Reply::from_json(j).map_err(|e| e.to_string()))
            .map_err(|e| {
                StoreError::Invalid(format!("run {id}: journal record {seq}: not a reply: {e}"))
            })
    })
    .collect()
}

/// Writes `replies` as journal records `from..` of run `id`, if epoch `epoch` still holds
/// it; false if it does not.
fn append(
    tx: &rusqlite::Transaction,
    id: &str,
    epoch: i64,
    from: usize,
    replies: &[(String, bool, String)],
) -> Result<bool, StoreError> {
    let holds: Option<i64> = tx
        .query_row(
            "SELECT 1 FROM prose_runs WHERE id = ?1 AND epoch = ?2",
            params![id, epoch],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    if holds.is_none() {
        return Ok(false);
    }
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO prose_journal (run_id, seq, request_id, answered, reply)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(sql)?;
    for (i, (request, answered, reply)) in replies.iter().enumerate() {
        stmt.execute(params![id, (from + i) as i64, request, answered, reply])
            .map_err(|e| match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::ConstraintViolation) => StoreError::Invalid(format!(
                    "run {id}: the journal refuses a second record: {e}"
                )),
                _ => sql(e),
            })?;
    }
    Ok(true)
}

/// A reply as a journal row's columns.
fn encode(reply: &Reply) -> Result<(String, bool, String), StoreError> {
    let text = serde_json::to_string(reply)
        .map_err(|e| StoreError::Invalid(format!("cannot encode a reply: {e}")))?;
    Ok((reply.id.to_string(), reply.outcome.is_ok(), text))
}

fn encode_record(record: &RunRecord) -> Result<String, StoreError> {
    serde_json::to_string(record)
        .map_err(|e| StoreError::Invalid(format!("cannot encode the run record: {e}")))
}

impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn memo(&self) -> Arc<dyn MemoStore> {
        Arc::new(memo::SqliteMemo {
            conn: self.conn.clone(),
            path: self.path.clone(),
        })
    }

    fn webhooks(&self) -> Arc<dyn crate::webhooks::Webhooks> {
        Arc::new(webhooks::SqliteWebhooks {
            conn: self.conn.clone(),
        })
    }

    fn create<'a>(
        &'a self,
        record: &'a mut RunRecord,
        program: &'a Program,
        seeded: &'a [Reply],
    ) -> BoxFuture<'a, Result<Box<dyn HeldRun>, StoreError>> {
        Box::pin(async move {
            let me = Holder::me();
            let rows: Vec<_> = seeded.iter().map(encode).collect::<Result<_, _>>()?;
            {
                let mut conn = lock(&self.conn);
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(sql)?;
                tx.execute(
                    "INSERT OR IGNORE INTO prose_artifacts (sha256, bytes, source)
                     VALUES (?1, ?2, ?3)",
                    params![
                        program.sha256(),
                        program.bytes,
                        program.artifact.modules[0].source
                    ],
                )
                .map_err(sql)?;
                loop {
                    let (id, started) = new_run_id();
                    record.id = id;
                    record.started = started;
                    record.journal = Seal {
                        records: rows.len() as u64,
                        crc: 0,
                    };
                    let n = tx
                        .execute(
                            "INSERT OR IGNORE INTO prose_runs (id, program, artifact_sha256,
                                 status, record, started, epoch, holder_host, holder_pid,
                                 holder_start)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, ?8, ?9)",
                            params![
                                record.id,
                                record.program,
                                record.artifact_sha256,
                                record.status.as_str(),
                                encode_record(record)?,
                                record.started,
                                me.host,
                                me.pid,
                                me.start
                            ],
                        )
                        .map_err(sql)?;
                    if n == 1 {
                        break;
                    }
                }
                append(&tx, &record.id, 1, 0, &rows)?;
                tx.commit().map_err(sql)?;
            }
            Ok(Box::new(self.held(&record.id, 1, rows.len())?) as Box<dyn HeldRun>)
        })
    }

    fn take<'a>(
        &'a self,
        id: &'a str,
        _check: JournalCheck,
    ) -> BoxFuture<'a, Result<Taken, StoreError>> {
        // The journal needs no checking: its records are written in transactions fenced by
        // the epoch, and a second answer to a request is refused by an index.
        Box::pin(async move {
            let me = Holder::me();
            let (record, epoch, artifact, journal) = {
                let mut conn = lock(&self.conn);
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(sql)?;
                let found = tx
                    .query_row(
                        &format!("{ROW_SELECT} WHERE r.id = ?1"),
                        params![id],
                        run_row,
                    )
                    .optional()
                    .map_err(sql)?;
                let Some((row, holder)) = found else {
                    return Err(no_run(id));
                };
                if let Some(h) = holder {
                    return Err(StoreError::Held(format!(
                        "run {id} is being run by another process ({h})"
                    )));
                }
                let record = SqliteStore::record(&tx, id)?;
                if row.status.as_deref() == Some(RunStatus::Finished.as_str()) {
                    return Ok(Taken::Finished(Box::new(record)));
                }
                let epoch: i64 = tx
                    .query_row(
                        "UPDATE prose_runs SET epoch = epoch + 1, holder_host = ?2,
                             holder_pid = ?3, holder_start = ?4
                         WHERE id = ?1 RETURNING epoch",
                        params![id, me.host, me.pid, me.start],
                        |r| r.get(0),
                    )
                    .map_err(sql)?;
                let artifact: Vec<u8> = tx
                    .query_row(
                        "SELECT bytes FROM prose_artifacts WHERE sha256 =
                             (SELECT artifact_sha256 FROM prose_runs WHERE id = ?1)",
                        params![id],
                        |r| r.get(0),
                    )
                    .map_err(sql)?;
                let journal = journal(&tx, id)?;
                tx.commit().map_err(sql)?;
                (record, epoch, artifact, journal)
            };
            let held = self.held(id, epoch, journal.len())?;
            Ok(Taken::Held(Box::new(TakenRun {
                held: Box::new(held),
                record,
                artifact,
                journal,
            })))
        })
    }

    fn record<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(String, RunRecord), StoreError>> {
        Box::pin(async move {
            let conn = lock(&self.conn);
            Ok((id.to_string(), SqliteStore::record(&conn, id)?))
        })
    }

    fn read<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<StoredRun, StoreError>> {
        Box::pin(async move {
            // One read transaction: the record, artifact and journal of one moment.
            let mut conn = lock(&self.conn);
            let tx = conn.transaction().map_err(sql)?;
            let record = SqliteStore::record(&tx, id)?;
            let artifact: Vec<u8> = tx
                .query_row(
                    "SELECT bytes FROM prose_artifacts WHERE sha256 = ?1",
                    params![record.artifact_sha256],
                    |r| r.get(0),
                )
                .map_err(sql)?;
            let journal = journal(&tx, id)?;
            Ok(StoredRun {
                id: id.to_string(),
                record,
                artifact,
                journal,
            })
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<RunRow>, StoreError>> {
        Box::pin(async move {
            let conn = lock(&self.conn);
            let mut stmt = conn
                .prepare(&format!("{ROW_SELECT} ORDER BY r.started, r.id"))
                .map_err(sql)?;
            let rows = stmt.query_map([], run_row).map_err(sql)?;
            rows.map(|r| r.map(|(row, _)| row).map_err(sql)).collect()
        })
    }

    fn prune<'a>(&'a self, rule: &'a PruneRule) -> BoxFuture<'a, Result<Vec<Pruned>, StoreError>> {
        Box::pin(async move {
            let rows = self.list().await?;
            let now = std::time::SystemTime::now();
            let mut done = Vec::new();
            for row in rows.into_iter().filter(|r| rule.selects(r, now)) {
                let mut conn = lock(&self.conn);
                // Checked and deleted in one write transaction: nobody takes it between.
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(sql)?;
                let holder = tx
                    .query_row(
                        &format!("{ROW_SELECT} WHERE r.id = ?1"),
                        params![row.id],
                        run_row,
                    )
                    .optional()
                    .map_err(sql)?
                    .and_then(|(_, h)| h);
                if let Some(h) = holder {
                    let why = format!("run {} is being run by another process ({h})", row.id);
                    done.push(Pruned::Kept(row, why));
                } else if rule.dry_run {
                    done.push(Pruned::WouldRemove(row));
                } else {
                    tx.execute("DELETE FROM prose_runs WHERE id = ?1", params![row.id])
                        .map_err(sql)?;
                    tx.commit().map_err(sql)?;
                    // Its views go with it (the row's id was checked when it was listed).
                    if let Ok(views) = self.views(&row.id) {
                        let _ = std::fs::remove_dir_all(views);
                    }
                    done.push(Pruned::Removed(row));
                }
            }
            Ok(done)
        })
    }

    fn put_eval<'a>(
        &'a self,
        id: &'a str,
        started: &'a str,
        record: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            crate::ids::checked(id)?;
            lock(&self.conn)
                .execute(
                    "INSERT INTO prose_evals (id, started, record) VALUES (?1, ?2, ?3)
                     ON CONFLICT (id) DO UPDATE SET record = excluded.record",
                    params![id, started, record.to_string()],
                )
                .map_err(sql)?;
            Ok(())
        })
    }

    fn eval<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<serde_json::Value, StoreError>> {
        Box::pin(async move {
            crate::ids::checked(id)?;
            let text: String = lock(&self.conn)
                .query_row(
                    "SELECT record FROM prose_evals WHERE id = ?1",
                    params![id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql)?
                .ok_or_else(|| StoreError::NoRun(format!("no eval `{id}` in the SQLite store")))?;
            serde_json::from_str(&text).map_err(|e| StoreError::Invalid(format!("eval {id}: {e}")))
        })
    }

    fn evals<'a>(&'a self) -> BoxFuture<'a, Result<Vec<serde_json::Value>, StoreError>> {
        Box::pin(async move {
            let conn = lock(&self.conn);
            let mut stmt = conn
                .prepare("SELECT id, record FROM prose_evals ORDER BY id")
                .map_err(sql)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .map_err(sql)?;
            let mut out = Vec::new();
            for row in rows {
                let (id, text) = row.map_err(sql)?;
                if !crate::ids::is_run_id(&id) {
                    continue;
                }
                out.push(
                    serde_json::from_str(&text)
                        .map_err(|e| StoreError::Invalid(format!("eval {id}: {e}")))?,
                );
            }
            Ok(out)
        })
    }

    fn details<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<serde_json::Map<String, serde_json::Value>, StoreError>> {
        Box::pin(async move {
            let conn = lock(&self.conn);
            let (row, holder) = conn
                .query_row(
                    &format!("{ROW_SELECT} WHERE r.id = ?1"),
                    params![id],
                    run_row,
                )
                .optional()
                .map_err(sql)?
                .ok_or_else(|| no_run(id))?;
            let mut details = serde_json::Map::new();
            details.insert("status".into(), row.status.into());
            details.insert("epoch".into(), row.epoch.into());
            details.insert("holder".into(), holder.map(|h| h.to_string()).into());
            details.insert("store".into(), "sqlite".into());
            details.insert("database".into(), self.path.display().to_string().into());
            Ok(details)
        })
    }

    fn views(&self, id: &str) -> Result<PathBuf, StoreError> {
        Ok(self.views.join(crate::ids::checked(id)?))
    }
}

/// A run of the SQLite store held by this process, with a connection of its own.
pub struct SqliteHeld {
    conn: Shared,
    id: String,
    epoch: i64,
    records: usize,
    views: PathBuf,
}

impl SqliteHeld {
    fn lost(&self) -> StoreError {
        StoreError::Held(format!(
            "run {}: this process's hold (epoch {}) is gone: another process took the run",
            self.id, self.epoch
        ))
    }
}

impl Drop for SqliteHeld {
    /// Lets go of the run (its holder's columns are cleared where this hold still stands),
    /// so this process, alive, does not seem to hold it.
    fn drop(&mut self) {
        let conn = lock(&self.conn);
        let _ = conn.execute(
            "UPDATE prose_runs SET holder_host = NULL, holder_pid = NULL, holder_start = NULL
             WHERE id = ?1 AND epoch = ?2",
            params![self.id, self.epoch],
        );
    }
}

impl HeldRun for SqliteHeld {
    fn id(&self) -> &str {
        &self.id
    }

    fn views(&self) -> &Path {
        &self.views
    }

    fn journal(&mut self) -> Result<Box<dyn JournalSink>, StoreError> {
        Ok(Box::new(SqliteJournal {
            conn: self.conn.clone(),
            id: self.id.clone(),
            epoch: self.epoch,
            next: self.records,
            pending: Vec::new(),
        }))
    }

    fn write_record<'a>(&'a self, record: &'a RunRecord) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let json = encode_record(record)?;
            let conn = lock(&self.conn);
            let n = conn
                .execute(
                    "UPDATE prose_runs SET record = ?3, status = ?4 WHERE id = ?1 AND epoch = ?2",
                    params![self.id, self.epoch, json, record.status.as_str()],
                )
                .map_err(sql)?;
            if n == 1 {
                Ok(())
            } else {
                Err(self.lost())
            }
        })
    }

    fn rewrite_journal<'a>(
        &'a mut self,
        keep: &'a [&'a Reply],
    ) -> BoxFuture<'a, Result<Seal, StoreError>> {
        Box::pin(async move {
            let rows: Vec<_> = keep.iter().map(|r| encode(r)).collect::<Result<_, _>>()?;
            {
                let mut conn = lock(&self.conn);
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(sql)?;
                tx.execute(
                    "DELETE FROM prose_journal WHERE run_id = ?1",
                    params![self.id],
                )
                .map_err(sql)?;
                if !append(&tx, &self.id, self.epoch, 0, &rows)? {
                    return Err(self.lost());
                }
                tx.commit().map_err(sql)?;
            }
            self.records = rows.len();
            Ok(Seal {
                records: rows.len() as u64,
                crc: 0,
            })
        })
    }

    fn replace_program<'a>(
        &'a self,
        program: &'a Program,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut conn = lock(&self.conn);
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            tx.execute(
                "INSERT OR IGNORE INTO prose_artifacts (sha256, bytes, source) VALUES (?1, ?2, ?3)",
                params![
                    program.sha256(),
                    program.bytes,
                    program.artifact.modules[0].source
                ],
            )
            .map_err(sql)?;
            let n = tx
                .execute(
                    "UPDATE prose_runs SET artifact_sha256 = ?3 WHERE id = ?1 AND epoch = ?2",
                    params![self.id, self.epoch, program.sha256()],
                )
                .map_err(sql)?;
            if n != 1 {
                return Err(self.lost());
            }
            tx.commit().map_err(sql)
        })
    }

    fn release(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        // The hold goes when it is dropped.
        Box::pin(async { Ok(()) })
    }
}

/// The journal of a held run: appends are written in one transaction per sync.
struct SqliteJournal {
    conn: Shared,
    id: String,
    epoch: i64,
    /// The next record's sequence number.
    next: usize,
    /// Records appended and not yet written.
    pending: Vec<(String, bool, String)>,
}

impl SqliteJournal {
    fn write(&mut self) -> Result<(), SinkError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let error = |e: StoreError| SinkError(e.to_string());
        let mut conn = lock(&self.conn);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| error(sql(e)))?;
        if !append(&tx, &self.id, self.epoch, self.next, &self.pending).map_err(error)? {
            return Err(SinkError(format!(
                "run {}: this process's hold (epoch {}) is gone: another process took the run",
                self.id, self.epoch
            )));
        }
        tx.commit().map_err(|e| error(sql(e)))?;
        drop(conn);
        self.next += self.pending.len();
        self.pending.clear();
        Ok(())
    }
}

impl JournalSink for SqliteJournal {
    fn append(&mut self, reply: &Reply) -> Result<(), SinkError> {
        self.pending
            .push(encode(reply).map_err(|e| SinkError(e.to_string()))?);
        Ok(())
    }

    fn unsynced(&self) -> usize {
        self.pending.len()
    }

    fn sync(&mut self) -> SinkFuture<'_, ()> {
        let done = self.write();
        Box::pin(async move { done })
    }

    fn close(&mut self) -> SinkFuture<'_, Seal> {
        let done = self.write().map(|()| Seal {
            records: self.next as u64,
            crc: 0,
        });
        Box::pin(async move { done })
    }
}
