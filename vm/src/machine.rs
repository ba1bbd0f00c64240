//! The interpreter: a deterministic state machine with no async inside it.
//!
//! [`Machine::run`] runs every ready fiber until it blocks or ends and returns the requests
//! that appeared; [`Machine::complete`] hands an answer to the fiber that asked. Fibers are
//! scheduled in a fixed order and request ids derive from fiber lineage and a per-fiber
//! count, so a run replayed with the same answers repeats exactly.

use crate::convert;
use crate::request::{Reply, Request, RequestId, RequestKind, SessionRequest};
use crate::snapshot::{FiberView, ForkView, FrameView, LoopView, Snapshot};
use crate::trace::Event;
use crate::value::{ErrorValue, Value};
use bytecode_spec::*;
use cranelift_entity::EntityRef;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

/// Limits that turn runaway programs into clean errors.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Loop iterations across the whole run.
    pub iterations: u64,
    /// Nested frames (block recursion and imports), counting those of the fibers that
    /// forked a branch: recursion through `parallel` nests too.
    pub depth: usize,
    /// Parallel branches alive at once, nested ones included.
    pub fibers: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            iterations: 1_000_000,
            depth: 256,
            fibers: 100_000,
        }
    }
}

/// An error that ended the run, with where it happened.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeError {
    /// What went wrong.
    pub message: String,
    /// The program (module) name.
    pub module: String,
    /// 1-based source line (0 if unknown).
    pub line: u32,
    /// The source line's text.
    pub statement: String,
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "{}.prose:{}: {}\n    {}",
                self.module,
                self.line,
                self.message,
                self.statement.trim()
            )
        } else {
            write!(f, "{}: {}", self.module, self.message)
        }
    }
}

/// What [`Machine::run`] found.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Fibers wait for these new requests (and no longer need the withdrawn ones).
    Waiting {
        /// New requests, in a deterministic order.
        requests: Vec<Request>,
        /// Requests of cancelled fibers.
        withdrawn: Vec<RequestId>,
    },
    /// The program finished; its outputs in declaration order.
    Finished(Vec<(String, Value)>),
    /// The program failed.
    Failed(RuntimeError),
}

type FrameRef = Rc<RefCell<Frame>>;
type InstRef = Rc<RefCell<Instance>>;

/// One running program (the main one, or an invoked import).
struct Instance {
    module: u32,
    /// The execution id of this invocation (0 for the program run): its binding files live
    /// in a directory of their own.
    exec: u32,
    outputs: Vec<Value>,
    inputs: FxHashMap<u32, Value>,
    main: Option<FrameRef>,
}

enum Ret {
    Fiber,
    Call(Reg),
    Invoke(Reg),
}

struct Handler {
    catch: Option<Pc>,
    finally: Option<Pc>,
    err: Reg,
    pending: Reg,
    in_catch: bool,
}

struct Frame {
    inst: InstRef,
    module: u32,
    func: FuncId,
    regs: Vec<Value>,
    link: Option<FrameRef>,
    handlers: Vec<Handler>,
    outputs: Vec<(Arc<str>, Value)>,
    pc: Pc,
    ret: Ret,
    /// The execution id of the block invocation this frame belongs to (0 at the top level;
    /// fork branches share their parent's), which scopes its binding files.
    exec: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Ready,
    Waiting,
    Done,
    Failed,
    Cancelled,
}

#[derive(Clone, Copy)]
enum Expect {
    /// A session's answer; for a persistent agent, where its memory is kept.
    Session(Option<(u32, AgentId)>),
    Bool,
    Choice(usize),
    Value,
    Shape(Shape),
}

enum Wait {
    Nothing,
    Request {
        id: RequestId,
        dst: Reg,
        expect: Expect,
    },
    Join {
        group: usize,
        dst: Reg,
    },
}

struct Fiber {
    lineage: String,
    seq: u32,
    forks: u32,
    stack: Vec<FrameRef>,
    state: State,
    wait: Wait,
    group: Option<(usize, usize)>,
    owned: Vec<usize>,
    last_answer: Option<Arc<str>>,
    /// Frames below this fiber's stack: those of the fibers that forked it, which wait.
    base: usize,
}

struct Group {
    module: u32,
    fork: ForkId,
    parent: usize,
    children: Vec<usize>,
    results: Vec<Option<Result<Value, Arc<ErrorValue>>>>,
    finished: usize,
    successes: usize,
    first_error: Option<Arc<ErrorValue>>,
    outcome: Option<Result<Value, Arc<ErrorValue>>>,
}

/// The interpreter.
pub struct Machine {
    artifact: Arc<Artifact>,
    fibers: Vec<Fiber>,
    groups: Vec<Group>,
    ready: VecDeque<usize>,
    pending: FxHashMap<RequestId, usize>,
    new_requests: Vec<Request>,
    withdrawn: Vec<RequestId>,
    events: Vec<Event>,
    limits: Limits,
    iterations: u64,
    main: InstRef,
    failure: Option<RuntimeError>,
    /// Branch fibers neither finished nor cancelled.
    live: usize,
    /// Whether trace events are recorded (off when nobody reads them).
    trace: bool,
    /// Execution ids handed out to block calls and program invocations so far.
    execs: u32,
    /// Persistent agents' memory, by module and agent.
    memory: FxHashMap<(u32, AgentId), String>,
    /// `program:line` strings of request sites, built once each.
    sites: FxHashMap<(u32, u32), String>,
}

enum Flow {
    Next,
    Block,
    End,
}

type OpResult = Result<Flow, ErrorValue>;

/// The session reply match above only binds the two session variants.
fn unreachable_reply() -> (String, Option<String>) {
    (String::new(), None)
}

fn err(message: impl Into<String>) -> ErrorValue {
    ErrorValue {
        message: message.into(),
        location: None,
    }
}

impl Machine {
    /// A machine about to run `artifact`'s main program with top-level `inputs`. Fails if a
    /// parameter input is missing.
    pub fn new(
        artifact: Arc<Artifact>,
        inputs: &FxHashMap<String, Value>,
        limits: Limits,
    ) -> Result<Machine, RuntimeError> {
        let m = &artifact.modules[0];
        let mut given = FxHashMap::default();
        let mut missing = Vec::new();
        for (id, inp) in m.inputs.iter() {
            if !inp.parameter {
                continue;
            }
            let name = &m.strings[inp.name];
            match inputs.get(name) {
                Some(v) => {
                    given.insert(id.as_u32(), v.clone());
                }
                None => missing.push(name.clone()),
            }
        }
        if !missing.is_empty() {
            return Err(RuntimeError {
                message: format!(
                    "missing input(s): {} (pass --input NAME=VALUE)",
                    missing.join(", ")
                ),
                module: m.name.clone(),
                line: 0,
                statement: String::new(),
            });
        }
        let inst = Rc::new(RefCell::new(Instance {
            module: 0,
            exec: 0,
            outputs: vec![Value::Null; m.outputs.len()],
            inputs: given,
            main: None,
        }));
        let mut machine = Machine {
            artifact: artifact.clone(),
            fibers: Vec::new(),
            groups: Vec::new(),
            ready: VecDeque::new(),
            pending: FxHashMap::default(),
            new_requests: Vec::new(),
            withdrawn: Vec::new(),
            events: vec![Event::ProgramStart {
                name: m.name.clone(),
            }],
            limits,
            iterations: 0,
            main: inst.clone(),
            failure: None,
            live: 0,
            trace: true,
            execs: 0,
            memory: FxHashMap::default(),
            sites: FxHashMap::default(),
        };
        let frame = machine.new_frame(&inst, 0, m.entry, None, Ret::Fiber, 0);
        inst.borrow_mut().main = Some(frame.clone());
        machine.fibers.push(Fiber {
            lineage: "0".into(),
            seq: 0,
            forks: 0,
            stack: vec![frame],
            state: State::Ready,
            wait: Wait::Nothing,
            group: None,
            owned: Vec::new(),
            last_answer: None,
            base: 0,
        });
        machine.ready.push_back(0);
        Ok(machine)
    }

