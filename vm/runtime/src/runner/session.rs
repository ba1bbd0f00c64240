//! A session as an agent loop, run by the VM: the model is asked for a turn (the conversation
//! so far and the tools on offer), each tool call it makes is checked against the agent's
//! permissions and run, its output joins the conversation, and so on until the model answers
//! without calling a tool, or the turn limit is reached (a failure that `retry` and `catch`
//! apply to).
//!
//! Every turn that calls tools, every tool output and every permission answer is journaled
//! (through the runner, the journal's one writer) before the loop goes on, under the
//! session's request id with a step (`#t3`, `#t3c0`, `#t3p0`). A session resumed after a
//! crash replays them: no completed turn is asked again and no completed tool call runs
//! again; a call that was in flight at the crash is run again if it only reads, and
//! otherwise reported to the model as interrupted. Failed turns are journaled too, so the
//! attempts a session's `retry` makes replay the same way.
//!
//! A call that needs a person's permission when no one is at hand, in a durable run, stops
//! the session before anything of the call runs: the session ends waiting for its approval
//! ([`crate::approvals`]), and once that is journaled (`#t3a0`) the resumed session replays
//! its turns, journals the grant (`#t3p0`) and makes the call, the model asked nothing
//! again. Calls after one that was not in the journal never ran before, so they run.

use super::structured::{self, Listing};
use super::Note;
use crate::approvals::{Asking, WaitingApproval};
use crate::driver::live::Piece;
use crate::driver::{render, serve, Driver, Live};
use crate::guards::stuck::Stuck;
use crate::guards::{narrowing, promised, text_calls};
use bytecode_spec::Code;
use futures_util::future::BoxFuture;
use prose_agent::people::{Prompter, Unanswered};
use prose_agent::workshop::{system_prompt, Kit, Workshop};
use prose_machine::protocol::Site;
use prose_machine::protocol::{
    Answer, Ask, Failure, Kind, Message, Reply, Request, RequestId, SessionAnswer, SessionAsk,
    Step, Stop, TurnAnswer, TurnAsk, Usage,
};
use prose_machine::protocol::{
    Capability, PermissionQuestion, PromptAnswer, ToolCall, ToolOutput, ToolSpec,
};
use prose_machine::trace::Event;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// Continuations asked of a reply cut off by the model's output limit before the session
/// fails.
const CONTINUATIONS: u32 = 2;

/// What the VM tells the model when its reply was cut off.
const CONTINUE: &str =
    "Your reply was cut off by the output limit. Continue exactly where it stopped.";

/// What the VM tells a model whose answer ran away into repeating itself (the answer was
/// cut after the first copy).
const REPEATING: &str = "Your reply began repeating itself, so it was stopped. Write your whole answer again, briefly, without repeating yourself.";

/// What the VM tells a model that wrote its tool calls as text, after their results and its
/// task (small models answer what they read last, and took one call for the whole task).
const NEXT_STEP: &str = "Which steps of it are done? Do the next one that is not, with a tool call; when all are done, reply with your answer.";

/// Bytes of one tool output a plain answer is given.
const FOUND_BYTES: usize = 2000;

/// Tool outputs a plain answer is given, at most (the latest).
const FOUND_OUTPUTS: usize = 8;

/// The request for a plain answer made of a loop stuck calling tools: a fresh conversation
/// offering no tools, with the task, what the calls that worked returned, and the task again
/// (small models answer what they read last).
fn answer_without_tools(s: &SessionAsk, found: &[String]) -> String {
    let mut out = render::session(s);
    if !found.is_empty() {
        out.push_str("\n\n## What your tool calls returned\n\n");
        for f in &found[found.len().saturating_sub(FOUND_OUTPUTS)..] {
            out.push_str(f);
            out.push('\n');
        }
    }
    out.push_str(&format!(
        "\n\nAnswer now, in plain text, without tools.\n\nYour task: {}\n",
        s.prompt
    ));
    out
}

/// What the VM asks a persistent agent after its answer.
const UPDATE_MEMORY: &str = "Now update your memory for your next session: rewrite it so it keeps what you know and adds what you learned and decided in this one. Reply with the complete new memory only, as short notes.";

/// The journal and the trace, as a session task reaches them.
#[derive(Clone)]
pub(crate) struct Outbox {
    notes: mpsc::UnboundedSender<Note>,
}

impl Outbox {
    pub(crate) fn new(notes: mpsc::UnboundedSender<Note>) -> Outbox {
        Outbox { notes }
    }

