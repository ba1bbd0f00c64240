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

use super::Note;
use crate::agent::permissions::{Capability, PermissionQuestion, PromptAnswer, Prompter};
use crate::agent::tools::{ToolCall, ToolOutput};
use crate::agent::workshop::{Kit, Workshop};
use crate::agent::BoxFuture;
use crate::driver::{render, serve, Driver};
use crate::protocol::{
    Answer, Ask, Failure, Kind, Message, Reply, Request, RequestId, SessionAnswer, SessionAsk,
    Step, Stop, TurnAnswer, TurnAsk, Usage,
};
use crate::trace::Event;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// Continuations asked of a reply cut off by the model's output limit before the session
/// fails.
const CONTINUATIONS: u32 = 2;

/// What the VM tells the model when its reply was cut off.
const CONTINUE: &str =
    "Your reply was cut off by the output limit. Continue exactly where it stopped.";

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
}

/// The steps of one session replayed from the journal, by step.
type Replayed = HashMap<Step, Reply>;

/// A session's journaled permission answers, and the asking of new ones: of the driver's host
/// when it stands for the person, else of the run's people.
struct Grants<D> {
    session: RequestId,
    site: crate::protocol::Site,
    driver: Arc<D>,
    inner: Arc<dyn Prompter>,
    outbox: Outbox,
    replayed: Mutex<Replayed>,
    /// The tool call being run: the step a question's answer is journaled under.
    current: Mutex<Option<(u32, u32)>>,
}

impl<D: Driver> Prompter for Grants<D> {
    fn ask<'a>(&'a self, question: &'a PermissionQuestion) -> BoxFuture<'a, Option<PromptAnswer>> {
        Box::pin(async move {
            let (turn, call) = (*self.current.lock().ok()?)?;
            let step = Step::Grant { turn, call };
            let replayed = self.replayed.lock().ok()?.remove(&step);
            if let Some(Reply {
                outcome: Ok(Answer::Permission(a)),
                ..
            }) = replayed
            {
                return Some(a);
            }
            let id = self.session.step(step);
            let answer = if self.driver.hosts_people() {
                let req = Request {
                    id: id.clone(),
                    site: self.site.clone(),
                    ask: Ask::Permission(question.clone()),
                };
                match serve(&*self.driver, &req).await.outcome {
                    Ok(Answer::Permission(a)) => a,
                    _ => return None,
                }
            } else {
                self.inner.ask(question).await?
            };
            let reply = Reply::answer(id, Answer::Permission(answer));
            self.outbox.record(&reply).await.ok()?;
            Some(answer)
        })
    }
}

impl<D> Grants<D> {
    /// Whether the journal says a person answered "always" before tool call `call` of turn
    /// `turn` ran.
    fn always_at(&self, turn: u32, call: u32) -> bool {
        self.replayed.lock().is_ok_and(|r| {
            matches!(
                r.get(&Step::Grant { turn, call }).map(|r| &r.outcome),
                Some(Ok(Answer::Permission(PromptAnswer::Always)))
            )
        })
    }
}