    /// Turns trace events on or off (on by default).
    pub fn set_trace(&mut self, on: bool) {
        self.trace = on;
    }

    /// Trace events since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Number of fibers waiting for an answer.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    fn new_frame(
        &self,
        inst: &InstRef,
        module: u32,
        func: FuncId,
        link: Option<FrameRef>,
        ret: Ret,
        exec: u32,
    ) -> FrameRef {
        let nregs = self.artifact.modules[module as usize].funcs[func].nregs as usize;
        Rc::new(RefCell::new(Frame {
            inst: inst.clone(),
            module,
            func,
            regs: vec![Value::Null; nregs],
            link,
            handlers: Vec::new(),
            outputs: Vec::new(),
            pc: 0,
            ret,
            exec,
        }))
    }

    /// Runs every ready fiber until each blocks or ends.
    pub fn run(&mut self) -> Step {
        while let Some(f) = self.ready.pop_front() {
            if self.fibers[f].state == State::Ready {
                self.run_fiber(f);
            }
        }
        match self.fibers[0].state {
            State::Done => {
                let inst = self.main.borrow();
                let m = &self.artifact.modules[0];
                let outputs = m
                    .outputs
                    .iter()
                    .map(|(id, o)| (m.strings[o.name].clone(), inst.outputs[id.index()].clone()))
                    .collect();
                Step::Finished(outputs)
            }
            State::Failed | State::Cancelled => {
                Step::Failed(self.failure.clone().unwrap_or_else(|| RuntimeError {
                    message: "the program failed".into(),
                    module: self.artifact.modules[0].name.clone(),
                    line: 0,
                    statement: String::new(),
                }))
            }
            _ => {
                if self.pending.is_empty() && self.new_requests.is_empty() {
                    return Step::Failed(RuntimeError {
                        message: "internal error: no fiber can make progress".into(),
                        module: self.artifact.modules[0].name.clone(),
                        line: 0,
                        statement: String::new(),
                    });
                }
                Step::Waiting {
                    requests: std::mem::take(&mut self.new_requests),
                    withdrawn: std::mem::take(&mut self.withdrawn),
                }
            }
        }
    }
}

impl Machine {
    /// Gives the persistent agent `agent` of the program run (module 0) the memory it had
    /// before this run (a `persist: project`, `user` or path agent's `memory.md`). Returns
    /// false when the program has no persistent agent of that name.
    pub fn preload_memory(&mut self, agent: &str, memory: String) -> bool {
        let m = &self.artifact.modules[0];
        let Some((id, _)) = m
            .agents
            .iter()
            .find(|(_, a)| a.persist != Persist::None && m.strings[a.name] == agent)
        else {
            return false;
        };
        self.memory.insert((0, id), memory);
        true
    }

    /// Where the run is now: live fibers' call stacks (at most [`Snapshot::MAX_FIBERS`]) with
    /// the loops each frame is in, and the forks waiting for their branches.
    pub fn snapshot(&self) -> Snapshot {
        let live: Vec<&Fiber> = self
            .fibers
            .iter()
            .filter(|f| matches!(f.state, State::Ready | State::Waiting))
            .collect();
        let fibers = live
            .iter()
            .take(Snapshot::MAX_FIBERS)
            .map(|f| FiberView {
                lineage: f.lineage.clone(),
                status: match (&f.state, &f.wait) {
                    (State::Waiting, Wait::Request { id, .. }) => format!("waiting for {id}"),
                    (State::Waiting, Wait::Join { .. }) => "joining".into(),
                    _ => "running".into(),
                },
                frames: f
                    .stack
                    .iter()
                    .map(|fr| self.frame_view(&fr.borrow()))
                    .collect(),
            })
            .collect();
        let forks = self
            .groups
            .iter()
            .filter(|g| g.outcome.is_none())
            .map(|g| {
                let line = self.fibers[g.parent]
                    .stack
                    .last()
                    .map_or(0, |fr| self.frame_view(&fr.borrow()).line);
                let desc = &self.artifact.modules[g.module as usize].forks[g.fork];
                ForkView {
                    module: g.module,
                    line,
                    strategy: format!("{:?}", desc.strategy).to_lowercase(),
                    branches: g.children.len(),
                    succeeded: g.successes,
                    finished: g.finished,
                }
            })
            .collect();
        Snapshot {
            fibers,
            forks,
            more_fibers: live.len().saturating_sub(Snapshot::MAX_FIBERS),
        }
    }

    /// Describes one frame: where it is and the loops it is inside.
    fn frame_view(&self, fr: &Frame) -> FrameView {
        let m = &self.artifact.modules[fr.module as usize];
        let func = &m.funcs[fr.func];
        let at = fr.pc.saturating_sub(1) as usize;
        let line_of = |pc: usize| func.locs.get(pc).map_or(0, |l| l.line);
        let int = |reg: Reg| match fr.regs.get(reg.index()) {
            Some(Value::Int(i)) => Some(*i),
            _ => None,
        };
        let loops = func
            .code
            .iter()
            .enumerate()
            .filter_map(|(h, op)| {
                let (kind, counter, max, exit) = match op {
                    Op::ForNext {
                        list,
                        counter,
                        exit,
                        ..
                    } => {
                        let len = match fr.regs.get(list.index()) {
                            Some(Value::List(items)) => Some(items.len() as i64),
                            _ => None,
                        };
                        ("for", *counter, len, *exit)
                    }
                    Op::RepeatNext {
                        count,
                        counter,
                        exit,
                        ..
                    } => ("repeat", *counter, int(*count), *exit),
                    Op::LoopNext {
                        counter, max, exit, ..
                    } => ("loop", *counter, max.and_then(int), *exit),
                    _ => return None,
                };
                (h < at && at < exit as usize).then(|| LoopView {
                    line: line_of(h),
                    kind,
                    iteration: int(counter).unwrap_or(0),
                    max,
                })
            })
            .collect();
        FrameView {
            module: fr.module,
            program: m.name.clone(),
            function: m.strings[func.name].clone(),
            exec: fr.exec,
            line: line_of(at),
            loops,
        }
    }

