//! Where a run's answers are journaled, as the runner sees it: a [`JournalSink`] that a
//! store implements (the file store's `journal.log`, rows in PostgreSQL or SQLite). The
//! runner appends every answer and makes it durable before the machine consumes it, and
//! knows nothing of where it goes.

use crate::record::Seal;
use prose_machine::protocol::{Reply, RequestId};
use std::future::Future;
use std::pin::Pin;

/// The reply to replay for each request, by id: what a resumed run is answered from instead
/// of asking. Looked up once per request, so with a fast hasher (the ids come from the
/// program's own fibers).
pub type Replies = rustc_hash::FxHashMap<RequestId, Reply>;

/// Why the journal could not take an answer (the store's error, in words).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkError(pub String);

impl std::fmt::Display for SinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SinkError {}

/// A boxed future of a sink's work, so the trait stays object safe.
pub type SinkFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, SinkError>> + Send + 'a>>;

/// A run's journal, open for appending.
pub trait JournalSink: Send {
    /// Appends `reply` (durable at the next [`JournalSink::sync`]).
    fn append(&mut self, reply: &Reply) -> Result<(), SinkError>;

    /// Records appended since the last sync.
    fn unsynced(&self) -> usize;

    /// Makes everything appended durable.
    fn sync(&mut self) -> SinkFuture<'_, ()>;

    /// Makes everything durable and says what the journal holds.
    fn close(&mut self) -> SinkFuture<'_, Seal>;
}
