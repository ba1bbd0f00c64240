//! The Postgres store behind the [`Store`] trait: a run is taken by claiming it (refused
//! while another worker's lease holds), and held by a lease renewed while it runs.

use super::journal::PgJournal;
use super::lease::{self, Claim, WorkerId};
use super::PgStore;
use crate::{
    BoxFuture, HeldRun, JournalCheck, PruneRule, Pruned, RunRow, Store, StoreError, StoredRun,
    Taken, TakenRun,
};
use prose_machine::protocol::Reply;
use prose_runtime::memo::MemoStore;
use prose_runtime::program::Program;
use prose_runtime::record::{RunRecord, Seal};
use prose_runtime::runner::journal::JournalSink;
use prose_runtime::runner::StopSignal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a claim made by hand (`exec`, `resume`) holds without a heartbeat.
const LEASE: Duration = Duration::from_secs(30);

/// A run of the Postgres store claimed by this process: every write is fenced by the
/// claim's epoch. Its views are written to a local directory.
pub struct PgHeld {
    claim: Claim,
    /// Records already in the journal.
    records: usize,
    /// Where the run's views go on this machine.
    views: PathBuf,
    /// Whether they are written at all (persistent agents' memory always is).
    files: bool,
}

impl PgHeld {
    /// The run `claim` holds, whose journal has `records` records, with its views in
    /// `views` (written only if `files`; the directory is made then).
    pub fn new(
        claim: Claim,
        records: usize,
        views: PathBuf,
        files: bool,
    ) -> Result<PgHeld, StoreError> {
        if files {
            std::fs::create_dir_all(&views).map_err(|e| StoreError::Io(views.clone(), e))?;
        }
        Ok(PgHeld {
            claim,
            records,
            views,
            files,
        })
    }

    /// The claim.
    pub fn claim(&self) -> &Claim {
        &self.claim
    }
}

impl PgStore {
    /// The run `claim` holds (a worker's claim), taken: its record, artifact and journal;
    /// its views written under this store's views directory if `views`.
    pub async fn taken(&self, claim: Claim, views: bool) -> Result<TakenRun, StoreError> {
        let id = claim.run.0.clone();
        let artifact = self.artifact(&claim.record.artifact_sha256).await?;
        let journal = self.journal(&id).await?;
        let record = claim.record.clone();
        let held = PgHeld::new(claim, journal.len(), self.views_of(&id)?, views)?;
        Ok(TakenRun {
            held: Box::new(held),
            record,
            artifact,
            journal,
        })
    }
}