    /// Whether the answer about to land in `dst` of fiber `f`'s current frame is kept under a
    /// name: the next instruction moves it into a named variable (here or in an enclosing
    /// frame), makes it an output, or returns it (`output session ...` as a block's result).
    fn captured(&self, f: usize, dst: Reg) -> bool {
        let Some(frame) = self.fibers[f].stack.last() else {
            return false;
        };
        let fr = frame.borrow();
        let func = &self.artifact.modules[fr.module as usize].funcs[fr.func];
        match func.code.get(fr.pc as usize) {
            Some(Op::Move { dst: d, src }) if *src == dst => {
                func.vars.binary_search_by_key(d, |(r, _)| *r).is_ok()
            }
            Some(
                Op::SetUp { src, .. }
                | Op::SetOutput { src, .. }
                | Op::SetBlockOutput { src, .. }
                | Op::Return { src },
            ) => *src == dst,
            _ => false,
        }
    }

    /// Hands the answer to request `id` to the fiber that asked. Unknown ids (withdrawn, or
    /// answered already) are ignored and reported as `false`.
    pub fn complete(&mut self, id: &str, reply: Reply) -> bool {
        let Some(f) = self.pending.remove(id) else {
            return false;
        };
        let Wait::Request { dst, expect, .. } =
            std::mem::replace(&mut self.fibers[f].wait, Wait::Nothing)
        else {
            return false;
        };
        self.fibers[f].state = State::Ready;
        let value = match (reply, expect) {
            (Reply::Failed(msg), _) => Err(err(msg)),
            (reply @ (Reply::Text(_) | Reply::Remembered { .. }), Expect::Session(key)) => {
                let (t, memory) = match reply {
                    Reply::Remembered { text, memory } => (text, Some(memory)),
                    Reply::Text(text) => (text, None),
                    _ => unreachable_reply(),
                };
                if let (Some(key), Some(memory)) = (key, memory) {
                    if self.trace {
                        let m = &self.artifact.modules[key.0 as usize];
                        self.events.push(Event::Memory {
                            module: key.0,
                            agent: m.strings[m.agents[key.1].name].clone(),
                            id: id.to_string(),
                            memory: memory.clone(),
                            answer: t.clone(),
                        });
                    }
                    self.memory.insert(key, memory);
                }
                if self.trace {
                    let bound = self.captured(f, dst);
                    self.events.push(Event::Answer {
                        id: id.to_string(),
                        text: t.clone(),
                        bound,
                    });
                }
                let t: Arc<str> = Arc::from(t);
                self.fibers[f].last_answer = Some(t.clone());
                Ok(Value::Text(t))
            }
            (Reply::Bool(b), Expect::Bool) => {
                self.events.push(Event::Flow {
                    id: id.to_string(),
                    result: b,
                });
                Ok(Value::Bool(b))
            }
            (Reply::Choice(i), Expect::Choice(n)) if i < n => Ok(Value::Int(i as i64)),
            (Reply::Choice(i), Expect::Choice(n)) => {
                Err(err(format!("the driver chose option {i} of {n}")))
            }
            (Reply::Value(v), Expect::Value) => Ok(v),
            (Reply::Value(v), Expect::Shape(shape)) => match convert::local(&v, shape) {
                Some(v) => Ok(v),
                None => Err(err(format!(
                    "the driver's conversion is {} where {shape:?} was asked",
                    v.kind()
                ))),
            },
            (Reply::Text(t), Expect::Shape(shape)) => {
                match convert::local(&Value::text(t.as_str()), shape) {
                    Some(v) => Ok(v),
                    None => Err(err(format!(
                        "the driver's conversion {t:?} is not a {shape:?}"
                    ))),
                }
            }
            (Reply::Text(t), Expect::Value) => Ok(Value::text(t)),
            (Reply::Remembered { .. }, _) => Err(err(
                "the driver sent a memory update for a request that is not a session",
            )),
            (other, _) => Err(err(format!(
                "the driver answered {other:?} to a different kind of request"
            ))),
        };
        match value {
            Ok(v) => {
                if let Some(frame) = self.fibers[f].stack.last() {
                    frame.borrow_mut().regs[dst.index()] = v;
                }
                self.ready.push_back(f);
            }
            Err(e) => {
                self.raise(f, e);
                if self.fibers[f].state == State::Ready {
                    self.ready.push_back(f);
                }
            }
        }
        true
    }

    fn location(&self, frame: &Frame) -> Option<(String, u32)> {
        let m = &self.artifact.modules[frame.module as usize];
        let f = &m.funcs[frame.func];
        let pc = frame.pc.saturating_sub(1) as usize;
        f.locs.get(pc).map(|l| (m.name.clone(), l.line))
    }

    /// Raises `e` in fiber `f`: the innermost handler takes it, or frames unwind; a fiber with
    /// no handler left fails.
    fn raise(&mut self, f: usize, mut e: ErrorValue) {
        if e.location.is_none() {
            if let Some(frame) = self.fibers[f].stack.last() {
                e.location = self.location(&frame.borrow());
            }
        }
        let e = Arc::new(e);
        while let Some(frame) = self.fibers[f].stack.last().cloned() {
            let mut fr = frame.borrow_mut();
            while let Some(h) = fr.handlers.last_mut() {
                if !h.in_catch {
                    if let Some(c) = h.catch {
                        h.in_catch = true;
                        let r = h.err;
                        fr.regs[r.index()] = Value::Error(e.clone());
                        fr.pc = c;
                        self.events.push(Event::Catch {
                            message: e.message.clone(),
                        });
                        self.fibers[f].state = State::Ready;
                        return;
                    }
                }
                let h = fr.handlers.pop().expect("a handler");
                if let Some(fin) = h.finally {
                    fr.regs[h.pending.index()] = Value::Error(e.clone());
                    fr.pc = fin;
                    self.fibers[f].state = State::Ready;
                    return;
                }
            }
            drop(fr);
            let popped = self.fibers[f].stack.pop();
            if let Some(p) = popped {
                if matches!(p.borrow().ret, Ret::Call(_)) {
                    self.events.push(Event::FramePop {
                        depth: self.fibers[f].stack.len(),
                    });
                }
            }
        }
        self.fibers[f].state = State::Failed;
        self.finish_fiber(f, Err(e));
    }

    fn finish_fiber(&mut self, f: usize, result: Result<Value, Arc<ErrorValue>>) {
        // A finished fiber asks nothing more: release what it held.
        let fiber = &mut self.fibers[f];
        fiber.stack = Vec::new();
        fiber.lineage = String::new();
        fiber.last_answer = None;
        if let Some((g, i)) = self.fibers[f].group {
            self.live -= 1;
            self.child_finished(g, i, result);
        } else if f == 0 {
            if let Err(e) = result {
                let (module, line) = e.location.clone().unwrap_or_default();
                let statement = self
                    .artifact
                    .modules
                    .iter()
                    .find(|m| m.name == module)
                    .and_then(|m| m.source.lines().nth(line.saturating_sub(1) as usize))
                    .unwrap_or_default()
                    .to_string();
                self.failure = Some(RuntimeError {
                    message: e.message.clone(),
                    module: if module.is_empty() {
                        self.artifact.modules[0].name.clone()
                    } else {
                        module
                    },
                    line,
                    statement,
                });
            }
        }
    }

