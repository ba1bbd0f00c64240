//! Claims and leases. A worker claims a run that is queued, or running under a lease that
//! expired (its worker died), with `FOR UPDATE SKIP LOCKED`, so workers claiming together
//! never wait on each other nor take the same run. A claim increments the run's epoch: the
//! fencing token every later write of the claimant names, in the same statement, so once
//! another worker has claimed the run nothing the old one writes is accepted. The lease is
//! renewed by a heartbeat ([`heartbeat`]); a worker that stops cleanly releases it.

use super::{query, PgError, PgStore, RunId};
use prose_runtime::program::Program;
use prose_runtime::record::{RunRecord, RunStatus};
use prose_runtime::runner::StopSignal;
use std::time::Duration;

/// A worker's name in the store (its host, process and a random part).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkerId(pub String);

impl WorkerId {
    /// A new worker id for this process.
    pub fn new() -> WorkerId {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "host".into());
        WorkerId(format!(
            "{host}:{}:{}",
            std::process::id(),
            crate::ids::random6()
        ))
    }
}

impl Default for WorkerId {
    fn default() -> WorkerId {
        WorkerId::new()
    }
}

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The fencing token of a claim: the run's epoch when it was claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Epoch(pub i64);

/// What a run becomes when the run stops on purpose (interrupted) under a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnStop {
    /// Queued again, for any worker to take up (a worker shutting down).
    Requeue,
    /// Interrupted, until someone resumes it (`prosevm resume`).
    Interrupt,
}

/// A worker's hold on a run.
#[derive(Clone, Debug)]
pub struct Claim {
    /// The store.
    pub store: PgStore,
    /// The run.
    pub run: RunId,
    /// The epoch this claim made: every write names it.
    pub epoch: Epoch,
    /// Who holds it.
    pub worker: WorkerId,
    /// The run's record as it was when claimed.
    pub record: RunRecord,
    /// What the run becomes if interrupted.
    pub on_stop: OnStop,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn fenced(claim: &Claim) -> PgError {
    PgError::Fenced(format!(
        "run {}: this worker's claim (epoch {}) is gone: another worker claimed the run after its lease expired",
        claim.run, claim.epoch.0
    ))
}

/// Claims the oldest run that is queued, or running under an expired lease, for `worker`
/// with a lease of `lease`; none when there is no such run (or every one is being claimed
/// by another worker right now).
pub async fn claim_next(
    store: &PgStore,
    worker: &WorkerId,
    lease: Duration,
) -> Result<Option<Claim>, PgError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            "UPDATE prose_runs r
                SET epoch = r.epoch + 1, owner = $1, status = 'running',
                    lease_until = now() + make_interval(secs => $2), updated = now()
               FROM (SELECT id FROM prose_runs
                      WHERE status = 'queued' OR (status = 'running' AND lease_until < now())
                      ORDER BY submitted, id
                      LIMIT 1
                      FOR UPDATE SKIP LOCKED) c
              WHERE r.id = c.id
          RETURNING r.id, r.epoch, r.record::text",
            &[&worker.0, &secs(lease)],
        )
        .await
        .map_err(query)?;
    let Some(r) = row else { return Ok(None) };
    match claim_of(store, worker, &r, OnStop::Requeue) {
        Ok(claim) => Ok(Some(claim)),
        Err(e) => {
            // A row no worker can run (its id or record was not written by a store) is set
            // aside as failed, not claimed again each time its lease runs out.
            let (id, epoch): (String, i64) = (r.get(0), r.get(1));
            client
                .execute(
                    "UPDATE prose_runs SET status = 'failed', owner = NULL, lease_until = NULL
                      WHERE id = $1 AND epoch = $2",
                    &[&id, &epoch],
                )
                .await
                .map_err(query)?;
            Err(e)
        }
    }
}

/// Claims run `id` for `worker` (to resume it by hand): refused while another worker's
/// lease on it holds; none when it has finished.
pub async fn claim_run(
    store: &PgStore,
    id: &str,
    worker: &WorkerId,
    lease: Duration,
) -> Result<Option<Claim>, PgError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            "UPDATE prose_runs
                SET epoch = epoch + 1, owner = $2, status = 'running',
                    lease_until = now() + make_interval(secs => $3), updated = now()
              WHERE id = $1 AND status <> 'finished'
                AND (status <> 'running' OR lease_until IS NULL OR lease_until < now())
          RETURNING id, epoch, record::text",
            &[&id, &worker.0, &secs(lease)],
        )
        .await
        .map_err(query)?;
    match row {
        Some(r) => claim_of(store, worker, &r, OnStop::Interrupt).map(Some),
        None => {
            let run = store.run(id).await?;
            match run.row.status.as_str() {
                "finished" => Ok(None),
                _ => Err(PgError::Fenced(format!(
                    "run {id} is being run by worker {} (its lease has {:.0} s left)",
                    run.row.owner.as_deref().unwrap_or("?"),
                    run.row.lease_left.unwrap_or(0.0)
                ))),
            }
        }
    }
}

fn claim_of(
    store: &PgStore,
    worker: &WorkerId,
    r: &tokio_postgres::Row,
    on_stop: OnStop,
) -> Result<Claim, PgError> {
    let id: String = r.get(0);
    let record: String = r.get(2);
    let record = serde_json::from_str(&record)
        .map_err(|e| PgError::Invalid(format!("run {id}: its record: {e}")))?;
    // A row someone else wrote is checked as strictly as an id typed by a user.
    let record =
        crate::ids::checked_record(&id, record).map_err(|e| PgError::Invalid(e.to_string()))?;
    Ok(Claim {
        store: store.clone(),
        run: RunId(id),
        epoch: Epoch(r.get(1)),
        worker: worker.clone(),
        record,
        on_stop,
    })
}