    /// Journals `reply` and waits until it is durable.
    async fn record(&self, reply: &Reply) -> Result<(), Failure> {
        let (tx, rx) = oneshot::channel();
        self.notes
            .send(Note::Record(reply.clone(), tx))
            .map_err(|_| Failure("the run stopped".into()))?;
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Failure(format!("cannot journal the session's step: {e}"))),
            Err(_) => Err(Failure("the run stopped".into())),
        }
    }

    fn event(&self, e: Event) {
        let _ = self.notes.send(Note::Event(e));
    }

    /// Where a driver streams the answer to request `id` (of the statement at `site`): each
    /// piece becomes a [`Event::Delta`], each warning an [`Event::Warning`].
    pub(crate) fn live(&self, id: &RequestId, site: &Site) -> Live {
        let notes = self.notes.clone();
        let id = id.clone();
        let site = site.to_string();
        Live::to(move |piece| {
            let event = match piece {
                Piece::Text(t) => Event::Delta {
                    id: id.clone(),
                    text: t.to_string(),
                    restart: false,
                },
                Piece::Restart => Event::Delta {
                    id: id.clone(),
                    text: String::new(),
                    restart: true,
                },
                Piece::Warning(w) => Event::Warning {
                    code: Code::W201,
                    site: site.clone(),
                    message: format!("{id}: {w}"),
                },
            };
            let _ = notes.send(Note::Event(event));
        })
    }
}

/// The steps of one session replayed from the journal, by step.
type Replayed = HashMap<Step, Reply>;

/// How a session's calls wait for approvals from outside.
#[derive(Clone, Debug, Default)]
pub(crate) struct Approvals {
    /// The run can wait for them (it is journaled): with no one at hand, a call its
    /// permissions say `prompt` for waits instead of being refused.
    pub may_wait: bool,
    /// How long a call waits before it is refused (none: as long as it takes).
    pub limit: Option<std::time::Duration>,
    /// The calls of this session the run waited for when it last stopped, by step: they
    /// never ran, and wait on with the time they first waited.
    pub pending: HashMap<Step, WaitingApproval>,
}

/// The tool call being run: the step a question's answer is journaled under, and what a
/// wait for its approval shows.
#[derive(Clone)]
struct Current {
    turn: u32,
    call: u32,
    tool: String,
    arguments: serde_json::Value,
    /// A question was asked for it already (a redirect's second host): later ones are
    /// neither journaled nor waited for.
    asked: bool,
}

/// A session's journaled permission answers, and the asking of new ones: of the driver's host
/// when it stands for the person, else of the run's people; with no one at hand, the wait for
/// an approval from outside.
struct Grants<D> {
    session: RequestId,
    site: prose_machine::protocol::Site,
    /// The session's agent and prompt, for an approval's description.
    agent: Option<String>,
    prompt: String,
    driver: Arc<D>,
    inner: Arc<dyn Prompter>,
    outbox: Outbox,
    /// The journaled grants (`#t3p0`) and answers from outside (`#t3a0`) not used yet.
    replayed: Mutex<Replayed>,
    current: Mutex<Option<Current>>,
    approvals: Approvals,
    /// The approval the current call waits for, once it must.
    waits: Mutex<Option<WaitingApproval>>,
}

impl<D: Driver> Prompter for Grants<D> {
    fn ask<'a>(
        &'a self,
        question: &'a PermissionQuestion,
    ) -> BoxFuture<'a, Result<PromptAnswer, Unanswered>> {
        Box::pin(async move {
            let cur = {
                let mut current = lock(&self.current);
                let Some(cur) = current.as_mut() else {
                    return Err(Unanswered::NoOne);
                };
                let first = !std::mem::replace(&mut cur.asked, true);
                (cur.clone(), first)
            };
            let (cur, first) = cur;
            if !first {
                return match self.driver.hosts_people() {
                    true => Err(Unanswered::NoOne),
                    false => self.inner.ask(question).await,
                };
            }
            let (turn, call) = (cur.turn, cur.call);
            let step = Step::Grant { turn, call };
            let (granted, approved) = {
                let mut r = lock(&self.replayed);
                (r.remove(&step), r.remove(&Step::Approval { turn, call }))
            };
            if let Some(Reply {
                outcome: Ok(Answer::Permission(a)),
                ..
            }) = granted
            {
                return Ok(a);
            }
            let answer = match approved.map(|r| r.outcome) {
                Some(Ok(Answer::Permission(a))) => a,
                Some(Err(Failure(why))) => return Err(Unanswered::Lapsed(why)),
                Some(Ok(_)) => return Err(Unanswered::NoOne),
                None => self.asked(question, &cur).await?,
            };
            // Journaled before the call runs: a call with a grant and no output may have run.
            let reply = Reply::answer(self.session.step(step), Answer::Permission(answer));
            self.outbox
                .record(&reply)
                .await
                .map_err(|_| Unanswered::NoOne)?;
            Ok(answer)
        })
    }
}