    /// Cancels fiber `f` and everything it started; its outstanding request is withdrawn.
    fn cancel(&mut self, f: usize) {
        if matches!(
            self.fibers[f].state,
            State::Done | State::Failed | State::Cancelled
        ) {
            return;
        }
        self.fibers[f].state = State::Cancelled;
        if self.fibers[f].group.is_some() {
            self.live -= 1;
        }
        if let Wait::Request { id, .. } = std::mem::replace(&mut self.fibers[f].wait, Wait::Nothing)
        {
            self.pending.remove(&id);
            if let Some(pos) = self.new_requests.iter().position(|r| r.id == id) {
                self.new_requests.remove(pos);
            } else {
                self.withdrawn.push(id);
            }
        }
        for g in std::mem::take(&mut self.fibers[f].owned) {
            let children = self.groups[g].children.clone();
            for c in children {
                self.cancel(c);
            }
        }
        self.fibers[f].stack.clear();
    }

    fn child_finished(&mut self, g: usize, i: usize, result: Result<Value, Arc<ErrorValue>>) {
        if self.groups[g].outcome.is_some() {
            return;
        }
        let (strategy, count, on_fail) = {
            let d =
                &self.artifact.modules[self.groups[g].module as usize].forks[self.groups[g].fork];
            (d.strategy, d.count, d.on_fail)
        };
        let group = &mut self.groups[g];
        group.finished += 1;
        let failed = result.is_err();
        if let Err(e) = &result {
            group.first_error.get_or_insert_with(|| e.clone());
        } else {
            group.successes += 1;
        }
        group.results[i] = Some(result);
        let n = group.children.len();
        let all_done = group.finished == n;
        let outcome: Option<Result<(), Arc<ErrorValue>>> = if failed && on_fail == OnFail::FailFast
        {
            group.first_error.clone().map(Err)
        } else {
            let enough = match strategy {
                Strategy::All => all_done,
                Strategy::First => group.successes >= 1,
                Strategy::Any => group.successes >= count as usize,
            };
            let impossible = match strategy {
                Strategy::All => false,
                Strategy::First => all_done && group.successes == 0,
                Strategy::Any => group.successes + (n - group.finished) < count as usize,
            };
            if enough
                && !(strategy == Strategy::All
                    && on_fail == OnFail::Continue
                    && group.first_error.is_some())
            {
                Some(Ok(()))
            } else if enough || impossible {
                match on_fail {
                    OnFail::Ignore => Some(Ok(())),
                    _ => Some(Err(group.first_error.clone().unwrap_or_else(|| {
                        Arc::new(err(format!(
                            "only {} of {} branches succeeded",
                            group.successes, n
                        )))
                    }))),
                }
            } else {
                None
            }
        };
        if let Some(o) = outcome {
            self.complete_group(g, o);
        }
    }

    fn complete_group(&mut self, g: usize, o: Result<(), Arc<ErrorValue>>) {
        let outcome = o.map(|()| {
            Value::List(Arc::new(
                self.groups[g]
                    .results
                    .iter()
                    .map(|r| match r {
                        Some(Ok(v)) => v.clone(),
                        _ => Value::Null,
                    })
                    .collect(),
            ))
        });
        self.groups[g].outcome = Some(outcome.clone());
        for c in self.groups[g].children.clone() {
            self.cancel(c);
        }
        self.events.push(Event::Joined {
            succeeded: self.groups[g].successes,
            branches: self.groups[g].children.len(),
        });
        let parent = self.groups[g].parent;
        if let Wait::Join { group, dst } = self.fibers[parent].wait {
            if group == g && self.fibers[parent].state == State::Waiting {
                self.fibers[parent].wait = Wait::Nothing;
                self.fibers[parent].state = State::Ready;
                match outcome {
                    Ok(v) => {
                        if let Some(frame) = self.fibers[parent].stack.last() {
                            frame.borrow_mut().regs[dst.index()] = v;
                        }
                    }
                    Err(e) => self.raise(parent, (*e).clone()),
                }
                if self.fibers[parent].state == State::Ready {
                    self.ready.push_back(parent);
                }
            }
        }
    }
}

/// Follows `depth` static links from `frame`.
fn up(frame: &FrameRef, depth: u8) -> Option<FrameRef> {
    let mut cur = frame.clone();
    for _ in 0..depth {
        let next = cur.borrow().link.clone()?;
        cur = next;
    }
    Some(cur)
}

fn follow(v: Value, path: &[PathStep], m: &Module) -> Value {
    let mut v = v;
    for step in path {
        let src = convert::local(
            &v,
            match step {
                PathStep::Field(_) => Shape::Record,
                PathStep::Index(_) => Shape::List,
            },
        )
        .unwrap_or(Value::Null);
        v = match (step, &src) {
            (PathStep::Field(f), Value::Record(_)) => {
                src.field(&m.strings[*f]).cloned().unwrap_or(Value::Null)
            }
            (PathStep::Index(i), Value::List(l)) => {
                l.get(*i as usize).cloned().unwrap_or(Value::Null)
            }
            _ => Value::Null,
        };
    }
    v
}

fn compare(op: BinOp, a: &Value, b: &Value) -> Result<bool, ErrorValue> {
    use std::cmp::Ordering;
    let num = |v: &Value| match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Text(t) => t.trim().parse::<f64>().ok(),
        _ => None,
    };
    if matches!(op, BinOp::Eq | BinOp::Ne) {
        let eq = match (num(a), num(b)) {
            (Some(x), Some(y)) if !(matches!(a, Value::Text(_)) && matches!(b, Value::Text(_))) => {
                x == y
            }
            _ => match (a, b) {
                (Value::Text(x), Value::Text(y)) => x.trim() == y.trim(),
                _ => a == b,
            },
        };
        return Ok(if op == BinOp::Eq { eq } else { !eq });
    }
    let ord = match (num(a), num(b)) {
        (Some(x), Some(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        _ => match (a, b) {
            (Value::Text(x), Value::Text(y)) => x.cmp(y),
            _ => {
                return Err(err(format!(
                    "cannot compare {} with {}",
                    a.kind(),
                    b.kind()
                )))
            }
        },
    };
    Ok(match op {
        BinOp::Lt => ord == Ordering::Less,
        BinOp::Le => ord != Ordering::Greater,
        BinOp::Gt => ord == Ordering::Greater,
        _ => ord != Ordering::Less,
    })
}

fn add(a: Value, b: &Value) -> Result<Value, ErrorValue> {
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => {
            Value::Int(x.checked_add(*y).ok_or_else(|| err("integer overflow"))?)
        }
        (Value::Int(x), Value::Float(y)) => Value::Float(x as f64 + y),
        (Value::Float(x), Value::Int(y)) => Value::Float(x + *y as f64),
        (Value::Float(x), Value::Float(y)) => Value::Float(x + y),
        (Value::List(mut l), other) => {
            // In place when nothing else holds the list (appends in loops stay linear).
            let v = Arc::make_mut(&mut l);
            match other {
                Value::List(more) => v.extend(more.iter().cloned()),
                x => v.push(x.clone()),
            }
            Value::List(l)
        }
        (Value::Null, Value::List(l)) => Value::List(l.clone()),
        (Value::Text(t), other) => Value::text(format!("{t}{}", other.display())),
        (other, Value::Text(t)) => Value::text(format!("{}{t}", other.display())),
        (a, b) => return Err(err(format!("cannot add {} and {}", a.kind(), b.kind()))),
    })
}