impl Store for PgStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn location(&self) -> String {
        self.location.clone()
    }

    fn memo(&self) -> Arc<dyn MemoStore> {
        Arc::new(super::PgMemo {
            store: self.clone(),
        })
    }

    fn webhooks(&self) -> Arc<dyn crate::webhooks::Webhooks> {
        Arc::new(super::webhooks::PgWebhooks {
            store: self.clone(),
        })
    }

    fn create<'a>(
        &'a self,
        record: &'a mut RunRecord,
        program: &'a Program,
        journal: &'a [Reply],
    ) -> BoxFuture<'a, Result<Box<dyn HeldRun>, StoreError>> {
        Box::pin(async move {
            let worker = WorkerId::new();
            self.insert(record, program, journal, Some((&worker, LEASE)))
                .await?;
            let claim = Claim {
                store: self.clone(),
                run: super::RunId(record.id.clone()),
                epoch: lease::Epoch(1),
                worker,
                record: record.clone(),
                on_stop: lease::OnStop::Interrupt,
            };
            let views = self.views_of(&record.id)?;
            Ok(Box::new(PgHeld::new(claim, journal.len(), views, true)?) as Box<dyn HeldRun>)
        })
    }

    fn take<'a>(
        &'a self,
        id: &'a str,
        _check: JournalCheck,
    ) -> BoxFuture<'a, Result<Taken, StoreError>> {
        // The journal needs no checking: its rows are written in transactions that the
        // claim fences, and a second answer to a request is refused by an index.
        Box::pin(async move {
            let worker = WorkerId::new();
            let Some(claim) = lease::claim_run(self, id, &worker, LEASE).await? else {
                return Ok(Taken::Finished(Box::new(self.run(id).await?.record)));
            };
            match self.taken(claim.clone(), true).await {
                Ok(taken) => Ok(Taken::Held(Box::new(taken))),
                Err(e) => {
                    let _ = claim.release().await;
                    Err(e)
                }
            }
        })
    }

    fn record<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(String, RunRecord), StoreError>> {
        Box::pin(async move { Ok((id.to_string(), self.run(id).await?.record)) })
    }

    fn read<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<StoredRun, StoreError>> {
        Box::pin(async move {
            let run = self.run(id).await?;
            let artifact = self.artifact(&run.record.artifact_sha256).await?;
            let journal = self.journal(id).await?;
            Ok(StoredRun {
                id: id.to_string(),
                record: run.record,
                artifact,
                journal,
            })
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<RunRow>, StoreError>> {
        Box::pin(async move {
            Ok(PgStore::list(self)
                .await?
                .iter()
                .map(super::PgRow::to_row)
                .collect())
        })
    }

    fn prune<'a>(&'a self, rule: &'a PruneRule) -> BoxFuture<'a, Result<Vec<Pruned>, StoreError>> {
        Box::pin(async move {
            Ok(PgStore::prune(self, &rule.statuses(), rule.older_than, rule.dry_run).await?)
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
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO prose_evals (id, started, record) VALUES ($1, $2, $3::text::jsonb)
                     ON CONFLICT (id) DO UPDATE SET record = excluded.record",
                    &[&id, &started, &record.to_string()],
                )
                .await
                .map_err(super::query)?;
            Ok(())
        })
    }

    fn eval<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<serde_json::Value, StoreError>> {
        Box::pin(async move {
            crate::ids::checked(id)?;
            let client = self.client().await?;
            let row = client
                .query_opt("SELECT record::text FROM prose_evals WHERE id = $1", &[&id])
                .await
                .map_err(super::query)?
                .ok_or_else(|| {
                    StoreError::NoRun(format!("no eval `{id}` in the Postgres store"))
                })?;
            let text: String = row.get(0);
            serde_json::from_str(&text).map_err(|e| StoreError::Invalid(format!("eval {id}: {e}")))
        })
    }

    fn evals<'a>(&'a self) -> BoxFuture<'a, Result<Vec<serde_json::Value>, StoreError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query("SELECT id, record::text FROM prose_evals ORDER BY id", &[])
                .await
                .map_err(super::query)?;
            let mut out = Vec::new();
            for row in rows {
                let (id, text): (String, String) = (row.get(0), row.get(1));
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
            let row = self.run(id).await?.row;
            let mut details = serde_json::Map::new();
            details.insert("status".into(), row.status.into());
            details.insert("epoch".into(), row.epoch.into());
            details.insert("worker".into(), row.owner.into());
            details.insert("lease_left".into(), row.lease_left.into());
            details.insert("store".into(), "postgres".into());
            Ok(details)
        })
    }

    fn views(&self, id: &str) -> Result<PathBuf, StoreError> {
        Ok(self.views_of(id)?)
    }
}

impl HeldRun for PgHeld {
    fn id(&self) -> &str {
        &self.claim.run.0
    }

    fn views(&self) -> &Path {
        &self.views
    }

    fn writes_views(&self) -> bool {
        self.files
    }

    fn journal(&mut self) -> Result<Box<dyn JournalSink>, StoreError> {
        Ok(Box::new(PgJournal::new(self.claim.clone(), self.records)))
    }

    fn write_record<'a>(&'a self, record: &'a RunRecord) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { Ok(self.claim.write_record(record).await?) })
    }

    fn rewrite_journal<'a>(
        &'a mut self,
        keep: &'a [&'a Reply],
    ) -> BoxFuture<'a, Result<Seal, StoreError>> {
        Box::pin(async move {
            self.records = self.claim.rewrite_journal(keep).await?;
            Ok(Seal {
                records: self.records as u64,
                crc: 0,
            })
        })
    }

    fn replace_program<'a>(
        &'a self,
        program: &'a Program,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { Ok(self.claim.replace_program(program).await?) })
    }

    fn release(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { Ok(self.claim.release().await?) })
    }

    fn keep(&self, stop: StopSignal) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(lease::keep(
            self.claim.clone(),
            LEASE,
            stop,
            |e| eprintln!("prosevm: warning: heartbeat: {e}"),
        )))
    }
}
