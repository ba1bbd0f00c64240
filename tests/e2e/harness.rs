//! The test harness: compiles a program, runs the [`Machine`] synchronously, answers every
//! request with a scripted closure and records what the driver saw.

use bytecode_spec::verify::Verified;
pub use prose_machine::protocol::{
    Answer, Ask, Failure, Labelled, Reply, Request, RequestId, SessionAnswer, SessionAsk,
};
use prose_machine::trace::Event;
use prose_machine::value::Value;
use prose_machine::{Limits, Machine, Reached, RuntimeError};
use prosec::compile::Compilation;
pub use prosec::diagnostics::Code;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

/// What a test answers a request with.
pub type Outcome = Result<Answer, Failure>;

/// Compiles `src` as `t.prose` (module name `t`); panics on a compile error.
pub fn compile(src: &str) -> Arc<Verified> {
    let mut c = Compilation::new(Default::default());
    let root = c.add_source(Path::new("t.prose"), src);
    compiled(c, root)
}

/// The verified artifact of a compilation that has no errors.
pub fn compiled(c: Compilation, root: usize) -> Arc<Verified> {
    let errors: Vec<String> = c
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("{}: {}", d.code.as_str(), d.message))
        .collect();
    assert!(errors.is_empty(), "compile errors: {errors:#?}");
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("encodes");
    Arc::new(
        bytecode_spec::artifact::load(&bytes)
            .expect("the compiler's artifact verifies")
            .1,
    )
}

/// In which order a batch of pending requests is answered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Order {
    /// Oldest first (the order the machine asked in).
    Fifo,
    /// Newest first (sibling branches answered in reverse).
    Lifo,
}

/// A machine under test and everything it asked.
pub struct Harness {
    machine: Machine,
    /// Every request the machine made, in order.
    pub log: Vec<Request>,
    /// Every withdrawn request id, in order.
    pub withdrawn: Vec<String>,
    /// Every trace event.
    pub events: Vec<Event>,
    /// How the run ended, once it has.
    pub outcome: Option<Result<Vec<(String, Value)>, RuntimeError>>,
}

/// Requests answered before a run is declared runaway.
const MAX_ANSWERS: usize = 10_000;

impl Harness {
    /// A harness for `src` with no inputs and default limits.
    pub fn new(src: &str) -> Harness {
        Harness::with(compile(src), &[], Limits::default())
    }

    /// A harness for `artifact` with top-level `inputs` and `limits`.
    pub fn with(artifact: Arc<Verified>, inputs: &[(&str, Value)], limits: Limits) -> Harness {
        let inputs: FxHashMap<String, Value> = inputs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let machine = Machine::new(artifact, &inputs, limits).expect("the machine starts");
        Harness {
            machine,
            log: Vec::new(),
            withdrawn: Vec::new(),
            events: Vec::new(),
            outcome: None,
        }
    }

    /// Makes relaxed runtime rules errors, as `--strict` does.
    pub fn set_strict(&mut self) {
        self.machine.set_strict(true);
    }

    /// Runs the ready fibers and returns the new requests (none once the run has ended).
    pub fn step(&mut self) -> Vec<Request> {
        assert!(self.outcome.is_none(), "the run has already ended");
        let step = self.machine.run();
        self.events.extend(self.machine.take_events());
        match step {
            Reached::Waiting {
                requests,
                withdrawn,
            } => {
                self.log.extend(requests.iter().cloned());
                self.withdrawn
                    .extend(withdrawn.iter().map(RequestId::to_string));
                requests
            }
            Reached::Finished(outputs) => {
                self.outcome = Some(Ok(outputs));
                Vec::new()
            }
            Reached::Failed(e) => {
                self.outcome = Some(Err(e));
                Vec::new()
            }
        }
    }

    /// Answers request `id` (its text form); false if the machine no longer wanted it.
    pub fn answer(&mut self, id: &str, outcome: Outcome) -> bool {
        let id: RequestId = id.parse().expect("a request id");
        let kind = match self.log.iter().find(|r| r.id == id) {
            Some(r) => r.kind(),
            None => prose_machine::protocol::Kind::Session,
        };
        self.machine.complete(Reply {
            id,
            kind,
            outcome,
            usage: None,
        })
    }

    /// Runs to the end, answering requests oldest first.
    pub fn run(&mut self, answer: impl FnMut(&Request) -> Outcome) -> &mut Harness {
        self.run_in(Order::Fifo, answer)
    }

