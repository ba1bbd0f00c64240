//! The stores' journals as the runner writes them: each is a [`JournalSink`], so one run
//! lifecycle drives every store.

use super::journal::Journal;
use super::pg::journal::PgJournal;
use prose_machine::protocol::Reply;
use prose_runtime::record::Seal;
use prose_runtime::runner::journal::{JournalSink, SinkError, SinkFuture};

fn sink_error(e: impl std::fmt::Display) -> SinkError {
    SinkError(e.to_string())
}

/// The journal file of run `run`, whose errors name the run.
pub struct FileSink {
    /// The journal.
    pub journal: Journal,
    /// The run's id.
    pub run: String,
}

impl FileSink {
    fn error(&self, e: impl std::fmt::Display) -> SinkError {
        SinkError(format!("run {}: {e}", self.run))
    }
}

impl JournalSink for FileSink {
    fn append(&mut self, reply: &Reply) -> Result<(), SinkError> {
        self.journal.append(reply).map_err(|e| self.error(e))
    }

    fn unsynced(&self) -> usize {
        self.journal.unsynced()
    }

    fn sync(&mut self) -> SinkFuture<'_, ()> {
        let done = self.journal.sync().map_err(|e| self.error(e));
        Box::pin(async move { done })
    }

    fn close(&mut self) -> SinkFuture<'_, Seal> {
        let done = self.journal.close().map_err(|e| self.error(e));
        Box::pin(async move { done })
    }
}

impl JournalSink for PgJournal {
    fn append(&mut self, reply: &Reply) -> Result<(), SinkError> {
        PgJournal::append(self, reply).map_err(sink_error)
    }

    fn unsynced(&self) -> usize {
        PgJournal::unsynced(self)
    }

    fn sync(&mut self) -> SinkFuture<'_, ()> {
        Box::pin(async move { PgJournal::sync(self).await.map_err(sink_error) })
    }

    fn close(&mut self) -> SinkFuture<'_, Seal> {
        Box::pin(async move { PgJournal::close(self).await.map_err(sink_error) })
    }
}
