//! The courier: it makes a delivery each time a run with a hook ends (finishes, fails,
//! starts to wait, or pauses at its budget), keeps it in the store, and posts it until the
//! receiver answers 2xx or the delivery's time runs out, waiting longer after each failed
//! try (1 s, 2 s, 4 s … at most 10 min).
//!
//! Nothing is only in memory. A delivery is kept before its first try, and each try is noted
//! before it is made (with the time of the next): a server killed during a try makes it
//! again at its next start, under the same id. A delivery's id is derived from the end it
//! tells of (the run, its status, its journal's seal, its error and what it waits for), so
//! the same end is never delivered twice under two ids, whoever notices it: the drive that
//! ended, or the next start of the server looking over the hooks of its runs (a run ended by
//! another process, or by a server killed before it made the delivery).

use super::sign::{self, Secret};
use super::Settings;
use chrono::{DateTime, SecondsFormat, Utc};
use prose_runtime::record::{RunRecord, RunStatus};
use prose_store::webhooks::{Delivery, DeliveryState, Hook};
use prose_store::{Store, StoreError};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// The body of delivery `id` telling `event` (at `created`) of the run `record` records.
pub type Payload =
    fn(id: String, event: &str, created: String, record: RunRecord) -> serde_json::Value;

/// The longest a try waits for the receiver's answer.
const TRY_FOR: Duration = Duration::from_secs(10);

/// The longest wait between two tries.
const MAX_WAIT: Duration = Duration::from_secs(600);

/// Tries made at once.
const AT_ONCE: usize = 8;

/// The handle of a server's courier: tell it of each run whose drive ended.
#[derive(Clone)]
pub struct Courier {
    ended: mpsc::UnboundedSender<String>,
    settings: Arc<Settings>,
    owner: String,
}

/// What the courier's task works with.
struct Post {
    store: Arc<dyn Store>,
    settings: Arc<Settings>,
    owner: String,
    payload: Payload,
    client: reqwest::Client,
}

impl Courier {
    /// Starts the courier of the server `owner` (its directory) on the current runtime: it
    /// takes up the deliveries left pending in `store`, looks over the hooks of the server's
    /// runs for ends not yet delivered, then delivers as runs end.
    pub fn start(
        store: Arc<dyn Store>,
        settings: Settings,
        owner: String,
        payload: Payload,
    ) -> Result<(Courier, tokio::task::JoinHandle<()>), String> {
        prose_agent::tls::install_crypto_provider();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TRY_FOR)
            .user_agent(concat!(
                "prosevm/",
                env!("CARGO_PKG_VERSION"),
                " (webhooks)"
            ))
            .build()
            .map_err(|e| format!("cannot set up the webhooks' HTTP client: {e}"))?;
        let settings = Arc::new(settings);
        let (ended, notes) = mpsc::unbounded_channel();
        let post = Arc::new(Post {
            store,
            settings: settings.clone(),
            owner: owner.clone(),
            payload,
            client,
        });
        let task = tokio::spawn(work(post, notes));
        Ok((
            Courier {
                ended,
                settings,
                owner,
            },
            task,
        ))
    }

    /// The hook of a run naming `url`, when the server's list allows it; else why not.
    pub fn hook(&self, url: &str) -> Result<Hook, String> {
        Ok(Hook {
            url: super::allow::admit(&self.settings.allow, url)?,
            owner: self.owner.clone(),
        })
    }

    /// Where the conductor says that a drive of a run ended.
    pub fn ended(&self) -> mpsc::UnboundedSender<String> {
        self.ended.clone()
    }
}

/// A time as deliveries record it.
fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A recorded time, read (a time that does not read is taken for now).
fn read_time(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|_| Utc::now())
}

/// The wait after try number `tries` failed: 1 s, then twice as long each time, at most
/// [`MAX_WAIT`].
fn wait_after(tries: u32) -> Duration {
    Duration::from_secs(1u64 << tries.saturating_sub(1).min(20)).min(MAX_WAIT)
}

