//! The async runner: serves the machine's requests with a driver, concurrently up to a
//! limit, retries failed sessions with their backoff, withdraws requests of cancelled
//! fibers, and feeds answers back.

mod budget;
pub mod journal;
pub mod program_skill;
mod retry;
mod session;
mod stop;
mod structured;

pub use budget::Budget;
pub use stop::StopSignal;

use crate::approvals::WaitingApproval;
use crate::driver::{serve, Driver, Live, Served};
use crate::observe::Observer;
use bytecode_spec::Backoff;
use bytecode_spec::Code;
use journal::{JournalSink, Replies};
use prose_agent::people::People;
use prose_agent::workshop::Workshop;
use prose_machine::protocol::{
    Answer, Ask, Failure, Party, Reply, Request, RequestId, Step, Usage,
};
use prose_machine::trace::Event;
use prose_machine::value::Value;
use prose_machine::{Machine, Reached, RuntimeError};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::{AbortHandle, JoinSet};

/// Requests an instant driver answers before the machine runs again.
const IMMEDIATE_CHUNK: usize = 256;

/// Requests the runner keeps asked ahead of the driver: the machine runs ready fibers until
/// the queue holds this many, and the rest wait as fibers (a fan-out of a million holds a
/// few thousand requests at a time, not a million).
const REQUESTS_AHEAD: usize = 4096;

/// How the runner serves requests.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Requests in flight at once.
    pub max_concurrency: usize,
    /// The unit of backoff delays (linear: n units before attempt n+1; exponential: 2^(n-1)).
    pub backoff_unit: Duration,
    /// Asked to stop the run (it ends with [`Code::E216`], interrupted and resumable).
    pub stop: StopSignal,
    /// The run's token and cost budget (it pauses with [`Code::E217`] before going over).
    pub budget: Budget,
    /// Places in flight shared with other runs (a server's): each request sent holds one
    /// besides counting against `max_concurrency`. Inputs for people need none.
    pub shared: Option<Arc<Semaphore>>,
}

impl Default for RunConfig {
    fn default() -> RunConfig {
        RunConfig {
            max_concurrency: 8,
            backoff_unit: Duration::from_secs(1),
            stop: StopSignal::default(),
            budget: Budget::default(),
            shared: None,
        }
    }
}

fn retries(req: &Request) -> (u32, Backoff) {
    match &req.ask {
        Ask::Session(s) => (s.retry, s.backoff),
        _ => (0, Backoff::None),
    }
}

/// Serves one request with its retry policy; returns the reply (with the tokens of every
/// attempt) and the retry events, then a usage event (latency over all attempts, tokens when
/// the driver reports them). `failed` is a first attempt already made (by
/// [`Driver::answer_now`]).
async fn serve_with_retry<D: Driver>(
    driver: Arc<D>,
    req: Request,
    cfg: RunConfig,
    mut failed: Option<Reply>,
    outbox: session::Outbox,
) -> (Reply, Vec<Event>) {
    let (retry, policy) = retries(&req);
    let mut attempts = retry::Attempts::new(retry, policy, cfg.backoff_unit);
    let mut events = Vec::new();
    let started = std::time::Instant::now();
    let mut tokens: Option<Usage> = None;
    let live = outbox.live(&req.id, &req.site);
    loop {
        let mut reply = match failed.take() {
            Some(r) => r,
            None => match serve_within(&*driver, &req, &cfg, &live).await {
                Some(r) => r,
                // Over budget: nothing was sent, and the run is pausing.
                None => {
                    return (
                        Reply::failed(req.id.clone(), req.kind(), budget::PAUSED),
                        events,
                    )
                }
            },
        };
        if let Some(u) = reply.usage {
            *tokens.get_or_insert_with(Usage::default) += u;
        }
        if let Err(Failure(e)) = &reply.outcome {
            if let Some(again) = attempts.after_failure(&req.id, e.clone()) {
                events.push(again.event);
                tokio::time::sleep(again.delay).await;
                continue;
            }
        }
        reply.usage = tokens;
        events.push(Event::usage(
            &req.id,
            started.elapsed().as_millis() as u64,
            live.first_token_ms(),
            tokens,
        ));
        return (reply, events);
    }
}