impl<D: Driver> Grants<D> {
    /// A new answer to `question`, asked for call `cur`: refused if the run waited for it
    /// past its time limit (the lapse journaled as its answer from outside); else asked of
    /// the host or the people; with no one at hand in a run that can wait, refused for now
    /// with the wait noted, for the call to end the session.
    async fn asked(
        &self,
        question: &PermissionQuestion,
        cur: &Current,
    ) -> Result<PromptAnswer, Unanswered> {
        let (turn, call) = (cur.turn, cur.call);
        let call_id = self.session.step(Step::Call { turn, call });
        let now = crate::clock::now();
        let pending = self.approvals.pending.get(&call_id.step).cloned();
        if pending.as_ref().is_some_and(|p| p.lapsed(now)) {
            // Why the call is refused, for the model and the journal.
            let why = format!(
                "no one answered within {}",
                crate::observe::human_duration(self.approvals.limit.unwrap_or_default())
            );
            let lapse = Reply::failed(
                self.session.step(Step::Approval { turn, call }),
                Kind::Permission,
                why.clone(),
            );
            self.outbox
                .record(&lapse)
                .await
                .map_err(|_| Unanswered::NoOne)?;
            return Err(Unanswered::Lapsed(why));
        }
        if self.driver.hosts_people() {
            let req = Request {
                id: self.session.step(Step::Grant { turn, call }),
                site: self.site.clone(),
                ask: Ask::Permission(question.clone()),
            };
            return match serve(&*self.driver, &req, &Live::off()).await.outcome {
                Ok(Answer::Permission(a)) => Ok(a),
                _ => Err(Unanswered::NoOne),
            };
        }
        match self.inner.ask(question).await {
            Err(Unanswered::NoOne) if self.approvals.may_wait => {
                let waiting = pending.unwrap_or_else(|| {
                    let asking = Asking {
                        agent: self.agent.clone(),
                        tool: cur.tool.clone(),
                        capability: question.capability,
                        detail: question.detail.clone(),
                        arguments: cur.arguments.clone(),
                        prompt: self.prompt.clone(),
                    };
                    WaitingApproval::new(
                        call_id,
                        asking,
                        std::time::SystemTime::now(),
                        self.approvals.limit,
                    )
                });
                *lock(&self.waits) = Some(waiting);
                Err(Unanswered::NoOne)
            }
            heard => heard,
        }
    }
}

impl<D> Grants<D> {
    /// Whether the journal says a person answered "always" before tool call `call` of turn
    /// `turn` ran.
    fn always_at(&self, turn: u32, call: u32) -> bool {
        lock(&self.replayed)
            .get(&Step::Grant { turn, call })
            .is_some_and(|r| matches!(r.outcome, Ok(Answer::Permission(PromptAnswer::Always))))
    }

    /// Whether tool call `call` of turn `turn`, which has no output in the journal, is one
    /// the run stopped to wait for (answered since, or not): it never ran. One granted
    /// before it ran may have run.
    fn waited_for(&self, turn: u32, call: u32) -> bool {
        let replayed = lock(&self.replayed);
        !replayed.contains_key(&Step::Grant { turn, call })
            && (replayed.contains_key(&Step::Approval { turn, call })
                || self
                    .approvals
                    .pending
                    .contains_key(&Step::Call { turn, call }))
    }

    /// The approval the current call must wait for, if it must.
    fn take_wait(&self) -> Option<WaitingApproval> {
        lock(&self.waits).take()
    }
}

/// `m`'s content, whether or not a holder panicked.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a session's run ended: with its reply (an answer or a failure), or waiting for a
/// person's approval of one of its tool calls.
pub(crate) enum SessionEnd {
    /// The session's reply, for the runner to journal.
    Replied(Reply),
    /// A call waits for an approval from outside; nothing of it ran.
    Waits(Box<WaitingApproval>),
}

