//! What a run asked and was answered, rebuilt from its journal: the journal holds only
//! replies, and the machine is deterministic, so replaying the replies through a fresh
//! machine asks every question again, exactly as the run asked it (prompt, context, system
//! prompt), without a driver. Each session comes with the steps of its agent loop.

use bytecode_spec::verify::Verified;
use prose_machine::protocol::{Ask, Reply, Request, RequestId, Step};
use prose_machine::Reached;
use prose_runtime::record::{new_machine, RunRecord};
use std::collections::HashMap;
use std::sync::Arc;

/// One request of a run, with its reply and (for a session run as an agent loop) the
/// journaled steps: turns that called tools, tool outputs, permission answers, in order.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The request, as the machine asked it.
    pub request: Request,
    /// Its reply, if the run has one.
    pub reply: Option<Reply>,
    /// The steps of its agent loop, in the order they happened.
    pub steps: Vec<Reply>,
}

/// Every request `record`'s run asked, in the order the machine asked them, rebuilt by
/// replaying `replies` (its journal) through `artifact`. Requests still waiting when the
/// journal ends come last, without a reply.
pub fn exchanges(
    record: &RunRecord,
    artifact: &Arc<Verified>,
    replies: Vec<Reply>,
) -> Result<Vec<Exchange>, String> {
    exchanges_where(record, artifact, replies, |_, _| true)
}

/// Like [`exchanges`], using only the replies `accept` takes for the request asked: a
/// request whose reply is refused stays unanswered, and so does what depends on it.
pub fn exchanges_where(
    record: &RunRecord,
    artifact: &Arc<Verified>,
    replies: Vec<Reply>,
    accept: impl Fn(&Request, &Reply) -> bool,
) -> Result<Vec<Exchange>, String> {
    let mut machine =
        new_machine(artifact, &record.inputs, &record.options).map_err(|e| e.to_string())?;
    for h in &record.agents {
        if let Some(memory) = &h.memory {
            machine.preload_memory(&h.name, memory.clone());
        }
    }
    let mut whole: HashMap<RequestId, Reply> = HashMap::new();
    let mut steps: HashMap<RequestId, Vec<Reply>> = HashMap::new();
    for r in replies {
        if r.id.step == Step::Whole {
            whole.insert(r.id.clone(), r);
        } else {
            steps.entry(r.id.whole()).or_default().push(r);
        }
    }
    let mut out = Vec::new();
    let mut waiting: Vec<Request> = Vec::new();
    while let Reached::Waiting {
        requests,
        withdrawn,
    } = machine.run()
    {
        waiting.retain(|r| !withdrawn.contains(&r.id));
        waiting.extend(requests);
        let answerable = |r: &Request| whole.get(&r.id).is_some_and(|reply| accept(r, reply));
        let ready: Vec<Request> = waiting.iter().filter(|r| answerable(r)).cloned().collect();
        if ready.is_empty() {
            break;
        }
        waiting.retain(|r| !answerable(r));
        for request in ready {
            let reply = whole.remove(&request.id);
            let mut session_steps = steps.remove(&request.id).unwrap_or_default();
            session_steps.sort_by_key(|r| chronological(r.id.step));
            if let Some(reply) = &reply {
                machine.complete(reply.clone());
            }
            out.push(Exchange {
                request,
                reply,
                steps: session_steps,
            });
        }
    }
    for request in waiting {
        let mut session_steps = steps.remove(&request.id).unwrap_or_default();
        session_steps.sort_by_key(|r| chronological(r.id.step));
        out.push(Exchange {
            request,
            reply: None,
            steps: session_steps,
        });
    }
    Ok(out)
}

/// A session's steps in the order they happen: turn N, then for each of its calls the
/// approval given from outside while the run waited for it, the permission asked for it and
/// its output.
fn chronological(step: Step) -> (u32, u32, u32) {
    match step {
        Step::Whole => (0, 0, 0),
        Step::Turn(t) => (t, 0, 0),
        Step::Approval { turn, call } => (turn, 1, call * 3),
        Step::Grant { turn, call } => (turn, 1, call * 3 + 1),
        Step::Call { turn, call } => (turn, 1, call * 3 + 2),
    }
}

/// The session asks among `exchanges`.
pub fn sessions(exchanges: &[Exchange]) -> impl Iterator<Item = &Exchange> {
    exchanges
        .iter()
        .filter(|e| matches!(e.request.ask, Ask::Session(_)))
}
