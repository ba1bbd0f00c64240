//! A run's journal in Postgres: replies appended as rows `(run, seq)` by the worker holding
//! the run. Appends are buffered and written by [`PgJournal::sync`] in one statement that
//! first takes the run's row in share mode and checks the claim's epoch, so a worker whose
//! claim is gone writes nothing, and a claim being made waits for the write in progress. A
//! second answer to one request is refused by a unique index.

use super::lease::Claim;
use super::{describe, PgError};
use prose_machine::protocol::Reply;
use prose_runtime::record::Seal;
use prose_runtime::runner::journal::{JournalSink, SinkError, SinkFuture};

/// The journal of a claimed run, being appended to.
pub struct PgJournal {
    claim: Claim,
    /// The next record's sequence number (the records already in the journal).
    next: i64,
    /// Records appended and not yet written: (request id, answered, reply JSON).
    pending: Vec<(String, bool, String)>,
}

impl PgJournal {
    /// The journal of the run `claim` holds, which has `records` records already.
    pub fn new(claim: Claim, records: usize) -> PgJournal {
        PgJournal {
            claim,
            next: records as i64,
            pending: Vec::new(),
        }
    }

    /// Appends `reply` (written at the next [`PgJournal::sync`]).
    pub fn append(&mut self, reply: &Reply) -> Result<(), PgError> {
        let json = serde_json::to_string(reply)
            .map_err(|e| PgError::Invalid(format!("cannot encode a reply: {e}")))?;
        self.pending
            .push((reply.id.to_string(), reply.outcome.is_ok(), json));
        Ok(())
    }

    /// Records appended and not yet written.
    pub fn unsynced(&self) -> usize {
        self.pending.len()
    }

    /// Writes what was appended, in one statement, if this claim still holds the run:
    /// durable once this returns (the transaction committed).
    pub async fn sync(&mut self) -> Result<(), PgError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let n = self.pending.len() as i64;
        let seqs: Vec<i64> = (self.next..self.next + n).collect();
        let ids: Vec<&str> = self.pending.iter().map(|p| p.0.as_str()).collect();
        let answered: Vec<bool> = self.pending.iter().map(|p| p.1).collect();
        let replies: Vec<&str> = self.pending.iter().map(|p| p.2.as_str()).collect();
        let client = self.claim.store.client().await?;
        let written = client
            .execute(
                "WITH fence AS (
                     SELECT id FROM prose_runs
                      WHERE id = $1 AND epoch = $2 AND status = 'running'
                      FOR SHARE)
                 INSERT INTO prose_journal (run_id, seq, request_id, answered, epoch, reply)
                 SELECT fence.id, u.seq, u.request_id, u.answered, $2, u.reply::json
                   FROM fence,
                        unnest($3::bigint[], $4::text[], $5::bool[], $6::text[])
                          AS u(seq, request_id, answered, reply)",
                &[
                    &self.claim.run.0,
                    &self.claim.epoch.0,
                    &seqs,
                    &ids,
                    &answered,
                    &replies,
                ],
            )
            .await
            .map_err(|e| match e.as_db_error() {
                Some(db) if db.code() == &tokio_postgres::error::SqlState::UNIQUE_VIOLATION => {
                    PgError::Invalid(format!(
                        "run {}: the journal refuses a second record: {}",
                        self.claim.run,
                        describe(&e)
                    ))
                }
                _ => PgError::Query(describe(&e)),
            })?;
        if written as i64 != n {
            return Err(self.claim.fenced());
        }
        self.next += n;
        self.pending.clear();
        Ok(())
    }

    /// Writes what is pending; returns how many records the journal holds.
    pub async fn close(&mut self) -> Result<Seal, PgError> {
        self.sync().await?;
        Ok(Seal {
            records: self.next as u64,
            crc: 0,
        })
    }

    /// The claim this journal writes under.
    pub fn claim(&self) -> &Claim {
        &self.claim
    }
}

/// Writes `replies` as the journal rows `0..` of run `run` under `epoch`, in transaction
/// `tx` (a new run's seeded journal, or a journal rewritten whole).
pub(crate) async fn insert_rows(
    tx: &deadpool_postgres::Transaction<'_>,
    run: &str,
    epoch: i64,
    replies: &[&Reply],
) -> Result<(), PgError> {
    for (seq, reply) in replies.iter().enumerate() {
        let text = serde_json::to_string(reply)
            .map_err(|e| PgError::Invalid(format!("cannot encode a reply: {e}")))?;
        tx.execute(
            "INSERT INTO prose_journal (run_id, seq, request_id, answered, epoch, reply)
             VALUES ($1, $2, $3, $4, $5, $6::text::json)",
            &[
                &run,
                &(seq as i64),
                &reply.id.to_string(),
                &reply.outcome.is_ok(),
                &epoch,
                &text,
            ],
        )
        .await
        .map_err(super::query)?;
    }
    Ok(())
}

impl Claim {
    /// Replaces the run's journal by `keep`, fenced; returns how many records it holds.
    pub async fn rewrite_journal(&self, keep: &[&Reply]) -> Result<usize, PgError> {
        let mut client = self.store.client().await?;
        let tx = client.transaction().await.map_err(super::query)?;
        self.fence(&tx).await?;
        tx.execute(
            "DELETE FROM prose_journal WHERE run_id = $1",
            &[&self.run.0],
        )
        .await
        .map_err(super::query)?;
        insert_rows(&tx, &self.run.0, self.epoch.0, keep).await?;
        tx.commit().await.map_err(super::query)?;
        Ok(keep.len())
    }
}

impl JournalSink for PgJournal {
    fn append(&mut self, reply: &Reply) -> Result<(), SinkError> {
        PgJournal::append(self, reply).map_err(|e| SinkError(e.to_string()))
    }

    fn unsynced(&self) -> usize {
        PgJournal::unsynced(self)
    }

    fn sync(&mut self) -> SinkFuture<'_, ()> {
        Box::pin(async move {
            PgJournal::sync(self)
                .await
                .map_err(|e| SinkError(e.to_string()))
        })
    }

    fn close(&mut self) -> SinkFuture<'_, Seal> {
        Box::pin(async move {
            PgJournal::close(self)
                .await
                .map_err(|e| SinkError(e.to_string()))
        })
    }
}