/// Runs session `req` as an agent loop with `driver`'s turns and `workshop`'s tools;
/// `replayed` are its journaled steps. Returns the session's reply (with the tokens of every
/// turn) for the runner to journal.
pub(crate) async fn run<D: Driver>(
    driver: Arc<D>,
    req: Request,
    workshop: Arc<Workshop>,
    replayed: Vec<Reply>,
    outbox: Outbox,
    cfg: super::RunConfig,
) -> Reply {
    let Ask::Session(s) = &req.ask else {
        return Reply::failed(req.id.clone(), req.kind(), "not a session");
    };
    let started = Instant::now();
    let mut steps: Replayed = replayed.into_iter().map(|r| (r.id.step, r)).collect();
    let grants: Vec<(Step, Reply)> = steps
        .iter()
        .filter(|(st, _)| matches!(st, Step::Grant { .. }))
        .map(|(st, r)| (*st, r.clone()))
        .collect();
    let grants = Arc::new(Grants {
        session: req.id.clone(),
        site: req.site.clone(),
        driver: driver.clone(),
        inner: workshop.people.prompter(),
        outbox: outbox.clone(),
        replayed: Mutex::new(grants.into_iter().collect()),
        current: Mutex::new(None),
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
    };
    let kit = match workshop.equip(s, grants.clone()) {
        Ok(k) => k,
        Err(e) => return loop_.finish(Err(Failure(e)), started),
    };
    let mut attempt = 1;
    loop {
        let outcome = loop_.attempt(&kit, &grants, workshop.max_turns).await;
        match outcome {
            Err((failure, replaying)) if attempt <= s.retry => {
                attempt += 1;
                outbox.event(Event::Retry {
                    id: req.id.clone(),
                    attempt,
                    error: failure.0,
                });
                if !replaying {
                    tokio::time::sleep(super::backoff_delay(s.backoff, cfg.backoff_unit, attempt))
                        .await;
                }
            }
            other => return loop_.finish(other.map_err(|(f, _)| f), started),
        }
    }
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
}

/// How an attempt failed, and whether the failure was replayed from the journal.
type AttemptError = (Failure, bool);

impl<D: Driver> Loop<'_, D> {
    /// The session's reply from its outcome, with the tokens and time it took.
    fn finish(self, outcome: Result<SessionAnswer, Failure>, started: Instant) -> Reply {
        let usage = self.usage;
        self.outbox.event(Event::usage(
            &self.req.id,
            started.elapsed().as_millis() as u64,
            usage,
        ));
        Reply {
            id: self.req.id.clone(),
            kind: Kind::Session,
            outcome: outcome.map(Answer::Session),
            usage,
        }
    }

    /// One model turn: replayed, or asked (and journaled when it calls tools or fails).
    /// Returns the answer and whether it was replayed.
    async fn turn(&mut self, ask: TurnAsk) -> Result<(TurnAnswer, bool), AttemptError> {
        let n = self.turn;
        self.turn += 1;
        let id = self.req.id.step(Step::Turn(n));
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
                let Some(mut r) = super::serve_within(self.driver, &turn_req, self.cfg).await
                else {
                    // Over budget: nothing was sent, and the run is pausing.
                    return Err((Failure("paused at the budget".into()), false));
                };
                if let Ok(Answer::Turn(a)) = &mut r.outcome {
                    text_tool_call(a, n);
                }
                let calls = match &r.outcome {
                    Ok(Answer::Turn(a)) => a.tool_calls.len(),
                    _ => 0,
                };
                // A turn that ends the session is the session's answer, journaled with it.
                if calls > 0 || r.outcome.is_err() {
                    self.outbox.record(&r).await.map_err(|f| (f, false))?;
                }
                self.outbox.event(Event::Turn {
                    id: id.clone(),
                    tool_calls: calls,
                    ms: started.elapsed().as_millis() as u64,
                    input_tokens: r.usage.map(|u| u.input_tokens),
                    output_tokens: r.usage.map(|u| u.output_tokens),
                });
                (r, false)
            }
        };
        if let Some(u) = reply.usage {
            *self.usage.get_or_insert_with(Usage::default) += u;
        }
        match reply.outcome {
            Ok(Answer::Turn(a)) => Ok((a, replayed)),
            Ok(other) => Err((
                Failure(format!(
                    "a turn was answered with a `{}` answer",
                    other.kind()
                )),
                replayed,
            )),
            Err(f) => Err((f, replayed)),
        }
    }

    /// One attempt at the session: turns and tool calls until an answer without tool calls
    /// (then the memory update of a persistent agent), or `max_turns`.
    async fn attempt(
        &mut self,
        kit: &Kit,
        grants: &Grants<D>,
        max_turns: u32,
    ) -> Result<SessionAnswer, AttemptError> {
        let system = kit.system.clone();
        let task = render::session(self.s);
        let mut messages = vec![Message::User { content: task }];
        let tools = kit.toolbox.specs();
        let mut taken = 0;
        let mut cut = String::new();
        let mut continuations = 0;
        let mut replaying = true;
        loop {
            if taken == max_turns {
                return Err((
                    Failure(format!(
                        "the session reached its limit of {max_turns} turns without a final answer (raise it with --max-turns or `max_turns` in prose.toml)"
                    )),
                    replaying,
                ));
            }
            taken += 1;
            let ask = TurnAsk {
                agent: self.s.agent.clone(),
                model: self.s.model.clone(),
                system: system.clone(),
                messages: messages.clone(),
                tools: tools.clone(),
            };
            let turn = self.turn;
            let (answer, replayed) = self.turn(ask).await?;
            replaying = replayed;
            if answer.tool_calls.is_empty() {
                if answer.stop == Stop::Length {
                    if continuations == CONTINUATIONS {
                        return Err((
                            Failure(format!(
                                "the model's answer was cut off by its output limit, even after {CONTINUATIONS} continuations"
                            )),
                            replaying,
                        ));
                    }
                    continuations += 1;
                    cut.push_str(&answer.text);
                    messages.push(Message::Assistant {
                        text: answer.text,
                        tool_calls: Vec::new(),
                    });
                    messages.push(Message::User {
                        content: CONTINUE.into(),
                    });
                    continue;
                }
                let text = format!("{cut}{}", answer.text);
                let memory = if self.s.persistent {
                    messages.push(Message::Assistant {
                        text: text.clone(),
                        tool_calls: Vec::new(),
                    });
                    messages.push(Message::User {
                        content: UPDATE_MEMORY.into(),
                    });
                    let ask = TurnAsk {
                        agent: self.s.agent.clone(),
                        model: self.s.model.clone(),
                        system: system.clone(),
                        messages,
                        tools: Vec::new(),
                    };
                    let (update, _) = self.turn(ask).await?;
                    Some(update.text)
                } else {
                    None
                };
                return Ok(SessionAnswer { text, memory });
            }
            // A call the model wrote as text is answered in text too, ending with its task
            // (a model without tool calling answers what it read last).
            let in_text = answer
                .tool_calls
                .iter()
                .all(|c| c.id.starts_with(TEXT_CALL));
            if in_text {
                messages.push(Message::Assistant {
                    text: answer.text.clone(),
                    tool_calls: Vec::new(),
                });
            } else {
                messages.push(Message::Assistant {
                    text: answer.text.clone(),
                    tool_calls: answer.tool_calls.clone(),
                });
            }
            let mut results = String::new();
            for (i, call) in answer.tool_calls.iter().enumerate() {
                let output = self
                    .call(kit, grants, turn, i as u32, call, replayed)
                    .await
                    .map_err(|f| (f, false))?;
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
                        content: output.content,
                        is_error: output.is_error,
                    });
                }
            }
            if in_text {
                results.push_str(&format!(
                    "Go on with your task; when it is done, reply with your answer in plain text.\n\nYour task: {}",
                    self.s.prompt
                ));
                messages.push(Message::User { content: results });
            }
        }
    }

    /// Tool call `call` of turn `turn`: replayed, or run in `sandbox` and journaled. A call
    /// of a replayed turn with no output journaled may have been running at a crash: it is
    /// run again only if it changes nothing.
    async fn call(
        &mut self,
        kit: &Kit,
        grants: &Grants<D>,
        turn: u32,
        i: u32,
        call: &ToolCall,
        turn_replayed: bool,
    ) -> Result<ToolOutput, Failure> {
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
        } else if turn_replayed && !kit.toolbox.read_only(&call.name) {
            (
                ToolOutput::error(format!(
                    "this call of `{}` was interrupted: the run stopped while it was running, so it may or may not have taken effect; check before calling it again",
                    call.name
                )),
                None,
            )
        } else {
            if let Ok(mut current) = grants.current.lock() {
                *current = Some((turn, i));
            }
            let result = kit.toolbox.call(call, &kit.sandbox).await;
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
            .await?;
        Ok(output)
    }
}

