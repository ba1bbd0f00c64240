//! Webhooks: a run (or a schedule, for each run it starts) may name a URL that is posted to
//! when the run finishes, fails, starts to wait for a person, or pauses at its budget. Only
//! the server decides where it posts: a URL must be under one of its `--webhook-allow`
//! entries ([`allow`]), checked when a client names it and again before every try. Each
//! delivery is signed with the server's secret ([`sign`]) and kept in the store, tried until
//! the receiver answers 2xx or its time (`--webhook-retry-for`) runs out ([`courier`]).

pub mod allow;
pub mod courier;
pub mod sign;

use prose_store::webhooks::Delivery;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use utoipa::ToSchema;

/// How a server posts webhooks.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The URLs runs may name.
    pub allow: Vec<allow::Allowed>,
    /// What deliveries are signed with.
    pub secret: sign::Secret,
    /// How long after its run's end a delivery is tried before it is given up.
    pub retry_for: Duration,
}

/// A delivery as the API shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryBody {
    /// Its id: the `webhook-id` header of every try.
    pub id: String,
    /// Where it is posted.
    pub url: String,
    /// What it tells: `run.finished`, `run.failed`, `run.waiting` or `run.paused`.
    pub event: String,
    /// `pending` (tried again at `next_attempt`), `delivered` (answered 2xx) or `failed`
    /// (given up).
    pub state: String,
    /// Tries made.
    pub attempts: u32,
    /// When it was made (UTC, RFC 3339).
    pub created: String,
    /// When it is tried next, while pending.
    pub next_attempt: Option<String>,
    /// What went wrong with the last try.
    pub last_error: Option<String>,
    /// When it was accepted, or given up.
    pub done: Option<String>,
    /// The body posted.
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
}

impl From<Delivery> for DeliveryBody {
    fn from(d: Delivery) -> DeliveryBody {
        let pending = d.state == prose_store::webhooks::DeliveryState::Pending;
        DeliveryBody {
            id: d.id,
            url: d.url,
            event: d.event,
            state: d.state.as_str().to_string(),
            attempts: d.attempts,
            created: d.created,
            next_attempt: pending.then_some(d.next_attempt),
            last_error: d.last_error,
            done: d.done,
            payload: d.payload,
        }
    }
}

/// The deliveries of a run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryList {
    /// The URL its ends are posted to, if it names one.
    pub webhook: Option<String>,
    /// Its deliveries, oldest first.
    pub deliveries: Vec<DeliveryBody>,
}