/// The event of a delivery telling that a run stands at `status`; none for a status no
/// delivery tells of (running, or interrupted: stopped by the server or a client, to go on).
fn event_of(status: RunStatus) -> Option<&'static str> {
    match status {
        RunStatus::Finished => Some("run.finished"),
        RunStatus::Failed => Some("run.failed"),
        RunStatus::Waiting => Some("run.waiting"),
        RunStatus::Paused => Some("run.paused"),
        RunStatus::Running | RunStatus::Interrupted => None,
    }
}

/// The id of the delivery telling of the end `record` records: the same for the same end.
fn delivery_id(record: &RunRecord) -> String {
    let mut h = Sha256::new();
    for part in [record.id.as_str(), record.status.as_str()] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.update(record.journal.records.to_le_bytes());
    h.update(record.journal.crc.to_le_bytes());
    if let Some(e) = &record.error {
        h.update(e.code.as_bytes());
        h.update([0]);
        h.update(e.message.as_bytes());
    }
    h.update([0]);
    for w in &record.waiting {
        h.update(w.name.as_bytes());
        h.update([0]);
    }
    h.update((record.inputs.len() as u64).to_le_bytes());
    let hex: String = h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("dlv_{hex}")
}

impl Post {
    /// Makes the delivery of how run `id` stands now, if it has a hook of this server and
    /// stands where a delivery tells of it; returns it if it is new. A finished run's hook
    /// is settled: it will not end again.
    async fn note(&self, id: &str) -> Result<Option<Delivery>, StoreError> {
        let webhooks = self.store.webhooks();
        let Some(Hook { url, owner }) = webhooks.hook(id).await? else {
            return Ok(None);
        };
        if owner != self.owner {
            return Ok(None);
        }
        let (_, record) = self.store.record(id).await?;
        let status = record.status;
        let Some(event) = event_of(status) else {
            return Ok(None);
        };
        let now = stamp(Utc::now());
        let delivery_id = delivery_id(&record);
        let payload = (self.payload)(delivery_id.clone(), event, now.clone(), record);
        let delivery = Delivery {
            id: delivery_id,
            run: id.to_string(),
            owner,
            url,
            event: event.to_string(),
            payload,
            created: now.clone(),
            state: DeliveryState::Pending,
            attempts: 0,
            next_attempt: now,
            last_error: None,
            done: None,
        };
        let added = webhooks.add(&delivery).await?;
        if status == RunStatus::Finished {
            webhooks.settle(id).await?;
        }
        Ok(added.then_some(delivery))
    }

    /// Tries `d` once (noting the try first), and records how it went; returns it as it
    /// stands after.
    async fn attempt(&self, mut d: Delivery) -> Delivery {
        let now = Utc::now();
        let deadline = read_time(&d.created)
            + chrono::Duration::from_std(self.settings.retry_for).unwrap_or(chrono::Duration::MAX);
        let refused = if now > deadline {
            Some("its time ran out before it was accepted".to_string())
        } else {
            super::allow::admit(&self.settings.allow, &d.url)
                .err()
                .map(|e| format!("not posted: {e}"))
        };
        if let Some(why) = refused {
            d.state = DeliveryState::Failed;
            d.last_error = Some(why);
            d.done = Some(stamp(now));
            self.keep(&d).await;
            given_up(&d);
            return d;
        }
        d.attempts += 1;
        let next = now + chrono::Duration::from_std(wait_after(d.attempts)).unwrap_or_default();
        d.next_attempt = stamp(next);
        // Noted before it is made: a server killed during the try makes it again.
        self.keep(&d).await;
        let outcome = post(&self.client, &self.settings.secret, &d).await;
        let done = Utc::now();
        match outcome {
            Ok(()) => {
                d.state = DeliveryState::Delivered;
                d.last_error = None;
                d.done = Some(stamp(done));
            }
            Err(why) => {
                d.last_error = Some(why);
                if next > deadline {
                    d.state = DeliveryState::Failed;
                    d.done = Some(stamp(done));
                }
            }
        }
        self.keep(&d).await;
        if d.state == DeliveryState::Failed {
            given_up(&d);
        }
        d
    }

