//! The stdio driver: the VM writes each request as one JSON line on stdout and reads each
//! reply as one JSON line on stdin, so an agent host runs a precompiled workflow and does the
//! sessions itself. Replies may come in any order; a request the run no longer needs (a
//! branch cancelled by a join) is announced with a `cancel` line. The protocol is described
//! in `docs/stdio-protocol.md`; its version is [`PROTOCOL_VERSION`].

use super::{Answer, Driver, DriverError, SessionAnswer};
use crate::request::{Reply, Request, SessionRequest};
use crate::store::journal;
use crate::value::Value;
use bytecode_spec::Shape;
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// The protocol's version, sent in the `hello` line.
pub const PROTOCOL_VERSION: u32 = 1;

/// What the reader and the requests share.
#[derive(Default)]
struct Exchange {
    /// Requests written and not yet answered, by id.
    waiting: HashMap<String, oneshot::Sender<Reply>>,
    /// Replies read before their request was written (a host replaying a transcript).
    early: HashMap<String, Reply>,
    /// stdin has ended.
    closed: bool,
}

type Pending = Arc<Mutex<Exchange>>;

/// Talks to the host on stdin and stdout.
pub struct StdioDriver {
    pending: Pending,
    timeout: Duration,
}

/// Writes one protocol line on stdout.
pub fn send(line: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

impl StdioDriver {
    /// Says hello on stdout and starts reading replies from stdin; each request may take
    /// `timeout`.
    pub fn start(timeout: Duration) -> StdioDriver {
        send(&json!({
            "type": "hello",
            "protocol": "prose-stdio",
            "version": PROTOCOL_VERSION,
        }));
        let pending: Pending = Arc::default();
        let reader = pending.clone();
        std::thread::spawn(move || read_replies(std::io::stdin().lock(), &reader));
        StdioDriver { pending, timeout }
    }

    /// Sends `req` and waits for its reply.
    async fn ask(&self, req: &Request) -> Answer<Reply> {
        let (tx, rx) = oneshot::channel();
        let mut line = json!({"type": "request"});
        if let (Some(obj), Ok(serde_json::Value::Object(fields))) =
            (line.as_object_mut(), serde_json::to_value(req))
        {
            obj.extend(fields);
        }
        {
            let mut ex = self.pending.lock().map_err(|_| closed())?;
            send(&line);
            if let Some(reply) = ex.early.remove(&req.id) {
                return settle(reply);
            }
            if ex.closed {
                return Err(closed());
            }
            ex.waiting.insert(req.id.clone(), tx);
        }
        // Dropped before the reply came (a timeout, or the run cancelled the request):
        // tell the host it may stop.
        let guard = CancelOnDrop {
            id: req.id.clone(),
            pending: self.pending.clone(),
        };
        let reply = tokio::time::timeout(self.timeout, rx).await;
        drop(guard);
        match reply {
            Ok(Ok(r)) => settle(r),
            Ok(Err(_)) => Err(closed()),
            Err(_) => Err(DriverError(format!(
                "the host did not answer within {} s",
                self.timeout.as_secs_f64()
            ))),
        }
    }
}

/// A reply as the request's result: a `failed` reply is the request's failure.
fn settle(reply: Reply) -> Answer<Reply> {
    match reply {
        Reply::Failed(e) => Err(DriverError(format!("the host: {e}"))),
        r => Ok(r),
    }
}

fn closed() -> DriverError {
    DriverError("the host closed stdin before answering".into())
}

fn mismatch(reply: &Reply, wanted: &str) -> DriverError {
    let got = match reply {
        Reply::Text(_) | Reply::Remembered { .. } => "text",
        Reply::Bool(_) => "bool",
        Reply::Choice(_) => "choice",
        Reply::Value(_) => "value",
        Reply::Failed(_) => "failed",
    };
    DriverError(format!(
        "the host replied with `{got}` where `{wanted}` was asked"
    ))
}

/// Sends `cancel` for a request still pending when dropped.
struct CancelOnDrop {
    id: String,
    pending: Pending,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let was_pending = self
            .pending
            .lock()
            .ok()
            .and_then(|mut ex| ex.waiting.remove(&self.id))
            .is_some();
        if was_pending {
            send(&json!({"type": "cancel", "id": self.id}));
        }
    }
}

/// Routes each reply line to the request waiting for it (or keeps it for a request not yet
/// written); reports lines it cannot use on stderr. At end of input, every waiting request
/// fails.
fn read_replies(input: impl BufRead, pending: &Pending) {
    for (n, line) in input.lines().enumerate() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let parsed = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|j| journal::decode(&j));
        let Some((id, reply)) = parsed else {
            eprintln!(
                "prosevm: stdin line {}: not a reply (want {{\"id\": ..., \"text\" | \"bool\" | \"choice\" | \"value\" | \"failed\": ...}})",
                n + 1
            );
            continue;
        };
        let Ok(mut ex) = pending.lock() else { break };
        match ex.waiting.remove(&id) {
            Some(tx) => {
                let _ = tx.send(reply);
            }
            None => {
                ex.early.insert(id, reply);
            }
        }
    }
    if let Ok(mut ex) = pending.lock() {
        ex.closed = true;
        ex.waiting.clear(); // dropping the senders fails every waiting request
    }
}

impl Driver for StdioDriver {
    fn name(&self) -> &str {
        "stdio"
    }

    async fn session(&self, req: &Request, _: &SessionRequest) -> Answer<SessionAnswer> {
        match self.ask(req).await? {
            Reply::Text(text) => Ok(text.into()),
            Reply::Remembered { text, memory } => Ok(SessionAnswer {
                text,
                memory: Some(memory),
            }),
            other => Err(mismatch(&other, "text")),
        }
    }

    async fn evaluate(&self, req: &Request, _: &str) -> Answer<bool> {
        match self.ask(req).await? {
            Reply::Bool(b) => Ok(b),
            other => Err(mismatch(&other, "bool")),
        }
    }

    async fn choose(&self, req: &Request, _: &[String]) -> Answer<usize> {
        match self.ask(req).await? {
            Reply::Choice(c) => Ok(c),
            other => Err(mismatch(&other, "choice")),
        }
    }

    async fn input(&self, req: &Request, _: &str) -> Answer<Value> {
        match self.ask(req).await? {
            Reply::Value(v) => Ok(v),
            Reply::Text(t) => Ok(Value::text(t)),
            other => Err(mismatch(&other, "value")),
        }
    }

    async fn convert(&self, req: &Request, _: &str, _: Shape) -> Answer<Value> {
        match self.ask(req).await? {
            Reply::Value(v) => Ok(v),
            other => Err(mismatch(&other, "value")),
        }
    }
}
