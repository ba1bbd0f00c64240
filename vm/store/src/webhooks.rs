//! Webhooks kept beside the runs: the URL a run names to be told how it ended (its hook), and
//! every delivery made to it, from the moment it is due until it is accepted or given up. A
//! server posts the deliveries ([`Store::webhooks`](crate::Store::webhooks)); keeping them in
//! the store lets a delivery outlive a restart of the server, and lets it be tried again under
//! the same id, so that a receiver can drop what it already took.
//!
//! Hooks and deliveries belong to their run: a run removed (`prosevm prune`) takes them with
//! it. Each names its owner, the server that delivers it, so servers sharing a store each
//! deliver their own.

use crate::{BoxFuture, StoreError};
use serde::{Deserialize, Serialize};

/// The hook of a run: where its ends are posted, and by whom.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hook {
    /// The URL posted to.
    pub url: String,
    /// The server delivering it (its directory).
    pub owner: String,
}

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    /// Not accepted yet: it is tried again at its next attempt.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Given up: its time ran out, or its URL is no longer allowed.
    Failed,
}

impl DeliveryState {
    /// The state as stores write it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }
}

/// One delivery: a body posted to a hook until it is accepted, each try under the same id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// Its id: the same on every try, so a receiver can drop repeats.
    pub id: String,
    /// The run it tells of.
    pub run: String,
    /// The server delivering it (its directory).
    pub owner: String,
    /// Where it is posted.
    pub url: String,
    /// What it tells (`run.finished`, `run.failed`, `run.waiting`, `run.paused`).
    pub event: String,
    /// The body posted.
    pub payload: serde_json::Value,
    /// When it was made (UTC, RFC 3339).
    pub created: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// Tries begun so far.
    pub attempts: u32,
    /// When it is tried next, while pending (UTC, RFC 3339).
    pub next_attempt: String,
    /// What went wrong with the last try: a status, or why no answer came.
    pub last_error: Option<String>,
    /// When it was accepted or given up.
    pub done: Option<String>,
}

/// Whether `id` has the form of a delivery's id (`dlv_` and 32 hex digits): a delivery's id
/// names a file in the file store.
pub fn is_delivery_id(id: &str) -> bool {
    id.strip_prefix("dlv_")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `delivery` when its id and run are of the forms they must have, else why not.
pub fn checked(delivery: &Delivery) -> Result<&Delivery, StoreError> {
    crate::ids::checked(&delivery.run)?;
    if !is_delivery_id(&delivery.id) {
        return Err(StoreError::Invalid(format!(
            "{:?} is not a delivery id",
            delivery.id.chars().take(80).collect::<String>()
        )));
    }
    Ok(delivery)
}

/// A delivery read back from a store as JSON: refused unless it is one, of the run and id
/// its row names.
pub fn read(id: &str, run: &str, text: &str) -> Result<Delivery, StoreError> {
    let delivery: Delivery = serde_json::from_str(text)
        .map_err(|e| StoreError::Invalid(format!("delivery {id}: {e}")))?;
    checked(&delivery)?;
    if delivery.id != id || delivery.run != run {
        return Err(StoreError::Invalid(format!(
            "delivery {id} of run {run}: its record says it is delivery {:?} of run {:?}",
            delivery.id, delivery.run
        )));
    }
    Ok(delivery)
}

/// A store's hooks and deliveries.
pub trait Webhooks: Send + Sync {
    /// Names `hook` as run `id`'s (replacing any it had).
    fn put_hook<'a>(&'a self, id: &'a str, hook: &'a Hook)
        -> BoxFuture<'a, Result<(), StoreError>>;

    /// The hook of run `id`, if it has one.
    fn hook<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Hook>, StoreError>>;

    /// The hooks of `owner` whose runs may still end again (not settled), by run id.
    fn unsettled<'a>(
        &'a self,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, Hook)>, StoreError>>;

    /// Notes that run `id` will not end again (it finished): its hook needs no more looking
    /// at.
    fn settle<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Keeps `delivery` if none of its id is kept yet; whether it was.
    fn add<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Replaces the kept delivery of `delivery`'s id by it (a try begun or its outcome).
    fn update<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The pending deliveries of `owner`, oldest first.
    fn pending<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<Delivery>, StoreError>>;

    /// The deliveries of run `id`, oldest first.
    fn of_run<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<Delivery>, StoreError>>;
}