/// Runs session `req` as an agent loop with `driver`'s turns and `workshop`'s tools;
/// `replayed` are its journaled steps, and `approvals` says how its calls wait for a
/// person's approval. Returns the session's reply (with the tokens of every turn) for the
/// runner to journal, or the approval it waits for.
pub(crate) async fn run<D: Driver>(
    driver: Arc<D>,
    req: Request,
    workshop: Arc<Workshop>,
    replayed: Vec<Reply>,
    outbox: Outbox,
    cfg: super::RunConfig,
    approvals: Approvals,
) -> SessionEnd {
    let Ask::Session(s) = &req.ask else {
        return SessionEnd::Replied(Reply::failed(req.id.clone(), req.kind(), "not a session"));
    };
    let started = Instant::now();
    let mut steps: Replayed = replayed.into_iter().map(|r| (r.id.step, r)).collect();
    let grants: Replayed = steps
        .iter()
        .filter(|(st, _)| matches!(st, Step::Grant { .. } | Step::Approval { .. }))
        .map(|(st, r)| (*st, r.clone()))
        .collect();
    let grants = Arc::new(Grants {
        session: req.id.clone(),
        site: req.site.clone(),
        agent: s.agent.clone(),
        prompt: s.prompt.clone(),
        driver: driver.clone(),
        inner: workshop.people.prompter(),
        outbox: outbox.clone(),
        replayed: Mutex::new(grants),
        current: Mutex::new(None),
        approvals,
        waits: Mutex::new(None),
    });
    let mut loop_ = Loop {
        driver: &*driver,
        req: &req,
        s,
        outbox: &outbox,
        steps: &mut steps,
        usage: None,
        turn: 0,
        cfg: &cfg,
        started,
        first_token_ms: None,
        structured: false,
    };
    let kit = match workshop.equip(s, grants.clone()) {
        Ok(k) => k,
        Err(e) => return SessionEnd::Replied(loop_.finish(Err(Failure(e)))),
    };
    let limits = Bounds {
        turns: workshop.max_turns,
        time: workshop.session_timeout,
    };
    let mut attempts = super::retry::Attempts::new(s.retry, s.backoff, cfg.backoff_unit);
    loop {
        let outcome = match limits.time {
            Some(t) => match tokio::time::timeout_at((started + t).into(), loop_.attempt(&kit, &grants, limits)).await {
                Ok(o) => o,
                Err(_) => Err(Halt::Failed(
                    Failure(format!(
                        "the session ran past its time limit of {} (raise it with --session-timeout or `session_timeout` in prose.toml)",
                        crate::observe::human_duration(t)
                    )),
                    false,
                )),
            },
            None => loop_.attempt(&kit, &grants, limits).await,
        };
        let outcome = match outcome {
            Ok(answer) => Ok(answer),
            Err(Halt::Failed(failure, replaying)) => Err((failure, replaying)),
            Err(Halt::Waits(waiting)) => return SessionEnd::Waits(waiting),
        };
        if let Err((failure, replaying)) = &outcome {
            if let Some(again) = attempts.after_failure(&req.id, failure.0.clone()) {
                outbox.event(again.event);
                if !replaying {
                    tokio::time::sleep(again.delay).await;
                }
                continue;
            }
        }
        return SessionEnd::Replied(loop_.finish(outcome.map_err(|(f, _)| f)));
    }
}

/// What one session may take.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    /// Model turns per attempt.
    turns: u32,
    /// Wall-clock time, from the session's start, over all its attempts.
    time: Option<std::time::Duration>,
}

/// One session's loop state.
struct Loop<'a, D> {
    driver: &'a D,
    req: &'a Request,
    s: &'a SessionAsk,
    outbox: &'a Outbox,
    steps: &'a mut Replayed,
    usage: Option<Usage>,
    /// The next turn's number (counted across attempts, so every turn has its own id).
    turn: u32,
    /// The run's budget and stop.
    cfg: &'a super::RunConfig,
    /// When the session started.
    started: Instant,
    /// Milliseconds from the session's start to its first streamed token.
    first_token_ms: Option<u64>,
    /// The driver asks turns that offer tools structured: each reply is one step under a
    /// schema, never a call written in prose nor tool declarations written back.
    structured: bool,
}

/// Why an attempt stopped before its answer.
enum Halt {
    /// It failed; and whether the failure was replayed from the journal.
    Failed(Failure, bool),
    /// A tool call waits for a person's approval from outside.
    Waits(Box<WaitingApproval>),
}

