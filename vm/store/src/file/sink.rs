//! The file store's journal as the runner writes it.

use crate::journal::Journal;
use prose_machine::protocol::Reply;
use prose_runtime::record::Seal;
use prose_runtime::runner::journal::{JournalSink, SinkError, SinkFuture};

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
