//! Where a run's answers are journaled: the file store's journal or the Postgres store's.
//! The runner appends and syncs through this, so one run lifecycle drives both stores.

use super::journal::{Journal, Seal};
use super::pg::journal::PgJournal;
use super::StoreError;
use prose_machine::protocol::Reply;

/// A run's journal, open for appending, in either store.
pub enum Sink {
    /// `journal.log` in the run's directory.
    File(Journal),
    /// Rows in the Postgres store, written under the worker's claim.
    Postgres(Box<PgJournal>),
}

impl From<Journal> for Sink {
    fn from(j: Journal) -> Sink {
        Sink::File(j)
    }
}

impl From<PgJournal> for Sink {
    fn from(j: PgJournal) -> Sink {
        Sink::Postgres(Box::new(j))
    }
}

impl Sink {
    /// Appends `reply` (durable at the next [`Sink::sync`]).
    pub fn append(&mut self, reply: &Reply) -> Result<(), StoreError> {
        match self {
            Sink::File(j) => j
                .append(reply)
                .map_err(|e| StoreError::Invalid(e.to_string())),
            Sink::Postgres(j) => Ok(j.append(reply)?),
        }
    }

    /// Records appended since the last sync.
    pub fn unsynced(&self) -> usize {
        match self {
            Sink::File(j) => j.unsynced(),
            Sink::Postgres(j) => j.unsynced(),
        }
    }

    /// Makes everything appended durable.
    pub async fn sync(&mut self) -> Result<(), StoreError> {
        match self {
            Sink::File(j) => j.sync().map_err(|e| StoreError::Invalid(e.to_string())),
            Sink::Postgres(j) => Ok(j.sync().await?),
        }
    }

    /// Makes everything durable and says what the journal holds.
    pub async fn close(&mut self) -> Result<Seal, StoreError> {
        match self {
            Sink::File(j) => j.close().map_err(|e| StoreError::Invalid(e.to_string())),
            Sink::Postgres(j) => Ok(j.close().await?),
        }
    }
}