/// Renews the leases `worker` holds on `runs` to `lease` from now; returns those it still
/// holds (a run missing was claimed by another worker after this one's lease expired).
pub async fn heartbeat(
    store: &PgStore,
    worker: &WorkerId,
    runs: &[(RunId, Epoch)],
    lease: Duration,
) -> Result<Vec<RunId>, PgError> {
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = runs.iter().map(|(r, _)| r.0.as_str()).collect();
    let epochs: Vec<i64> = runs.iter().map(|(_, e)| e.0).collect();
    let client = store.client().await?;
    let rows = client
        .query(
            "UPDATE prose_runs r SET lease_until = now() + make_interval(secs => $2)
               FROM unnest($3::text[], $4::bigint[]) AS h(id, epoch)
              WHERE r.id = h.id AND r.epoch = h.epoch AND r.owner = $1 AND r.status = 'running'
          RETURNING r.id",
            &[&worker.0, &secs(lease), &ids, &epochs],
        )
        .await
        .map_err(query)?;
    Ok(rows.iter().map(|r| RunId(r.get(0))).collect())
}

impl Claim {
    /// Writes `record` as the run's record, fenced: refused unless this claim still holds.
    /// A record saying the run stopped (finished, failed, paused or interrupted) releases
    /// the lease in the same statement; an interrupted run is queued again or left
    /// interrupted as [`Claim::on_stop`] says.
    pub async fn write_record(&self, record: &RunRecord) -> Result<(), PgError> {
        let status = match record.status {
            RunStatus::Interrupted if self.on_stop == OnStop::Requeue => "queued",
            s => s.as_str(),
        };
        let json = serde_json::to_string(record)
            .map_err(|e| PgError::Invalid(format!("cannot encode the run record: {e}")))?;
        let outputs = record
            .outputs
            .as_ref()
            .map(|o| serde_json::Value::Object(o.clone()).to_string());
        let client = self.store.client().await?;
        let n = client
            .execute(
                "UPDATE prose_runs
                    SET record = $3::text::json, status = $4, outputs = $5::text::json,
                        owner = CASE WHEN $4 = 'running' THEN owner END,
                        lease_until = CASE WHEN $4 = 'running' THEN lease_until END,
                        updated = now()
                  WHERE id = $1 AND epoch = $2 AND status = 'running'",
                &[&self.run.0, &self.epoch.0, &json, &status, &outputs],
            )
            .await
            .map_err(query)?;
        if n == 1 {
            Ok(())
        } else {
            Err(fenced(self))
        }
    }

    /// Replaces the run's program by `program`, fenced.
    pub async fn replace_program(&self, program: &Program) -> Result<(), PgError> {
        let sha = program.sha256();
        let mut client = self.store.client().await?;
        let tx = client.transaction().await.map_err(query)?;
        self.fence(&tx).await?;
        super::insert_artifact(&tx, program).await?;
        tx.execute(
            "UPDATE prose_runs SET artifact_sha256 = $2 WHERE id = $1",
            &[&self.run.0, &sha],
        )
        .await
        .map_err(query)?;
        tx.commit().await.map_err(query)
    }

    /// Locks the run's row in `tx` if this claim still holds it; refused otherwise.
    pub(crate) async fn fence(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
    ) -> Result<(), PgError> {
        let row = tx
            .query_opt(
                "SELECT 1 FROM prose_runs WHERE id = $1 AND epoch = $2 AND status = 'running'
                 FOR UPDATE",
                &[&self.run.0, &self.epoch.0],
            )
            .await
            .map_err(query)?;
        row.map(|_| ()).ok_or_else(|| fenced(self))
    }

    /// Gives the run up without changing its record (a worker stopping before it began
    /// the run): it is queued again at once. Fenced like every write.
    pub async fn release(&self) -> Result<(), PgError> {
        let client = self.store.client().await?;
        let n = client
            .execute(
                "UPDATE prose_runs SET status = 'queued', owner = NULL, lease_until = NULL,
                        updated = now()
                  WHERE id = $1 AND epoch = $2 AND status = 'running'",
                &[&self.run.0, &self.epoch.0],
            )
            .await
            .map_err(query)?;
        if n == 1 {
            Ok(())
        } else {
            Err(fenced(self))
        }
    }

    /// The error a write refused for want of this claim reports.
    pub(crate) fn fenced(&self) -> PgError {
        fenced(self)
    }
}

/// Keeps the lease of one claim (a run resumed or started by hand): renews it every third of
/// `lease` until the claim is lost, then asks `stop` (the run's writes would be refused
/// anyway). Trouble reaching the store is told to `warn`; the renewal goes on.
pub async fn keep(claim: Claim, lease: Duration, stop: StopSignal, warn: impl Fn(&PgError)) {
    let held = [(claim.run.clone(), claim.epoch)];
    loop {
        tokio::time::sleep(lease / 3).await;
        match heartbeat(&claim.store, &claim.worker, &held, lease).await {
            Ok(kept) if kept.is_empty() => {
                stop.ask();
                return;
            }
            Ok(_) => {}
            Err(e) => warn(&e),
        }
    }
}