/// Serves `req` once within the run's budget (reporting a streamed answer to `live`): its
/// worst case is reserved first, and what it used counted after. A request that might not
/// fit is not sent: the run is stopped (it pauses) and nothing comes back.
pub(crate) async fn serve_within<D: Driver>(
    driver: &D,
    req: &Request,
    cfg: &RunConfig,
    live: &Live,
) -> Option<Reply> {
    let reservation = match driver.worst_case(req) {
        Some(worst) => match cfg.budget.reserve(worst) {
            Ok(r) => Some(r),
            Err(_) => {
                cfg.stop.ask();
                return None;
            }
        },
        None => None,
    };
    let reply = serve(driver, req, live).await;
    if let Some(r) = reservation {
        r.settle(reply.usage);
    }
    Some(reply)
}

/// What makes a run durable: the journal new answers go to, and the answers of an earlier
/// attempt, replayed instead of asking the driver again.
pub struct Durable {
    /// Where answers are appended: the journal of the store keeping the run.
    pub journal: Box<dyn JournalSink>,
    /// Answers already journaled, by request id.
    pub replay: Replies,
    /// The driver has no side effects (the mock): answers may be consumed before they are
    /// synced, with syncs batched. Otherwise every answer is durable before it is consumed.
    pub batch: bool,
    /// The tool calls waiting for a person's approval: those the run waited for when it
    /// last stopped (from its record) as it starts; as it ends, those it waits for now (a
    /// call that ran or was refused leaves the list, one that waits joins it).
    pub approvals: Vec<WaitingApproval>,
}

/// Answers journaled between syncs when batching.
const SYNC_BATCH: usize = 4096;

fn journal_error(e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::unlocated(Code::E214, format!("cannot write the journal: {e}"))
}

/// What a session's agent loop, running as a task, asks of the runner.
pub(crate) enum Note {
    /// Journal this step and say when it is durable.
    Record(Reply, oneshot::Sender<Result<(), String>>),
    /// Show this trace event.
    Event(Event),
}

/// What a task serving a request came back with.
enum Done {
    /// The request's reply, and the events serving it made.
    Replied(Reply, Vec<Event>),
    /// A mid-program input no one can give now.
    Unanswered(Request),
    /// A session stopped at a tool call that waits for a person's approval.
    Approval(RequestId, Box<WaitingApproval>),
}