impl Machine {
    fn render(&self, fr: &Frame, tpl: TplId) -> String {
        let m = &self.artifact.modules[fr.module as usize];
        let mut out = String::new();
        for part in &m.templates[tpl].parts {
            match part {
                TplPart::Text(s) => out.push_str(&m.strings[*s]),
                TplPart::Var {
                    depth, reg, path, ..
                } => {
                    let v = if *depth == 0 {
                        fr.regs[reg.index()].clone()
                    } else {
                        let link = fr.link.clone();
                        let target = link.and_then(|l| up(&l, depth - 1));
                        target
                            .map(|t| t.borrow().regs[reg.index()].clone())
                            .unwrap_or_default()
                    };
                    out.push_str(&follow(v, path, m).display());
                }
            }
        }
        out
    }

    fn request(
        &mut self,
        f: usize,
        fr: &Frame,
        kind: RequestKind,
        dst: Reg,
        expect: Expect,
    ) -> Flow {
        let fiber = &mut self.fibers[f];
        let id = format!("{}:{}", fiber.lineage, fiber.seq);
        fiber.seq += 1;
        fiber.state = State::Waiting;
        fiber.wait = Wait::Request {
            id: id.clone(),
            dst,
            expect,
        };
        let m = &self.artifact.modules[fr.module as usize];
        let line = m.funcs[fr.func]
            .locs
            .get(fr.pc.saturating_sub(1) as usize)
            .map_or(0, |l| l.line);
        let site = self
            .sites
            .entry((fr.module, line))
            .or_insert_with(|| format!("{}:{line}", m.name))
            .clone();
        self.pending.insert(id.clone(), f);
        self.new_requests.push(Request { id, site, kind });
        Flow::Block
    }

    /// How deeply fiber `f`'s current frame is nested, counting the frames of the fibers
    /// that forked it (they wait at their `Join`).
    fn depth(&self, f: usize) -> usize {
        self.fibers[f].base + self.fibers[f].stack.len()
    }

    fn spawn(&mut self, parent: usize, g: usize, i: usize, frame: FrameRef) -> usize {
        let lineage = format!(
            "{}/{}.{i}",
            self.fibers[parent].lineage, self.fibers[parent].forks
        );
        self.fibers.push(Fiber {
            lineage,
            seq: 0,
            forks: 0,
            stack: vec![frame],
            state: State::Ready,
            wait: Wait::Nothing,
            group: Some((g, i)),
            owned: Vec::new(),
            last_answer: self.fibers[parent].last_answer.clone(),
            base: self.depth(parent),
        });
        self.live += 1;
        let id = self.fibers.len() - 1;
        self.ready.push_back(id);
        id
    }

    fn run_fiber(&mut self, f: usize) {
        let art = self.artifact.clone();
        while self.fibers[f].state == State::Ready {
            let Some(frame) = self.fibers[f].stack.last().cloned() else {
                return;
            };
            let result = self.step(f, &art, &frame);
            match result {
                Ok(Flow::Next) => {}
                Ok(Flow::Block) => return,
                Ok(Flow::End) => {}
                Err(e) => self.raise(f, e),
            }
        }
    }

    /// Records a binding event when `reg` of function `func` (in module `module`, frame
    /// execution id `exec`, in the invocation `instance`) is a named variable; `line` is the
    /// assigning statement's.
    fn note_binding(&mut self, at: (u32, FuncId, u32, u32), reg: Reg, line: u32, value: &Value) {
        let (module, func, exec, instance) = at;
        let m = &self.artifact.modules[module as usize];
        let vars = &m.funcs[func].vars;
        if let Ok(i) = vars.binary_search_by_key(&reg, |(r, _)| *r) {
            self.events.push(Event::Binding {
                name: m.strings[vars[i].1].clone(),
                value: value.display(),
                module,
                line,
                scope: exec,
                instance,
            });
        }
    }