/// The id prefix of a tool call a model wrote as text.
const TEXT_CALL: &str = "text_call_";

/// Models without native tool calling (small local ones) often write a call as JSON text,
/// `{"name": ..., "arguments": {...}}`, fenced or not. Such an answer is taken as the call it
/// means (an unknown tool then gets an error listing the real ones), not as the session's
/// answer.
fn text_tool_call(answer: &mut TurnAnswer, turn: u32) {
    if !answer.tool_calls.is_empty() {
        return;
    }
    let text = answer.text.trim();
    let body = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.trim_end().strip_suffix("```"))
        .unwrap_or(text)
        .trim();
    let Ok(serde_json::Value::Object(call)) = serde_json::from_str::<serde_json::Value>(body)
    else {
        return;
    };
    let known = |k: &String| {
        matches!(
            k.as_str(),
            "name" | "arguments" | "parameters" | "id" | "type"
        )
    };
    let name = call.get("name").and_then(|n| n.as_str());
    let args = call.get("arguments").or_else(|| call.get("parameters"));
    if let (Some(name), Some(args)) = (name, args) {
        if args.is_object() && call.keys().all(known) {
            answer.tool_calls.push(ToolCall {
                id: format!("{TEXT_CALL}{turn}"),
                name: name.to_string(),
                arguments: args.clone(),
            });
            answer.stop = Stop::ToolUse;
        }
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