    /// Records `d` in the store (a store that cannot be written is said: the try goes on).
    async fn keep(&self, d: &Delivery) {
        if let Err(e) = self.store.webhooks().update(d).await {
            eprintln!(
                "prosevm serve: cannot record webhook delivery {} of run {}: {e}",
                d.id, d.run
            );
        }
    }
}

/// Says that delivery `d` was given up, and why.
fn given_up(d: &Delivery) {
    eprintln!(
        "prosevm serve: gave up webhook delivery {} of run {} to {}: {}",
        d.id,
        d.run,
        d.url,
        d.last_error.as_deref().unwrap_or("")
    );
}

/// Posts `d`'s body to its URL, signed; `Ok` once the receiver answers 2xx.
async fn post(client: &reqwest::Client, secret: &Secret, d: &Delivery) -> Result<(), String> {
    let body = serde_json::to_vec(&d.payload).map_err(|e| format!("its body: {e}"))?;
    let timestamp = Utc::now().timestamp();
    let answer = client
        .post(&d.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(sign::ID, &d.id)
        .header(sign::TIMESTAMP, timestamp.to_string())
        .header(sign::SIGNATURE, secret.sign(&d.id, timestamp, &body))
        .body(body)
        .send()
        .await
        .map_err(|e| format!("no answer: {e}"))?;
    let status = answer.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the receiver answered {status}"))
    }
}

/// The courier's task: deliveries due, by when, tried as they come due.
/// Deliveries waiting for their next try, by its time.
type Due = BTreeMap<(DateTime<Utc>, String), Delivery>;

/// Puts `d` among the deliveries waiting for their next try.
fn queue(d: Delivery, due: &mut Due) {
    due.insert((read_time(&d.next_attempt), d.id.clone()), d);
}

async fn work(post: Arc<Post>, mut notes: mpsc::UnboundedReceiver<String>) {
    let mut due = Due::new();
    match post.store.webhooks().pending(&post.owner).await {
        Ok(pending) => {
            for d in pending {
                queue(d, &mut due);
            }
        }
        Err(e) => eprintln!("prosevm serve: cannot read the pending webhook deliveries: {e}"),
    }
    match post.store.webhooks().unsettled(&post.owner).await {
        Ok(hooks) => {
            for (id, _) in hooks {
                match post.note(&id).await {
                    Ok(Some(d)) => queue(d, &mut due),
                    Ok(None) => {}
                    Err(e) => eprintln!("prosevm serve: run {id}: its webhook: {e}"),
                }
            }
        }
        Err(e) => eprintln!("prosevm serve: cannot read the webhooks of the runs: {e}"),
    }
    let mut trying: JoinSet<Delivery> = JoinSet::new();
    loop {
        let next = due.keys().next().map(|(t, _)| *t);
        let wait = match next {
            Some(t) if trying.len() < AT_ONCE => (t - Utc::now()).to_std().unwrap_or_default(),
            // Nothing due, or as many tries going as are made at once: wait for a note or
            // a try to end.
            _ => Duration::from_secs(3600),
        };
        tokio::select! {
            note = notes.recv() => match note {
                None => break,
                Some(id) => match post.note(&id).await {
                    Ok(Some(d)) => queue(d, &mut due),
                    Ok(None) => {}
                    Err(e) => eprintln!("prosevm serve: run {id}: its webhook: {e}"),
                },
            },
            Some(tried) = trying.join_next(), if !trying.is_empty() => {
                if let Ok(d) = tried {
                    if d.state == DeliveryState::Pending {
                        queue(d, &mut due);
                    }
                }
            }
            _ = tokio::time::sleep(wait) => {
                let now = Utc::now();
                while trying.len() < AT_ONCE {
                    let Some(entry) = due.first_entry() else { break };
                    if entry.key().0 > now {
                        break;
                    }
                    let d = entry.remove();
                    let post = post.clone();
                    trying.spawn(async move { post.attempt(d).await });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_ten_minutes() {
        let waits: Vec<u64> = (1..=12).map(|n| wait_after(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600]);
        assert_eq!(wait_after(u32::MAX), MAX_WAIT);
    }
}