/// A model turn as the loop takes it.
struct Turned {
    answer: TurnAnswer,
    /// It was replayed from the journal.
    replayed: bool,
    /// Why its answer shows the model confused, if it does (`text_calls::confusion`).
    confused: Option<String>,
}

/// Where an attempt's conversation stands.
struct Conversation {
    messages: Vec<Message>,
    /// The model may no longer call tools: it was asked for a plain answer.
    plain: bool,
    /// Continuations asked of answers cut off by the output limit.
    continuations: u32,
    /// Text of the cut-off answers so far.
    cut: String,
    /// The model's answer ran away into repetition once already.
    ran_away: bool,
    /// What the successful calls of read-only tools returned, for a plain answer.
    found: Vec<String>,
    /// The paths the successful tool calls named.
    touched: Vec<String>,
    /// The model was told once that files its task asks for are missing.
    reminded: bool,
    /// The loop went nowhere once in a structured session: the tools that only look were
    /// withdrawn, leaving those that act ([`narrowing`]).
    narrowed: bool,
}

impl<D: Driver> Loop<'_, D> {
    /// The session's reply from its outcome, with the tokens and time it took.
    fn finish(self, outcome: Result<SessionAnswer, Failure>) -> Reply {
        let usage = self.usage;
        self.outbox.event(Event::usage(
            &self.req.id,
            self.started.elapsed().as_millis() as u64,
            self.first_token_ms,
            usage,
        ));
        Reply {
            id: self.req.id.clone(),
            kind: Kind::Session,
            outcome: outcome.map(Answer::Session),
            usage,
        }
    }

    /// One model turn: replayed, or asked (and journaled unless it ends the session).
    /// Returns the answer and whether it was replayed. A tool call written as text, of a
    /// tool on offer, is taken as the call it means (before it is journaled, so that a
    /// replay reads it the same way).
    async fn turn(&mut self, ask: TurnAsk) -> Result<Turned, Halt> {
        let n = self.turn;
        self.turn += 1;
        let id = self.req.id.step(Step::Turn(n));
        let offered: Vec<ToolSpec> = if ask.tools_off {
            Vec::new()
        } else {
            ask.tools.clone()
        };
        let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
        // An answer without calls, offered tools natively, that shows the model confused
        // (declarations written back, a made-up tool): asked once, for live and replayed
        // turns alike.
        let structured = self.structured;
        let confusion =
            |a: &TurnAnswer| match a.tool_calls.is_empty() && !offered.is_empty() && !structured {
                true => text_calls::confusion(&a.text, &offered),
                false => None,
            };
        let turn_req = Request {
            id: id.clone(),
            site: self.req.site.clone(),
            ask: Ask::Turn(ask),
        };
        let (reply, replayed) = match self.steps.remove(&id.step) {
            Some(r) => {
                self.driver.observe(&turn_req, &r);
                (r, true)
            }
            None => {
                let started = Instant::now();
                let live = self.outbox.live(&id, &self.req.site);
                let Some(mut r) =
                    super::serve_within(self.driver, &turn_req, self.cfg, &live).await
                else {
                    // Over budget: nothing was sent, and the run is pausing.
                    return Err(Halt::Failed(Failure(super::budget::PAUSED.into()), false));
                };
                if let (Some(t), None) = (live.first_token_ms(), self.first_token_ms) {
                    let before = started.duration_since(self.started).as_millis() as u64;
                    self.first_token_ms = Some(before + t);
                }
                let mut confused = false;
                if let Ok(Answer::Turn(a)) = &mut r.outcome {
                    confused = confusion(a).is_some();
                    if a.tool_calls.is_empty() && !offered.is_empty() && !structured {
                        if let (false, Some(calls)) =
                            (confused, text_calls::parse(&a.text, &names, n))
                        {
                            a.tool_calls = calls;
                            a.stop = Stop::ToolUse;
                        }
                    }
                }
                let (calls, goes_on) = match &r.outcome {
                    Ok(Answer::Turn(a)) => (
                        a.tool_calls.len(),
                        confused
                            || !a.tool_calls.is_empty()
                            || matches!(a.stop, Stop::Length | Stop::Repeating | Stop::Astray),
                    ),
                    _ => (0, true),
                };
                // A turn that ends the session is the session's answer, journaled with it.
                if goes_on {
                    self.outbox
                        .record(&r)
                        .await
                        .map_err(|f| Halt::Failed(f, false))?;
                }
                self.outbox.event(Event::Turn {
                    id: id.clone(),
                    tool_calls: calls,
                    ms: started.elapsed().as_millis() as u64,
                    first_token_ms: live.first_token_ms(),
                    used: r.usage,
                });
                (r, false)
            }
        };
        if let Some(u) = reply.usage {
            *self.usage.get_or_insert_with(Usage::default) += u;
        }
        match reply.outcome {
            Ok(Answer::Turn(answer)) => Ok(Turned {
                confused: confusion(&answer),
                answer,
                replayed,
            }),
            Ok(other) => Err(Halt::Failed(
                Failure(format!(
                    "a turn was answered with a `{}` answer",
                    other.kind()
                )),
                replayed,
            )),
            Err(f) => Err(Halt::Failed(f, replayed)),
        }
    }

    /// One attempt at the session: turns and tool calls until an answer without tool calls
    /// (then the memory update of a persistent agent), or the turn limit. A loop that gets
    /// stuck is asked once for a plain answer without tools; an answer that runs away into
    /// repetition is asked once more, briefly.
    async fn attempt(
        &mut self,
        kit: &Kit,
        grants: &Grants<D>,
        limits: Bounds,
    ) -> Result<SessionAnswer, Halt> {
        let system = kit.system.clone();
        let tools = kit.toolbox.specs();
        self.structured = !tools.is_empty() && self.driver.structured_turns().await;
        let listing = match self.structured {
            true => Some(Listing::of(&kit.sandbox).await),
            false => None,
        };
        // The system prompt of a turn offering `offered`.
        let system_for = |offered: &[ToolSpec]| match (&listing, offered.is_empty()) {
            (Some(listing), false) => Some(structured::system(system.as_deref(), offered, listing)),
            _ => system_prompt(system.as_deref(), !offered.is_empty()),
        };
        let mut c = Conversation {
            messages: vec![Message::User {
                content: render::session(self.s),
            }],
            plain: tools.is_empty(),
            continuations: 0,
            cut: String::new(),
            ran_away: false,
            found: Vec::new(),
            touched: Vec::new(),
            reminded: false,
            narrowed: false,
        };
        let mut stuck = Stuck::default();
        // The tools left to a session narrowed to acting ([`narrowing`]).
        let acting = narrowing::acting(&tools, |name| kit.toolbox.read_only(name));
        let mut taken = 0;
        let mut replaying = true;
        loop {
            if taken == limits.turns {
                return Err(Halt::Failed(
                    Failure(format!(
                        "the session reached its limit of {} turns without a final answer (raise it with --max-turns or `max_turns` in prose.toml)",
                        limits.turns
                    )),
                    replaying,
                ));
            }
            taken += 1;
            let offered = match (c.plain, c.narrowed) {
                (true, _) => Vec::new(),
                (false, true) => acting.clone(),
                (false, false) => tools.clone(),
            };
            let ask = TurnAsk {
                agent: self.s.agent.clone(),
                model: self.s.model.clone(),
                system: system_for(&offered),
                messages: c.messages.clone(),
                tools: offered,
                tools_off: false,
            };
            let turn = self.turn;
            let Turned {
                answer,
                replayed,
                confused,
            } = self.turn(ask).await?;
            replaying = replayed;
            if let Some(why) = confused {
                self.nudge(&mut c, why);
                continue;
            }
            if answer.stop == Stop::Repeating {
                let span = answer.repeated.clone().unwrap_or_default();
                if c.ran_away {
                    return Err(Halt::Failed(
                        Failure(format!(
                            "the model's answer kept repeating itself, even when asked to answer briefly: {:?}",
                            span.chars().take(200).collect::<String>()
                        )),
                        replaying,
                    ));
                }
                c.ran_away = true;
                c.messages.push(Message::Assistant {
                    text: answer.text,
                    tool_calls: Vec::new(),
                });
                c.messages.push(Message::User {
                    content: REPEATING.into(),
                });
                continue;
            }
            if answer.tool_calls.is_empty() {
                if answer.stop == Stop::Length {
                    if c.continuations == CONTINUATIONS {
                        return Err(Halt::Failed(
                            Failure(format!(
                                "the model's answer was cut off by its output limit, even after {CONTINUATIONS} continuations"
                            )),
                            replaying,
                        ));
                    }
                    c.continuations += 1;
                    c.cut.push_str(&answer.text);
                    c.messages.push(Message::Assistant {
                        text: answer.text,
                        tool_calls: Vec::new(),
                    });
                    c.messages.push(Message::User {
                        content: CONTINUE.into(),
                    });
                    continue;
                }
                // Answered with a file its task asks for not written: told so, once.
                if !c.plain && !c.reminded && kit.toolbox.get("write_file").is_some() {
                    let missing = promised::missing(&self.s.prompt, &c.touched);
                    if !missing.is_empty() {
                        c.reminded = true;
                        c.messages.push(Message::Assistant {
                            text: answer.text,
                            tool_calls: Vec::new(),
                        });
                        c.messages.push(Message::User {
                            content: promised::reminder(&missing),
                        });
                        continue;
                    }
                }
                let text = format!("{}{}", c.cut, answer.text);
                let memory = if self.s.persistent {
                    c.messages.push(Message::Assistant {
                        text: text.clone(),
                        tool_calls: Vec::new(),
                    });
                    c.messages.push(Message::User {
                        content: UPDATE_MEMORY.into(),
                    });
                    let declared = if c.plain { Vec::new() } else { tools.clone() };
                    let ask = TurnAsk {
                        agent: self.s.agent.clone(),
                        model: self.s.model.clone(),
                        system: system_for(&declared),
                        messages: c.messages,
                        tools_off: !declared.is_empty(),
                        tools: declared,
                    };
                    let update = self.turn(ask).await?;
                    Some(update.answer.text)
                } else {
                    None
                };
                return Ok(SessionAnswer { text, memory });
            }
            if c.plain {
                return Err(Halt::Failed(
                    Failure(format!(
                        "the model kept calling tools (`{}`) after it was asked to answer without them",
                        answer.tool_calls[0].name
                    )),
                    replaying,
                ));
            }
            let outputs = self
                .calls(kit, grants, turn, &answer, replayed, &mut c.messages)
                .await?;
            let pairs: Vec<(&ToolCall, &ToolOutput)> =
                answer.tool_calls.iter().zip(outputs.iter()).collect();
            // The paths the successful calls named, and what those that only read found
            // (what a write did is in the files).
            for (call, out) in pairs.iter().filter(|(_, out)| !out.is_error) {
                if let Some(path) = call.arguments["path"].as_str() {
                    c.touched.push(path.to_string());
                }
                if kit.toolbox.read_only(&call.name) {
                    c.found.push(format!(
                        "### {} {}\n\n{}\n",
                        call.name,
                        short_arguments(&call.arguments),
                        prose_agent::tools::truncate_at(&out.content, FOUND_BYTES)
                    ));
                }
            }
            let known =
                |name: &str| kit.toolbox.get(name).is_some() || kit.withheld.contains_key(name);
            let changes = |name: &str| !kit.toolbox.read_only(name);
            if let Some(why) = stuck.turn(&pairs, known, changes) {
                if self.structured && !c.narrowed && !acting.is_empty() {
                    self.outbox.event(Event::Nudge {
                        id: self.req.id.clone(),
                        why: format!("{why}; the tools that only look were withdrawn"),
                    });
                    c.narrowed = true;
                    c.messages.push(Message::User {
                        content: narrowing::message(&acting, &self.s.prompt),
                    });
                } else {
                    self.nudge(&mut c, why);
                }
            }
        }
    }

    /// The loop went nowhere (`why` says how): from now on the conversation is a fresh one
    /// without tools, with the task and what the calls that read something returned.
    fn nudge(&self, c: &mut Conversation, why: String) {
        self.outbox.event(Event::Nudge {
            id: self.req.id.clone(),
            why,
        });
        c.plain = true;
        c.messages = vec![Message::User {
            content: answer_without_tools(self.s, &c.found),
        }];
    }

    /// Runs the tool calls of `answer` (turn `turn`), adding the model's message and their
    /// outputs to `messages`: as tool messages when the model called natively, as one user
    /// message ending with its task when it wrote its calls as text (a model without tool
    /// calling answers what it read last). Returns the outputs, in order.
    async fn calls(
        &mut self,
        kit: &Kit,
        grants: &Grants<D>,
        turn: u32,
        answer: &TurnAnswer,
        replayed: bool,
        messages: &mut Vec<Message>,
    ) -> Result<Vec<ToolOutput>, Halt> {
        let in_text = answer.tool_calls.iter().all(ToolCall::is_in_text);
        messages.push(Message::Assistant {
            text: answer.text.clone(),
            tool_calls: if in_text {
                Vec::new()
            } else {
                answer.tool_calls.clone()
            },
        });
        let mut outputs = Vec::new();
        let mut results = String::new();
        // Calls run one after another, each journaled as it ends: once one was not in the
        // journal, the run stopped at it or before, and those after it never ran.
        let mut may_have_run = replayed;
        for (i, call) in answer.tool_calls.iter().enumerate() {
            let journaled = self.steps.contains_key(&Step::Call {
                turn,
                call: i as u32,
            });
            let output = self
                .call(kit, grants, turn, i as u32, call, may_have_run)
                .await?;
            may_have_run &= journaled;
            if in_text {
                let what = if output.is_error {
                    "failed"
                } else {
                    "returned"
                };
                results.push_str(&format!(
                    "The tool `{}` {what}:\n{}\n\n",
                    call.name, output.content
                ));
            } else {
                messages.push(Message::Tool {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: output.content.clone(),
                    is_error: output.is_error,
                });
            }
            outputs.push(output);
        }
        if in_text {
            results.push_str(&format!("Your task: {}\n\n{NEXT_STEP}", self.s.prompt));
            messages.push(Message::User { content: results });
        }
        Ok(outputs)
    }

    /// Tool call `call` of turn `turn`: replayed, or run in `sandbox` and journaled. A call
    /// with no output journaled that `may_have_run` (its turn was replayed) may have been
    /// running at a crash: it is run again only if it changes nothing, or if the run
    /// stopped to wait for its approval (then it never ran). A call that must wait for an
    /// approval ends the attempt, nothing of it run and nothing journaled.
    async fn call(
        &mut self,
        kit: &Kit,
        grants: &Grants<D>,
        turn: u32,
        i: u32,
        call: &ToolCall,
        may_have_run: bool,
    ) -> Result<ToolOutput, Halt> {
        let step = Step::Call { turn, call: i };
        let id = self.req.id.step(step);
        if let Some(r) = self.steps.remove(&step) {
            if let Ok(Answer::Tool(out)) = r.outcome {
                // An "always" given for this call holds for the rest of the session.
                if grants.always_at(turn, i) {
                    kit.sandbox.grant_always(if call.name == "bash" {
                        Capability::Bash
                    } else {
                        Capability::Network
                    });
                }
                return Ok(out);
            }
        }
        let started = Instant::now();
        let (output, refused) = if let Some(why) = kit.withheld.get(&call.name) {
            (ToolOutput::error(why.clone()), Some(why.clone()))
        } else if may_have_run && !kit.toolbox.read_only(&call.name) && !grants.waited_for(turn, i)
        {
            (
                ToolOutput::error(format!(
                    "this call of `{}` was interrupted: the run stopped while it was running, so it may or may not have taken effect; check before calling it again",
                    call.name
                )),
                None,
            )
        } else {
            *lock(&grants.current) = Some(Current {
                turn,
                call: i,
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
                asked: false,
            });
            if call.name == "bash" && !kit.sandbox_told.swap(true, Ordering::Relaxed) {
                let (confinement, detail) = kit.sandbox.confinement_summary();
                self.outbox.event(Event::Sandbox {
                    confinement,
                    detail,
                });
            }
            let result = kit.toolbox.call(call, &kit.sandbox).await;
            if let Some(waiting) = grants.take_wait() {
                return Err(Halt::Waits(Box::new(waiting)));
            }
            let refused = result
                .decisions
                .iter()
                .find(|d| !d.allowed)
                .map(|d| d.reason.clone());
            (result.output, refused)
        };
        self.outbox.event(Event::ToolCall {
            id: id.clone(),
            tool: call.name.clone(),
            arguments: short_arguments(&call.arguments),
            refused,
            is_error: output.is_error,
            ms: started.elapsed().as_millis() as u64,
            bytes: output.content.len(),
        });
        self.outbox
            .record(&Reply::answer(id, Answer::Tool(output.clone())))
            .await
            .map_err(|f| Halt::Failed(f, false))?;
        Ok(output)
    }
}

/// A tool call's arguments in one short line, for the trace.
fn short_arguments(args: &serde_json::Value) -> String {
    let text = args.to_string();
    if text.chars().count() > 120 {
        format!("{}...", text.chars().take(117).collect::<String>())
    } else {
        text
    }
}