    fn step(&mut self, f: usize, art: &Arc<Artifact>, frame: &FrameRef) -> OpResult {
        let mut fr = frame.borrow_mut();
        let m = &art.modules[fr.module as usize];
        let code = &m.funcs[fr.func].code;
        let Some(op) = code.get(fr.pc as usize) else {
            return Err(err("control fell off the end of a function"));
        };
        fr.pc += 1;
        let r = |r: Reg| r.index();
        match op {
            Op::LoadConst { dst, c } => {
                fr.regs[r(*dst)] = match &m.consts[*c] {
                    Const::Null => Value::Null,
                    Const::Bool(b) => Value::Bool(*b),
                    Const::Int(i) => Value::Int(*i),
                    Const::Float(x) => Value::Float(*x),
                    Const::Str(s) => Value::text(m.strings[*s].as_str()),
                };
            }
            Op::Move { dst, src } => {
                let v = fr.regs[r(*src)].clone();
                if self.trace {
                    let line = m.funcs[fr.func].locs[fr.pc as usize - 1].line;
                    let instance = fr.inst.borrow().exec;
                    self.note_binding((fr.module, fr.func, fr.exec, instance), *dst, line, &v);
                }
                fr.regs[r(*dst)] = v;
            }
            Op::GetUp { dst, depth, reg } => {
                let link = fr.link.clone().ok_or_else(|| err("no enclosing frame"))?;
                let target = up(&link, depth - 1).ok_or_else(|| err("no enclosing frame"))?;
                let v = target.borrow().regs[r(*reg)].clone();
                fr.regs[r(*dst)] = v;
            }
            Op::SetUp { depth, reg, src } => {
                let v = fr.regs[r(*src)].clone();
                let link = fr.link.clone().ok_or_else(|| err("no enclosing frame"))?;
                let target = up(&link, depth - 1).ok_or_else(|| err("no enclosing frame"))?;
                if self.trace {
                    let line = m.funcs[fr.func].locs[fr.pc as usize - 1].line;
                    let t = target.borrow();
                    let at = (t.module, t.func, t.exec, t.inst.borrow().exec);
                    drop(t);
                    self.note_binding(at, *reg, line, &v);
                }
                target.borrow_mut().regs[r(*reg)] = v;
            }
            Op::Format { dst, tpl } => {
                let s = self.render(&fr, *tpl);
                fr.regs[r(*dst)] = Value::text(s);
            }
            Op::MakeList { dst, first, len } => {
                let items = fr.regs[r(*first)..r(*first) + *len as usize].to_vec();
                fr.regs[r(*dst)] = Value::List(Arc::new(items));
            }
            Op::MakeRecord { dst, first, keys } => {
                let keys = &m.keysets[*keys];
                let pairs = keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| {
                        (
                            Arc::from(m.strings[*k].as_str()),
                            fr.regs[r(*first) + i].clone(),
                        )
                    })
                    .collect();
                fr.regs[r(*dst)] = Value::record(pairs);
            }
            Op::Binary { op, dst, a, b } => {
                let v = match op {
                    BinOp::Add => {
                        // Take the left operand when it is overwritten, so a list can grow in
                        // place. Only a list: appending to one cannot fail, and a failed `add`
                        // must leave the variable as it was (a `catch` may read it).
                        let left = if dst == a && matches!(fr.regs[r(*a)], Value::List(_)) {
                            std::mem::take(&mut fr.regs[r(*a)])
                        } else {
                            fr.regs[r(*a)].clone()
                        };
                        let right = fr.regs[r(*b)].clone();
                        add(left, &right)?
                    }
                    BinOp::Sub => match (&fr.regs[r(*a)], &fr.regs[r(*b)]) {
                        (Value::Int(x), Value::Int(y)) => {
                            Value::Int(x.checked_sub(*y).ok_or_else(|| err("integer overflow"))?)
                        }
                        (x, y) => {
                            match (convert::local(x, Shape::Int), convert::local(y, Shape::Int)) {
                                (Some(Value::Int(x)), Some(Value::Int(y))) => Value::Int(
                                    x.checked_sub(y).ok_or_else(|| err("integer overflow"))?,
                                ),
                                _ => {
                                    return Err(err(format!(
                                        "cannot subtract {} from {}",
                                        y.kind(),
                                        x.kind()
                                    )))
                                }
                            }
                        }
                    },
                    cmp => Value::Bool(compare(*cmp, &fr.regs[r(*a)], &fr.regs[r(*b)])?),
                };
                fr.regs[r(*dst)] = v;
            }
            Op::Not { dst, src } => match &fr.regs[r(*src)] {
                Value::Bool(b) => fr.regs[r(*dst)] = Value::Bool(!b),
                v => return Err(err(format!("`not` needs a boolean, not {}", v.kind()))),
            },
            Op::Neg { dst, src } => match convert::local(&fr.regs[r(*src)], Shape::Int) {
                Some(Value::Int(i)) => {
                    fr.regs[r(*dst)] =
                        Value::Int(i.checked_neg().ok_or_else(|| err("integer overflow"))?)
                }
                _ => return Err(err(format!("cannot negate {}", fr.regs[r(*src)].kind()))),
            },
            Op::GetField { dst, src, name } => {
                let v = match &fr.regs[r(*src)] {
                    Value::Record(_) => fr.regs[r(*src)]
                        .field(&m.strings[*name])
                        .cloned()
                        .unwrap_or(Value::Null),
                    Value::Error(e) if m.strings[*name] == "message" => {
                        Value::text(e.message.as_str())
                    }
                    Value::Null => Value::Null,
                    v => {
                        return Err(err(format!(
                            "cannot read field `{}` of {}",
                            m.strings[*name],
                            v.kind()
                        )))
                    }
                };
                fr.regs[r(*dst)] = v;
            }
            Op::GetIndex { dst, src, index } => {
                let v = match (&fr.regs[r(*src)], &fr.regs[r(*index)]) {
                    (Value::List(l), Value::Int(i)) => {
                        let i = if *i < 0 { l.len() as i64 + i } else { *i };
                        l.get(i as usize).cloned().ok_or_else(|| {
                            err(format!(
                                "index {i} is out of range for a list of {}",
                                l.len()
                            ))
                        })?
                    }
                    (rec @ Value::Record(_), Value::Text(k)) => {
                        rec.field(k).cloned().unwrap_or(Value::Null)
                    }
                    (a, b) => {
                        return Err(err(format!("cannot index {} with {}", a.kind(), b.kind())))
                    }
                };
                fr.regs[r(*dst)] = v;
            }
            Op::Convert { dst, src, shape } => match convert::local(&fr.regs[r(*src)], *shape) {
                Some(v) => fr.regs[r(*dst)] = v,
                None => {
                    let text = fr.regs[r(*src)].display();
                    return Ok(self.request(
                        f,
                        &fr,
                        RequestKind::Convert {
                            text,
                            shape: *shape,
                        },
                        *dst,
                        Expect::Shape(*shape),
                    ));
                }
            },
            Op::Jump { target } => fr.pc = *target,
            Op::JumpIf { cond, target } | Op::JumpIfNot { cond, target } => {
                let want = matches!(op, Op::JumpIf { .. });
                match fr.regs[r(*cond)] {
                    Value::Bool(b) if b == want => fr.pc = *target,
                    Value::Bool(_) => {}
                    ref v => {
                        return Err(err(format!(
                            "a condition must be a boolean, not {}",
                            v.kind()
                        )))
                    }
                }
            }
            Op::Switch { index, table } => match fr.regs[r(*index)] {
                Value::Int(i) if (i as usize) < m.tables[*table].len() && i >= 0 => {
                    fr.pc = m.tables[*table][i as usize]
                }
                ref v => return Err(err(format!("no option {}", v.display()))),
            },
            Op::ForNext {
                list,
                counter,
                item,
                index,
                exit,
            } => {
                let Value::List(l) = fr.regs[r(*list)].clone() else {
                    return Err(err(format!(
                        "cannot iterate over {}",
                        fr.regs[r(*list)].kind()
                    )));
                };
                let i = match fr.regs[r(*counter)] {
                    Value::Int(i) => i as usize,
                    _ => 0,
                };
                if i < l.len() {
                    self.tick()?;
                    fr.regs[r(*item)] = l[i].clone();
                    if let Some(ix) = index {
                        fr.regs[r(*ix)] = Value::Int(i as i64);
                    }
                    fr.regs[r(*counter)] = Value::Int(i as i64 + 1);
                } else {
                    fr.pc = *exit;
                }
            }
            Op::RepeatNext {
                count,
                counter,
                index,
                exit,
            } => {
                let n = match fr.regs[r(*count)] {
                    Value::Int(n) => n,
                    ref v => {
                        return Err(err(format!(
                            "repeat needs an integer count, not {}",
                            v.kind()
                        )))
                    }
                };
                let i = match fr.regs[r(*counter)] {
                    Value::Int(i) => i,
                    _ => 0,
                };
                if i < n {
                    self.tick()?;
                    if let Some(ix) = index {
                        fr.regs[r(*ix)] = Value::Int(i);
                    }
                    fr.regs[r(*counter)] = Value::Int(i + 1);
                } else {
                    fr.pc = *exit;
                }
            }
            Op::LoopNext {
                counter,
                max,
                index,
                exit,
            } => {
                let i = match fr.regs[r(*counter)] {
                    Value::Int(i) => i,
                    _ => 0,
                };
                let limit = match max.map(|m| fr.regs[r(m)].clone()) {
                    Some(Value::Int(n)) => Some(n),
                    Some(v) => {
                        return Err(err(format!(
                            "a loop's max must be an integer, not {}",
                            v.kind()
                        )))
                    }
                    None => None,
                };
                if limit.is_some_and(|n| i >= n) {
                    self.events.push(Event::LoopExit {
                        iterations: i as u64,
                        reason: "max reached",
                    });
                    fr.pc = *exit;
                } else {
                    self.tick()?;
                    self.events.push(Event::LoopIteration {
                        iteration: i as u64 + 1,
                        max: limit,
                    });
                    if let Some(ix) = index {
                        fr.regs[r(*ix)] = Value::Int(i);
                    }
                    fr.regs[r(*counter)] = Value::Int(i + 1);
                }
            }
            Op::TryEnter {
                catch,
                finally,
                err: e,
                pending,
            } => {
                self.events.push(Event::TryEnter);
                fr.handlers.push(Handler {
                    catch: *catch,
                    finally: *finally,
                    err: *e,
                    pending: *pending,
                    in_catch: false,
                });
            }
            Op::TryExit => {
                fr.handlers.pop();
            }
            Op::EndFinally { pending } => {
                if let Value::Error(e) = &fr.regs[r(*pending)] {
                    return Err((**e).clone());
                }
            }
            Op::Throw { msg } => {
                let message = match &fr.regs[r(*msg)] {
                    Value::Null => "error thrown".to_string(),
                    v => v.display(),
                };
                return Err(err(message));
            }
            Op::Rethrow { err: e } => {
                return Err(match &fr.regs[r(*e)] {
                    Value::Error(e) => (**e).clone(),
                    v => err(v.display()),
                });
            }
            Op::Assert { cond, msg } => match fr.regs[r(*cond)] {
                Value::Bool(true) => {}
                Value::Bool(false) => {
                    let message = msg
                        .map(|m| fr.regs[r(m)].display())
                        .unwrap_or_else(|| "assertion failed".into());
                    return Err(err(message));
                }
                ref v => {
                    return Err(err(format!(
                        "an assertion needs a boolean, not {}",
                        v.kind()
                    )))
                }
            },
            Op::Call {
                func,
                args,
                argc,
                dst,
            } => {
                if self.depth(f) >= self.limits.depth {
                    return Err(err(format!(
                        "block calls nest deeper than {} (runaway recursion?)",
                        self.limits.depth
                    )));
                }
                let inst = fr.inst.clone();
                let main = inst.borrow().main.clone();
                self.execs += 1;
                let new =
                    self.new_frame(&inst, fr.module, *func, main, Ret::Call(*dst), self.execs);
                {
                    let mut nf = new.borrow_mut();
                    for i in 0..*argc as usize {
                        nf.regs[i] = fr.regs[r(*args) + i].clone();
                    }
                }
                drop(fr);
                self.events.push(Event::FramePush {
                    block: m.strings[m.funcs[*func].name].clone(),
                    depth: self.fibers[f].stack.len(),
                });
                self.fibers[f].stack.push(new);
            }
            Op::Return { src } => {
                let v = fr.regs[r(*src)].clone();
                let outputs = std::mem::take(&mut fr.outputs);
                let ret = std::mem::replace(&mut fr.ret, Ret::Fiber);
                let inst = fr.inst.clone();
                drop(fr);
                self.fibers[f].stack.pop();
                match ret {
                    Ret::Fiber => {
                        self.fibers[f].state = State::Done;
                        self.finish_fiber(f, Ok(v));
                        return Ok(Flow::End);
                    }
                    Ret::Call(dst) => {
                        self.events.push(Event::FramePop {
                            depth: self.fibers[f].stack.len(),
                        });
                        if let Some(caller) = self.fibers[f].stack.last() {
                            let mut c = caller.borrow_mut();
                            c.regs[r(dst)] = v;
                            c.regs[r(dst) + 1] = Value::record(outputs);
                        }
                    }
                    Ret::Invoke(dst) => {
                        let i = inst.borrow();
                        let callee = &art.modules[i.module as usize];
                        let rec = callee
                            .outputs
                            .iter()
                            .map(|(id, o)| {
                                (
                                    Arc::from(callee.strings[o.name].as_str()),
                                    i.outputs[id.index()].clone(),
                                )
                            })
                            .collect();
                        self.events.push(Event::ImportDone {
                            program: callee.name.clone(),
                        });
                        if let Some(caller) = self.fibers[f].stack.last() {
                            caller.borrow_mut().regs[r(dst)] = Value::record(rec);
                        }
                    }
                }
            }
            Op::SetBlockOutput { name, src } => {
                let v = fr.regs[r(*src)].clone();
                let key: Arc<str> = Arc::from(m.strings[*name].as_str());
                fr.outputs.retain(|(k, _)| *k != key);
                fr.outputs.push((key, v));
            }
            Op::Invoke { prog, args, dst } => {
                if self.depth(f) >= self.limits.depth {
                    return Err(err("imported programs nest too deeply"));
                }
                let target = m.programs[*prog].module;
                let callee = &art.modules[target as usize];
                let mut inputs = FxHashMap::default();
                for (k, (id, _)) in callee
                    .inputs
                    .iter()
                    .filter(|(_, i)| i.parameter)
                    .enumerate()
                {
                    inputs.insert(id.as_u32(), fr.regs[r(*args) + k].clone());
                }
                self.execs += 1;
                let parent = fr.inst.borrow().exec;
                let inst = Rc::new(RefCell::new(Instance {
                    module: target,
                    exec: self.execs,
                    outputs: vec![Value::Null; callee.outputs.len()],
                    inputs,
                    main: None,
                }));
                let new = self.new_frame(
                    &inst,
                    target,
                    callee.entry,
                    None,
                    Ret::Invoke(*dst),
                    self.execs,
                );
                inst.borrow_mut().main = Some(new.clone());
                drop(fr);
                self.events.push(Event::Import {
                    program: callee.name.clone(),
                    module: target,
                    exec: self.execs,
                    parent,
                });
                self.fibers[f].stack.push(new);
            }
            Op::LoadInput { dst, input } => {
                let v = fr
                    .inst
                    .borrow()
                    .inputs
                    .get(&input.as_u32())
                    .cloned()
                    .unwrap_or(Value::Null);
                fr.regs[r(*dst)] = v;
            }
            Op::SetOutput { output, src } => {
                let v = fr.regs[r(*src)].clone();
                self.events.push(Event::Output {
                    name: m.strings[m.outputs[*output].name].clone(),
                    value: v.display(),
                });
                fr.inst.borrow_mut().outputs[output.index()] = v;
            }
            Op::Session { dst, desc, ctx } => {
                let sd = &m.sessions[*desc];
                let render = |t: Option<TplId>| t.map(|t| self.render(&fr, t));
                let prompt = render(sd.prompt).unwrap_or_default();
                let system = render(sd.system);
                let context = match &fr.regs[r(*ctx)] {
                    Value::List(items) => sd
                        .context_labels
                        .iter()
                        .zip(items.iter())
                        .map(|(l, v)| (m.strings[*l].clone(), v.display()))
                        .collect(),
                    _ => Vec::new(),
                };
                let permissions = sd
                    .permissions
                    .iter()
                    .map(|p| {
                        let values = match &p.value {
                            PermissionValue::Word(w) => vec![m.strings[*w].clone()],
                            PermissionValue::Patterns(ts) => {
                                ts.iter().map(|t| self.render(&fr, *t)).collect()
                            }
                        };
                        (m.strings[p.kind].clone(), values)
                    })
                    .collect();
                let persistent = sd
                    .agent
                    .filter(|a| m.agents[*a].persist != Persist::None)
                    .map(|a| (fr.module, a));
                let memory = match (sd.kind, persistent) {
                    (SessionKind::Resume, Some(key)) => match self.memory.get(&key) {
                        Some(mem) => Some(mem.clone()),
                        None => {
                            let name = &m.strings[m.agents[key.1].name];
                            return Err(err(format!(
                                "E018: `resume: {name}` but {name} has no memory yet; use `session: {name}` for its first session"
                            )));
                        }
                    },
                    _ => None,
                };
                let req = SessionRequest {
                    persistent: persistent.is_some(),
                    memory,
                    resume: sd.kind == SessionKind::Resume,
                    agent: sd.agent.map(|a| m.strings[m.agents[a].name].clone()),
                    label: sd.label.map(|l| m.strings[l].clone()),
                    prompt,
                    system,
                    model: sd.model.map(|s| m.strings[s].clone()),
                    context,
                    permissions,
                    skills: sd.skills.iter().map(|s| m.strings[*s].clone()).collect(),
                    retry: sd.retry,
                    backoff: sd.backoff,
                };
                if self.trace {
                    let fiber = &self.fibers[f];
                    self.events.push(Event::Session {
                        id: format!("{}:{}", fiber.lineage, fiber.seq),
                        module: fr.module,
                        line: sd.line,
                        text: req.label.clone().unwrap_or_else(|| req.prompt.clone()),
                    });
                }
                return Ok(self.request(
                    f,
                    &fr,
                    RequestKind::Session(Box::new(req)),
                    *dst,
                    Expect::Session(persistent),
                ));
            }
            Op::Evaluate { dst, cond } => {
                let condition = self.render(&fr, *cond);
                self.events.push(Event::Evaluate {
                    condition: condition.clone(),
                });
                let context = self.fibers[f].last_answer.as_deref().map(String::from);
                return Ok(self.request(
                    f,
                    &fr,
                    RequestKind::Evaluate { condition, context },
                    *dst,
                    Expect::Bool,
                ));
            }
            Op::Choose { dst, choice } => {
                let ch = &m.choices[*choice];
                let criteria = self.render(&fr, ch.criteria);
                let options: Vec<String> =
                    ch.options.iter().map(|o| self.render(&fr, *o)).collect();
                let n = options.len();
                return Ok(self.request(
                    f,
                    &fr,
                    RequestKind::Choose { criteria, options },
                    *dst,
                    Expect::Choice(n),
                ));
            }
            Op::Ask { dst, input } => {
                let inp = &m.inputs[*input];
                let name = m.strings[inp.name].clone();
                let question = inp
                    .description
                    .map(|d| self.render(&fr, d))
                    .unwrap_or_else(|| name.clone());
                return Ok(self.request(
                    f,
                    &fr,
                    RequestKind::Input { name, question },
                    *dst,
                    Expect::Value,
                ));
            }
            Op::Fork { fork, handle } | Op::ForkEach { fork, handle, .. } => {
                let desc = &m.forks[*fork];
                let items: Vec<Option<(Value, usize)>> = match op {
                    Op::ForkEach { list, .. } => match &fr.regs[r(*list)] {
                        Value::List(l) => l
                            .iter()
                            .cloned()
                            .enumerate()
                            .map(|(i, v)| Some((v, i)))
                            .collect(),
                        v => return Err(err(format!("cannot fan out over {}", v.kind()))),
                    },
                    _ => vec![None; desc.branches.len()],
                };
                if self.live + items.len() > self.limits.fibers {
                    return Err(err(format!(
                        "more than {} parallel branches at once (runaway recursion?)",
                        self.limits.fibers
                    )));
                }
                let g = self.groups.len();
                fr.regs[r(*handle)] = Value::Group(g as u32);
                let inst = fr.inst.clone();
                let module = fr.module;
                let exec = fr.exec;
                drop(fr);
                self.groups.push(Group {
                    module,
                    fork: *fork,
                    parent: f,
                    children: Vec::with_capacity(items.len()),
                    results: vec![None; items.len()],
                    finished: 0,
                    successes: 0,
                    first_error: None,
                    outcome: None,
                });
                self.events.push(Event::Parallel {
                    branches: items.len(),
                    strategy: format!("{:?}", desc.strategy).to_lowercase(),
                });
                for (i, item) in items.into_iter().enumerate() {
                    let func = if item.is_some() {
                        desc.branches[0]
                    } else {
                        desc.branches[i]
                    };
                    let child =
                        self.new_frame(&inst, module, func, Some(frame.clone()), Ret::Fiber, exec);
                    if let Some((v, ix)) = item {
                        let mut c = child.borrow_mut();
                        c.regs[0] = v;
                        c.regs[1] = Value::Int(ix as i64);
                    }
                    let id = self.spawn(f, g, i, child);
                    self.groups[g].children.push(id);
                }
                self.fibers[f].forks += 1;
                self.fibers[f].owned.push(g);
                if self.groups[g].children.is_empty() {
                    self.groups[g].outcome = Some(Ok(Value::List(Arc::new(Vec::new()))));
                }
            }
            Op::Join { handle, dst } => {
                let Value::Group(g) = fr.regs[r(*handle)] else {
                    return Err(err("join without a fork"));
                };
                let g = g as usize;
                match self.groups[g].outcome.clone() {
                    Some(Ok(v)) => fr.regs[r(*dst)] = v,
                    Some(Err(e)) => return Err((*e).clone()),
                    None => {
                        drop(fr);
                        self.fibers[f].state = State::Waiting;
                        self.fibers[f].wait = Wait::Join {
                            group: g,
                            dst: *dst,
                        };
                        return Ok(Flow::Block);
                    }
                }
            }
        }
        Ok(Flow::Next)
    }

    /// Counts one loop iteration against the run's limit. Loop steps call it only when the
    /// body is about to run, so the step that finds a loop finished costs nothing.
    fn tick(&mut self) -> Result<(), ErrorValue> {
        self.iterations += 1;
        if self.iterations > self.limits.iterations {
            return Err(err(format!(
                "loops ran more than {} iterations in total (a runaway loop?)",
                self.limits.iterations
            )));
        }
        Ok(())
    }
}