    /// Runs to the end, answering one pending request at a time in `order` and letting the
    /// machine run after each answer. Withdrawn requests are not answered.
    pub fn run_in(
        &mut self,
        order: Order,
        mut answer: impl FnMut(&Request) -> Outcome,
    ) -> &mut Harness {
        let mut queue: VecDeque<Request> = self.step().into();
        let mut answered = 0;
        while self.outcome.is_none() {
            queue.retain(|r| !self.withdrawn.contains(&r.id.to_string()));
            let next = match order {
                Order::Fifo => queue.pop_front(),
                Order::Lifo => queue.pop_back(),
            };
            let req = next.expect("the machine waits, yet nothing is pending");
            answered += 1;
            assert!(answered <= MAX_ANSWERS, "runaway run: {:?}", self.seen());
            let outcome = answer(&req);
            assert!(
                self.answer(&req.id.to_string(), outcome),
                "{} was not pending",
                req.id
            );
            queue.extend(self.step());
        }
        self
    }

    /// Each request as `"id kind: text"` (see [`describe`]).
    pub fn seen(&self) -> Vec<String> {
        self.log.iter().map(describe).collect()
    }

    /// The ids of every request, in order.
    pub fn ids(&self) -> Vec<String> {
        self.log.iter().map(|r| r.id.to_string()).collect()
    }

    /// The session requests, in order.
    pub fn sessions(&self) -> Vec<&SessionAsk> {
        self.log
            .iter()
            .filter_map(|r| match &r.ask {
                Ask::Session(s) => Some(s),
                _ => None,
            })
            .collect()
    }

    /// The outputs of a finished run, as a JSON object; panics if the run did not finish.
    pub fn outputs(&self) -> serde_json::Value {
        match &self.outcome {
            Some(Ok(outputs)) => serde_json::Value::Object(
                outputs
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
            other => panic!("the run did not finish: {other:?}"),
        }
    }

    /// The error of a failed run; panics if the run did not fail.
    pub fn error(&self) -> &RuntimeError {
        match &self.outcome {
            Some(Err(e)) => e,
            other => panic!("the run did not fail: {other:?}"),
        }
    }
}

/// The text a request is about: a session's prompt, a condition, a choice's criteria, an
/// input's name, a conversion's text.
pub fn text(req: &Request) -> &str {
    match &req.ask {
        Ask::Session(s) => &s.prompt,
        Ask::Evaluate(e) => &e.condition,
        Ask::Choose(c) => &c.criteria,
        Ask::Input(i) => &i.name,
        Ask::Convert(c) => &c.text,
        // The machine asks for whole sessions; turns, tool calls and permissions belong to
        // the runner's agent loops.
        Ask::Turn(_) | Ask::Tool(_) | Ask::Permission(_) => "",
    }
}

/// A request as one line: `"0:0 session: Say hi"`, `"0:1 evaluate: done"`,
/// `"0:2 choose: which [a|b]"`, `"0:3 input: name (question)"`, `"0:4 convert list: text"`.
pub fn describe(req: &Request) -> String {
    let what = match &req.ask {
        Ask::Session(s) if s.resume => format!("resume: {}", s.prompt),
        Ask::Session(s) => format!("session: {}", s.prompt),
        Ask::Evaluate(e) => format!("evaluate: {}", e.condition),
        Ask::Choose(c) => format!("choose: {} [{}]", c.criteria, c.options.join("|")),
        Ask::Input(i) => format!("input: {} ({})", i.name, i.question),
        Ask::Convert(c) => format!("convert {:?}: {}", c.shape, c.text),
        other => format!("{}", other.kind()),
    };
    format!("{} {what}", req.id)
}

/// Text as a session's answer.
pub fn reply(s: &str) -> Outcome {
    Ok(Answer::Session(SessionAnswer::text(s)))
}

/// A failure.
pub fn fail(why: &str) -> Outcome {
    Err(Failure(why.to_string()))
}

/// Answers every session with `"<prompt> done"`, every condition with true, every choice
/// with the first option; panics on anything else.
pub fn echo(req: &Request) -> Outcome {
    Ok(match &req.ask {
        // A persistent agent remembers every prompt it was given.
        Ask::Session(s) if s.persistent => Answer::Session(SessionAnswer {
            text: format!("{} done", s.prompt),
            memory: Some(match &s.memory {
                Some(m) => format!("{m}; {}", s.prompt),
                None => s.prompt.clone(),
            }),
        }),
        Ask::Session(s) => Answer::Session(SessionAnswer::text(format!("{} done", s.prompt))),
        Ask::Evaluate(_) => Answer::Evaluate(true),
        Ask::Choose(_) => Answer::Choose(0),
        other => panic!("unexpected request {other:?}"),
    })
}

/// A session's context as (label, value) pairs.
pub fn ctx(s: &SessionAsk) -> Vec<(String, String)> {
    s.context
        .iter()
        .map(|l| (l.label.clone(), l.value.clone()))
        .collect()
}

/// A session's permission rules as (kind, values) pairs.
pub fn perms(s: &SessionAsk) -> Vec<(String, Vec<String>)> {
    s.permissions
        .iter()
        .map(|p| (p.kind.clone(), p.values.clone()))
        .collect()
}