/// A place among the requests in flight shared with other runs, once one is free; never
/// for a run that shares none.
async fn free_place(shared: Option<Arc<Semaphore>>) -> OwnedSemaphorePermit {
    match shared {
        Some(s) => match s.acquire_owned().await {
            Ok(p) => p,
            Err(_) => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// The error ending a run that waits for the inputs `waiting` (their names) and the
/// approvals of tool calls `approvals`.
fn waits_for(waiting: &[(RequestId, String)], approvals: &[WaitingApproval]) -> RuntimeError {
    let mut names: Vec<String> = waiting.iter().map(|(_, n)| format!("`{n}`")).collect();
    names.dedup();
    let mut what = Vec::new();
    match names.len() {
        0 => {}
        1 => what.push(format!("input {}", names[0])),
        _ => what.push(format!("inputs {}", names.join(", "))),
    }
    let calls: Vec<String> = approvals
        .iter()
        .map(|a| format!("{} `{}` ({})", a.tool, a.detail, a.id))
        .collect();
    match calls.len() {
        0 => {}
        1 => what.push(format!("a person's approval of {}", calls[0])),
        _ => what.push(format!("a person's approval of {}", calls.join(", "))),
    }
    RuntimeError::unlocated(
        Code::E220,
        format!(
            "the run waits for {} that no one here can give",
            what.join(" and ")
        ),
    )
}

/// Runs `machine` to the end with `driver` (sessions of a driver that answers turns run as
/// agent loops in the working directory, with the built-in tools and no capabilities
/// allowed); `on_event` sees every trace event.
pub async fn run<D: Driver>(
    machine: Machine,
    driver: Arc<D>,
    cfg: &RunConfig,
    mut on_event: impl FnMut(&Event),
) -> Result<Vec<(String, Value)>, RuntimeError> {
    let workshop = Arc::new(Workshop::new(
        std::path::PathBuf::from("."),
        Default::default(),
        People::Nobody,
    ));
    run_durable(machine, driver, workshop, cfg, None, &mut on_event).await
}

/// Runs `machine` to the end like [`run`], with `workshop` equipping agent loops, journaling
/// answers and replaying journaled ones when `durable` is given; `observer` sees every event
/// and the snapshots it asks for.
pub async fn run_durable<D: Driver>(
    mut machine: Machine,
    driver: Arc<D>,
    workshop: Arc<Workshop>,
    cfg: &RunConfig,
    mut durable: Option<&mut Durable>,
    observer: &mut impl Observer,
) -> Result<Vec<(String, Value)>, RuntimeError> {
    let mut queue: VecDeque<Request> = VecDeque::new();
    let mut tasks: JoinSet<Done> = JoinSet::new();
    // Inputs no one could give, set aside while the rest of the run goes on; once nothing
    // else can, the run stops, waiting for them.
    let mut waiting: Vec<(RequestId, String)> = Vec::new();
    // Tool calls that came to wait for a person's approval in this drive.
    let mut awaiting: Vec<WaitingApproval> = Vec::new();
    // The calls the run waited for when it last stopped, by session: they wait on.
    let mut pending: FxHashMap<RequestId, std::collections::HashMap<Step, WaitingApproval>> =
        FxHashMap::default();
    if let Some(d) = durable.as_deref() {
        for a in &d.approvals {
            pending
                .entry(a.call.whole())
                .or_default()
                .insert(a.call.step, a.clone());
        }
    }
    // A place shared with other runs, taken while waiting and not used yet.
    let mut spare: Option<OwnedSemaphorePermit> = None;
    let (notes, mut noted) = mpsc::unbounded_channel::<Note>();
    // The journaled steps of agent loops, by session. Maps keyed by request id use a fast
    // hasher: the ids come from the program's own fibers, not from outside.
    let mut steps: FxHashMap<RequestId, Vec<Reply>> = FxHashMap::default();
    if let Some(d) = durable.as_deref_mut() {
        let keys: Vec<RequestId> = d
            .replay
            .keys()
            .filter(|k| k.step != Step::Whole)
            .cloned()
            .collect();
        for k in keys {
            if let Some(r) = d.replay.remove(&k) {
                steps.entry(k.whole()).or_default().push(r);
            }
        }
    }
    // What the replies replayed from the journal used counts against the budget.
    if let Some(d) = durable.as_deref() {
        for r in d.replay.values().chain(steps.values().flatten()) {
            if let Some(u) = r.usage {
                cfg.budget.spend(u);
            }
        }
    }
    let agentic = driver.runs_turns();
    let hosted = driver.hosts_people();
    let mut inflight: FxHashMap<RequestId, AbortHandle> = FxHashMap::default();
    // Failed first attempts of retrying sessions, answered at once, waiting for their task.
    let mut first_failures: FxHashMap<RequestId, Reply> = FxHashMap::default();
    let limit = cfg.max_concurrency.max(1);
    // Stopped on purpose, or paused by the budget.
    let interrupted = || match cfg.budget.exceeded() {
        Some(why) => RuntimeError::unlocated(Code::E217, why),
        None => RuntimeError::unlocated(Code::E216, "the run was interrupted; it can be resumed"),
    };
    'run: loop {
        if cfg.stop.asked() {
            if let Some(d) = durable.as_deref_mut() {
                d.journal.sync().await.map_err(journal_error)?;
            }
            return Err(interrupted());
        }
        machine.set_request_cap(REQUESTS_AHEAD.saturating_sub(queue.len()));
        let step = machine.run();
        for e in machine.take_events() {
            observer.event(&e);
        }
        let finished = matches!(step, Reached::Finished(_) | Reached::Failed(_));
        if !finished && observer.wants_snapshot(false) {
            observer.snapshot(&machine.snapshot());
        }
        if finished {
            if let Some(d) = durable.as_deref_mut() {
                d.journal.sync().await.map_err(journal_error)?;
            }
        }
        match step {
            Reached::Finished(outputs) => return Ok(outputs),
            Reached::Failed(e) => return Err(e),
            Reached::Waiting {
                requests,
                withdrawn,
            } => {
                for w in withdrawn {
                    if let Some(h) = inflight.remove(&w) {
                        h.abort();
                    }
                    queue.retain(|r| r.id != w);
                    first_failures.remove(&w);
                    waiting.retain(|(id, _)| *id != w);
                    // A withdrawn session's calls need no one's approval any more.
                    awaiting.retain(|a| a.call.whole() != w);
                    if let Some(d) = durable.as_deref_mut() {
                        d.approvals.retain(|a| a.call.whole() != w);
                    }
                }
                let mut replayed = false;
                let mut requests = requests;
                requests.retain_mut(|req| {
                    match durable
                        .as_deref_mut()
                        .and_then(|d| d.replay.remove(&req.id))
                    {
                        // Answered before the interruption: never ask again.
                        Some(reply) => {
                            driver.observe(req, &reply);
                            machine.complete(reply);
                            replayed = true;
                            false
                        }
                        None => {
                            if let (false, Ask::Session(s)) = (agentic, &mut req.ask) {
                                workshop.prepare(s);
                            }
                            true
                        }
                    }
                });
                // The machine's buffer becomes the queue when it is empty (a fan-out of a
                // million asks them all at once): no second buffer of them at the peak.
                if queue.is_empty() {
                    queue = VecDeque::from(requests);
                } else {
                    queue.extend(requests);
                }
                if replayed {
                    continue;
                }
            }
        }
        // Drivers that never wait answer here, in order, without scheduling a task.
        // In chunks: the answered fibers resume while their memory is still in cache.
        let mut answered = Vec::new();
        let mut budget = IMMEDIATE_CHUNK;
        while let Some(req) = queue.front() {
            let agent_loop = agentic && matches!(req.ask, Ask::Session(_));
            let for_people = !hosted && req.kind().party() == Party::Person;
            if first_failures.contains_key(&req.id) || budget == 0 || agent_loop || for_people {
                break;
            }
            budget -= 1;
            let Some(served) = driver.answer_now(req) else {
                break;
            };
            let reply = served.into_reply(req);
            // A session that may retry goes to a task, which starts from this failed
            // attempt: asking again there would make an attempt nobody counts (and use up
            // scripted failures).
            if reply.outcome.is_err() && retries(req).0 > 0 {
                first_failures.insert(req.id.clone(), reply);
                break;
            }
            queue.pop_front();
            if let Err(Failure(e)) = &reply.outcome {
                observer.event(&Event::RequestFailed {
                    id: reply.id.clone(),
                    error: e.clone(),
                });
            }
            answered.push(reply);
        }
        if !answered.is_empty() {
            if let Some(d) = durable.as_deref_mut() {
                for reply in &answered {
                    d.journal.append(reply).map_err(journal_error)?;
                }
                if !d.batch || d.journal.unsynced() >= SYNC_BATCH {
                    d.journal.sync().await.map_err(journal_error)?;
                }
            }
            for reply in answered {
                machine.complete(reply);
            }
            continue;
        }
        // Before a request reaches a driver, everything answered so far is durable.
        if let Some(d) = durable.as_deref_mut() {
            d.journal.sync().await.map_err(journal_error)?;
        }
        // Whether a request waits for a place shared with other runs.
        let mut blocked = false;
        while inflight.len() < limit {
            let Some(front) = queue.front() else { break };
            let for_people = !hosted && matches!(front.ask, Ask::Input(_));
            let place = match (&cfg.shared, for_people) {
                (Some(shared), false) => {
                    match spare
                        .take()
                        .or_else(|| shared.clone().try_acquire_owned().ok())
                    {
                        Some(p) => Some(p),
                        None => {
                            blocked = true;
                            break;
                        }
                    }
                }
                _ => None,
            };
            let Some(req) = queue.pop_front() else { break };
            let id = req.id.clone();
            let handle = if let (Ask::Input(ask), false) = (&req.ask, hosted) {
                // Inputs are for people, never the model: the terminal, or no one (and the
                // run waits for an answer from outside).
                let people = workshop.people.clone();
                let ask = ask.clone();
                tasks.spawn(async move {
                    match people.input(&ask).await {
                        Some(v) => Done::Replied(
                            Served::from(Ok::<_, Failure>(Answer::Input(v))).into_reply(&req),
                            Vec::new(),
                        ),
                        None => Done::Unanswered(req),
                    }
                })
            } else if agentic && matches!(req.ask, Ask::Session(_)) {
                let approvals = session::Approvals {
                    may_wait: durable.is_some(),
                    limit: workshop.approval_timeout,
                    pending: pending.remove(&id).unwrap_or_default(),
                };
                let run = session::run(
                    driver.clone(),
                    req,
                    workshop.clone(),
                    steps.remove(&id).unwrap_or_default(),
                    session::Outbox::new(notes.clone()),
                    cfg.clone(),
                    approvals,
                );
                let session = id.clone();
                tasks.spawn(async move {
                    let _place = place;
                    match run.await {
                        session::SessionEnd::Replied(reply) => Done::Replied(reply, Vec::new()),
                        session::SessionEnd::Waits(w) => Done::Approval(session, w),
                    }
                })
            } else {
                let failed = first_failures.remove(&id);
                let served = serve_with_retry(
                    driver.clone(),
                    req,
                    cfg.clone(),
                    failed,
                    session::Outbox::new(notes.clone()),
                );
                tasks.spawn(async move {
                    let _place = place;
                    let (reply, events) = served.await;
                    Done::Replied(reply, events)
                })
            };
            inflight.insert(id, handle);
        }
        // Fibers left ready at the request cap ask theirs once the queue runs short.
        if queue.len() < limit && machine.has_ready() && !blocked {
            continue;
        }
        if inflight.is_empty() && queue.is_empty() && !(waiting.is_empty() && awaiting.is_empty()) {
            // Nothing else can go on: what was answered is durable, and the run waits.
            if let Some(d) = durable.as_deref_mut() {
                d.journal.sync().await.map_err(journal_error)?;
            }
            return Err(waits_for(&waiting, &awaiting));
        }
        if observer.wants_snapshot(true) {
            observer.snapshot(&machine.snapshot());
        }
        // Agent loops' steps are journaled (and their events shown) while tasks run.
        let joined = loop {
            tokio::select! {
                biased;
                () = cfg.stop.wait() => {
                    // In-flight requests are withdrawn (their tasks dropped, their processes
                    // killed); what was answered is durable.
                    tasks.shutdown().await;
                    if let Some(d) = durable.as_deref_mut() {
                        d.journal.sync().await.map_err(journal_error)?;
                    }
                    return Err(interrupted());
                }
                Some(note) = noted.recv() => match note {
                    Note::Event(e) => observer.event(&e),
                    Note::Record(reply, done) => {
                        let written = match durable.as_deref_mut() {
                            Some(d) => match d.journal.append(&reply) {
                                Ok(()) => {
                                    // A call's output: it waits for no one now.
                                    d.approvals.retain(|a| a.call != reply.id);
                                    d.journal.sync().await.map_err(|e| e.to_string())
                                }
                                Err(e) => Err(e.to_string()),
                            },
                            None => Ok(()),
                        };
                        let _ = done.send(written);
                    }
                },
                place = free_place(cfg.shared.clone()), if blocked => {
                    // A place came free: the request waiting for it is sent.
                    spare = Some(place);
                    continue 'run;
                }
                joined = tasks.join_next(), if !blocked || !tasks.is_empty() => break joined,
            }
        };
        // Every task that has finished by now is taken with this one, and their answers
        // are made durable with one sync (a group commit: with 48 requests in flight the
        // answers come in bunches, and a sync each made the journal the bottleneck).
        let mut finished = vec![joined];
        while let Some(more) = tasks.try_join_next() {
            finished.push(Some(more));
        }
        let mut replied = Vec::new();
        for joined in finished {
            match joined {
                Some(Ok(Done::Unanswered(req))) => {
                    inflight.remove(&req.id);
                    if let Ask::Input(ask) = &req.ask {
                        observer.event(&Event::Waiting {
                            id: req.id.clone(),
                            name: ask.name.clone(),
                            question: ask.question.clone(),
                        });
                        waiting.push((req.id.clone(), ask.name.clone()));
                    }
                }
                Some(Ok(Done::Approval(session, w))) => {
                    inflight.remove(&session);
                    observer.event(&Event::Approval {
                        id: w.call.clone(),
                        approval: w.id.to_string(),
                        agent: w.agent.clone(),
                        tool: w.tool.clone(),
                        detail: w.detail.clone(),
                        expires: w.expires.clone(),
                    });
                    if let Some(d) = durable.as_deref_mut() {
                        d.approvals.retain(|a| a.call != w.call);
                        d.approvals.push((*w).clone());
                    }
                    awaiting.push(*w);
                }
                Some(Ok(Done::Replied(reply, events))) => {
                    inflight.remove(&reply.id);
                    for e in &events {
                        observer.event(e);
                    }
                    if let Err(Failure(e)) = &reply.outcome {
                        observer.event(&Event::RequestFailed {
                            id: reply.id.clone(),
                            error: e.clone(),
                        });
                    }
                    if let Some(d) = durable.as_deref_mut() {
                        d.journal.append(&reply).map_err(journal_error)?;
                    }
                    replied.push(reply);
                }
                Some(Err(e)) if e.is_cancelled() => {}
                Some(Err(e)) => {
                    return Err(RuntimeError::unlocated(
                        Code::E215,
                        format!("a driver task failed: {e}"),
                    ))
                }
                None => {
                    if queue.is_empty() {
                        return Err(RuntimeError::unlocated(
                            Code::E215,
                            "the run waits for answers nobody was asked for",
                        ));
                    }
                }
            }
        }
        if !replied.is_empty() {
            if let Some(d) = durable.as_deref_mut() {
                d.journal.sync().await.map_err(journal_error)?;
            }
            for reply in replied {
                machine.complete(reply);
            }
        }
    }
}
