//! The stdio driver: the VM writes each request as one JSON line on stdout and reads each
//! reply as one JSON line on stdin, so an agent host runs a precompiled workflow and does the
//! sessions itself. Replies may come in any order; a request the run no longer needs (a
//! branch cancelled by a join) is announced with a `cancel` line. The protocol is described
//! in `docs/stdio-protocol.md`; its version is [`PROTOCOL_VERSION`].

use super::{Driver, Live, Served};
use prose_machine::protocol::{Reply, Request, RequestId};
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// The protocol's version, sent in the `hello` line.
pub const PROTOCOL_VERSION: u32 = 2;

/// What the reader and the requests share.
#[derive(Default)]
struct Exchange {
    /// Requests written and not yet answered, by id.
    waiting: HashMap<RequestId, oneshot::Sender<Result<Reply, String>>>,
    /// Replies read before their request was written (a host replaying a transcript).
    early: HashMap<RequestId, Reply>,
    /// stdin has ended.
    closed: bool,
}

type Pending = Arc<Mutex<Exchange>>;

/// Talks to the host on stdin and stdout.
pub struct StdioDriver {
    pending: Pending,
    timeout: Duration,
    turns: bool,
}

/// Writes one protocol line on stdout.
pub fn send(line: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

impl StdioDriver {
    /// Says hello on stdout and starts reading replies from stdin; each request may take
    /// `timeout`. With `turns`, the host answers model turns rather than whole sessions.
    pub fn start(timeout: Duration, turns: bool) -> StdioDriver {
        let mut hello = json!({
            "type": "hello",
            "protocol": "prose-stdio",
            "version": PROTOCOL_VERSION,
        });
        if turns {
            hello["turns"] = true.into();
        }
        send(&hello);
        let pending: Pending = Arc::default();
        let reader = pending.clone();
        std::thread::spawn(move || read_replies(std::io::stdin().lock(), &reader));
        StdioDriver {
            pending,
            timeout,
            turns,
        }
    }

    /// Sends `req` and waits for its reply.
    async fn ask(&self, req: &Request) -> Served {
        let (tx, rx) = oneshot::channel();
        let mut line = json!({"type": "request"});
        if let (Some(obj), Ok(serde_json::Value::Object(fields))) =
            (line.as_object_mut(), serde_json::to_value(req))
        {
            obj.extend(fields);
        }
        {
            let Ok(mut ex) = self.pending.lock() else {
                return closed();
            };
            send(&line);
            if let Some(reply) = ex.early.remove(&req.id) {
                return settle(reply);
            }
            if ex.closed {
                return closed();
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
            Ok(Ok(Ok(r))) => settle(r),
            Ok(Ok(Err(e))) => Served::failed(format!("the host: {e}")),
            Ok(Err(_)) => closed(),
            Err(_) => Served::failed(format!(
                "the host did not answer within {} s",
                self.timeout.as_secs_f64()
            )),
        }
    }
}

/// A reply as what the host made of the request (an `error` reply is its failure).
fn settle(reply: Reply) -> Served {
    Served {
        outcome: reply
            .outcome
            .map_err(|e| prose_machine::protocol::Failure(format!("the host: {e}"))),
        usage: reply.usage,
    }
}

fn closed() -> Served {
    Served::failed("the host closed stdin before answering")
}

/// Sends `cancel` for a request still pending when dropped.
struct CancelOnDrop {
    id: RequestId,
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
        let json = serde_json::from_str::<serde_json::Value>(&line);
        let id: Option<RequestId> = json
            .as_ref()
            .ok()
            .and_then(|j| j.get("id")?.as_str()?.parse().ok());
        let Ok(mut ex) = pending.lock() else { break };
        let reply = match json.map_err(|e| e.to_string()).and_then(Reply::from_json) {
            Ok(r) => r,
            Err(e) => {
                eprintln!(
                    "prosevm: stdin line {}: not a reply ({e}); want {{\"id\": ..., \"kind\": ..., \"answer\" | \"error\": ...}}",
                    n + 1
                );
                // A request waiting for this reply fails now rather than at its timeout.
                if let Some(tx) = id.and_then(|id| ex.waiting.remove(&id)) {
                    let _ = tx.send(Err(format!("its reply on stdin line {}: {e}", n + 1)));
                }
                continue;
            }
        };
        match ex.waiting.remove(&reply.id) {
            Some(tx) => {
                let _ = tx.send(Ok(reply));
            }
            None => {
                ex.early.insert(reply.id.clone(), reply);
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

    async fn answer(&self, req: &Request, _live: &Live) -> Served {
        self.ask(req).await
    }

    /// The host stands for the person: it gives inputs and answers permission prompts.
    fn hosts_people(&self) -> bool {
        true
    }

    fn runs_turns(&self) -> bool {
        self.turns
    }
}
