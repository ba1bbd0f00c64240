//! The OpenProse interpreter, with no I/O: a deterministic state machine with no async
//! inside it. Its requests go out as values ([`protocol::Request`]) and its answers come back
//! as values ([`protocol::Reply`]); who answers them, and how they are kept, is the runtime's
//! and the stores' business. This crate depends on `bytecode-spec` alone among the project's
//! crates, and touches no file, network or process.
//!
//! [`Machine::run`] runs every ready fiber until it blocks or ends and returns the requests
//! that appeared; [`Machine::complete`] hands a reply to the fiber that asked. Fibers are
//! scheduled in a fixed order and request ids derive from fiber lineage and a per-fiber
//! count, so a run replayed with the same answers repeats exactly.
//!
//! The interpreter's parts: `fiber` (fibers, frames, what a fiber waits for), `ops` (one
//! handler per opcode family), `answers` (replies reaching fibers), `unwind` (raising,
//! catching, failing and cancelling), `join` (fork groups), `view` (snapshots for
//! `state.md`), `error` (runtime errors and their codes), `id` (request ids, below both the
//! values that carry them and the protocol, which names them to the rest of the VM). What it
//! shares with the rest of the VM: [`value`] (runtime values), [`protocol`] (requests,
//! replies and ids),
//! [`trace`] (the events it reports), [`snapshot`] (what a snapshot shows) and [`convert`]
//! (turning an answer's text into the shape asked, locally).

mod answers;
pub mod convert;
mod error;
mod fiber;
mod id;
mod join;
mod ops;
pub mod protocol;
pub mod snapshot;
pub mod trace;
mod unwind;
pub mod value;
mod view;

pub use error::RuntimeError;

use crate::protocol::{Lineage, Request, RequestId, Site};
use crate::trace::Event;
use crate::value::{human_bytes, Bounds, ErrorValue, Value};
use bytecode_spec::verify::Verified;
use bytecode_spec::Code;
use bytecode_spec::{AgentId, Persist};
use cranelift_entity::{EntityRef, PrimaryMap};
use fiber::{
    register_bytes, Fiber, FiberId, Frame, FrameMemory, FrameRef, InstRef, Instance, Ret, State,
    Wait,
};
use join::Group;
use rustc_hash::{FxHashMap, FxHashSet};
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
    /// Bytes the registers of all live frames may take together (a function may declare up
    /// to 65,536 registers, and a fork starts one frame per branch).
    pub frame_bytes: usize,
    /// How large values may grow.
    pub values: Bounds,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            iterations: 1_000_000,
            depth: 256,
            fibers: 100_000,
            frame_bytes: 512 << 20,
            values: Bounds::default(),
        }
    }
}

impl Drop for Machine {
    /// The program's top frame and its instance refer to each other; without this, every
    /// value the program kept at its top level would outlive the machine (in a worker or
    /// `serve`, one program's values per run).
    fn drop(&mut self) {
        if let Ok(mut inst) = self.main.try_borrow_mut() {
            inst.main = None;
        }
    }
}

/// What [`Machine::run`] found.
#[derive(Debug, PartialEq)]
pub enum Reached {
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

/// The interpreter.
pub struct Machine {
    artifact: Arc<Verified>,
    fibers: PrimaryMap<FiberId, Fiber>,
    groups: Vec<Group>,
    ready: VecDeque<FiberId>,
    pending: FxHashMap<RequestId, FiberId>,
    new_requests: Vec<Request>,
    withdrawn: Vec<RequestId>,
    events: Vec<Event>,
    limits: Limits,
    /// Relaxed runtime rules are errors (`--strict`).
    strict: bool,
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
    /// How each module is named in request sites, built once.
    programs: Vec<Arc<str>>,
    /// Warnings already reported, by code and statement (module, line).
    warned: FxHashSet<(Code, u32, u32)>,
    /// Bytes the live frames' registers take.
    frame_memory: FrameMemory,
    /// Variables updated in place since the events were last taken: the index of the
    /// binding event written for each, whose value is filled in when they are taken.
    updated: Vec<(usize, FrameRef, bytecode_spec::Reg)>,
    /// Once one [`Machine::run`] has made this many new requests, it returns them and leaves
    /// the other ready fibers for the next (see [`Machine::set_request_cap`]).
    request_cap: usize,
}

impl Machine {
    /// A machine about to run `artifact`'s main program with top-level `inputs`. Fails if a
    /// parameter input is missing (E200) or an input is given that the program does not
    /// declare (E201).
    pub fn new(
        artifact: Arc<Verified>,
        inputs: &FxHashMap<String, Value>,
        limits: Limits,
    ) -> Result<Machine, RuntimeError> {
        Machine::for_program(artifact, 0, inputs, limits)
    }

    /// A machine about to run module `module` of `artifact` (an imported program run on its
    /// own, as a skill) with `inputs`, checked as [`Machine::new`] checks them.
    pub fn for_program(
        artifact: Arc<Verified>,
        module: u32,
        inputs: &FxHashMap<String, Value>,
        limits: Limits,
    ) -> Result<Machine, RuntimeError> {
        let Some(m) = artifact.modules.get(module as usize) else {
            return Err(RuntimeError::unlocated(
                Code::E215,
                format!("the artifact has no module {module}"),
            ));
        };
        let programs: Vec<Arc<str>> = artifact
            .modules
            .iter()
            .map(|m| Arc::from(error::site_label(m)))
            .collect();
        let top_error = |code: Code, message: String| RuntimeError {
            code,
            message,
            module,
            program: error::file_label(m),
            line: 0,
            statement: String::new(),
            request: None,
        };
        let declared: Vec<&str> = m
            .inputs
            .values()
            .map(|i| m.strings[i.name].as_str())
            .collect();
        let mut unknown: Vec<&String> = inputs
            .keys()
            .filter(|k| !declared.contains(&k.as_str()))
            .collect();
        unknown.sort();
        if let Some(name) = unknown.first() {
            let hint = bytecode_spec::suggest::closest(name, declared.iter().copied())
                .map(|c| format!("; did you mean `{c}`?"))
                .unwrap_or_default();
            let known = if declared.is_empty() {
                "it declares no inputs".to_string()
            } else {
                format!("it declares {}", declared.join(", "))
            };
            return Err(top_error(
                Code::E201,
                format!("the program has no input `{name}` ({known}){hint}"),
            ));
        }
        let mut given = FxHashMap::default();
        let mut missing = Vec::new();
        for (id, inp) in m.inputs.iter() {
            let name = &m.strings[inp.name];
            match inputs.get(name) {
                Some(v) => {
                    given.insert(id.as_u32(), v.clone());
                }
                None if inp.parameter => missing.push(name.clone()),
                None => {}
            }
        }
        if !missing.is_empty() {
            return Err(top_error(
                Code::E200,
                format!("missing input(s): {}", missing.join(", ")),
            ));
        }
        let inst = Rc::new(RefCell::new(Instance {
            module,
            exec: 0,
            outputs: vec![Value::Null; m.outputs.len()],
            inputs: given,
            main: None,
        }));
        let mut machine = Machine {
            artifact: artifact.clone(),
            fibers: PrimaryMap::new(),
            groups: Vec::new(),
            ready: VecDeque::new(),
            pending: FxHashMap::default(),
            new_requests: Vec::new(),
            withdrawn: Vec::new(),
            events: vec![Event::ProgramStart {
                name: m.name.clone(),
            }],
            limits,
            strict: false,
            iterations: 0,
            main: inst.clone(),
            failure: None,
            live: 0,
            trace: true,
            execs: 0,
            memory: FxHashMap::default(),
            programs,
            warned: FxHashSet::default(),
            frame_memory: FrameMemory::default(),
            updated: Vec::new(),
            request_cap: usize::MAX,
        };
        let frame = machine
            .new_frame(&inst, module, m.entry, None, Ret::Fiber, 0)
            .map_err(|e| top_error(e.code, e.message))?;
        inst.borrow_mut().main = Some(frame.clone());
        let root = machine
            .fibers
            .push(Fiber::new(Lineage::root(), frame, None, None, 0));
        machine.ready.push_back(root);
        Ok(machine)
    }

    /// Turns trace events on or off (on by default).
    pub fn set_trace(&mut self, on: bool) {
        self.trace = on;
    }

    /// Makes relaxed runtime rules errors (`--strict`): a persistent agent's first
    /// `resume:` fails with E018 instead of starting a fresh session with a warning.
    pub fn set_strict(&mut self, on: bool) {
        self.strict = on;
    }

    /// Trace events since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        let max = self.limits.values.bytes;
        for (i, frame, reg) in self.updated.drain(..) {
            if let Some(Event::Binding { value, .. }) = self.events.get_mut(i) {
                let v = &frame.borrow().regs[reg.as_u32() as usize];
                *value = v
                    .render(max)
                    .unwrap_or_else(|_| format!("(a value larger than {})", human_bytes(max)));
            }
        }
        std::mem::take(&mut self.events)
    }

    /// Number of fibers waiting for an answer.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

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

    /// A frame for `func` of `module`, if its registers fit in what the live frames may
    /// take ([`Limits::frame_bytes`]; E218 otherwise).
    fn new_frame(
        &self,
        inst: &InstRef,
        module: u32,
        func: bytecode_spec::FuncId,
        link: Option<FrameRef>,
        ret: Ret,
        exec: u32,
    ) -> Result<FrameRef, ErrorValue> {
        let nregs = self.artifact.modules[module as usize].funcs[func].nregs as usize;
        self.reserve_frames(register_bytes(nregs))?;
        Ok(Rc::new(RefCell::new(Frame {
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
            memory: self.frame_memory.clone(),
        })))
    }

    /// Counts `bytes` of new registers against [`Limits::frame_bytes`] (the frame that holds
    /// them gives them back when dropped).
    fn reserve_frames(&self, bytes: usize) -> Result<(), ErrorValue> {
        self.frame_memory
            .take(bytes, self.limits.frame_bytes)
            .map(drop)
            .map_err(|in_use| self.frames_error(in_use, bytes))
    }

    /// Whether frames for `bytes` more registers would fit now (nothing is counted): a fork
    /// checks all its branches' frames before it makes any.
    fn frames_fit(&self, bytes: usize) -> Result<(), ErrorValue> {
        let in_use = self.frame_memory.in_use();
        match in_use.checked_add(bytes) {
            Some(n) if n <= self.limits.frame_bytes => Ok(()),
            _ => Err(self.frames_error(in_use, bytes)),
        }
    }

    fn frames_error(&self, in_use: usize, bytes: usize) -> ErrorValue {
        ErrorValue::new(
            Code::E218,
            format!(
                "the program's frames would need more than {} of registers ({} in use, {} more asked; --max-frame-memory)",
                human_bytes(self.limits.frame_bytes),
                human_bytes(in_use),
                human_bytes(bytes)
            ),
        )
    }

    /// The site of the instruction `frame` is executing.
    fn site(&self, frame: &Frame) -> Site {
        Site {
            module: frame.module,
            line: self.line(frame),
            program: self.programs[frame.module as usize].clone(),
        }
    }

    /// The source line of the instruction `frame` is executing (0 if unknown).
    fn line(&self, frame: &Frame) -> u32 {
        self.artifact.modules[frame.module as usize].funcs[frame.func]
            .locs
            .get(frame.pc.saturating_sub(1) as usize)
            .map_or(0, |l| l.line)
    }

    /// Makes [`Machine::run`] return once it has made `cap` new requests (at least one),
    /// leaving the fibers not run yet ready for the next call ([`Machine::has_ready`]). A
    /// runner that sends requests a few at a time sets it, so that a fan-out of a million
    /// branches holds a few thousand requests at once rather than a million. Unlimited
    /// unless set.
    pub fn set_request_cap(&mut self, cap: usize) {
        self.request_cap = cap.max(1);
    }

    /// Whether fibers are ready to run: the last [`Machine::run`] stopped at its request cap.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Runs ready fibers until each blocks or ends, or until the request cap is reached.
    pub fn run(&mut self) -> Reached {
        while self.new_requests.len() < self.request_cap {
            let Some(f) = self.ready.pop_front() else {
                break;
            };
            if self.fibers[f].state == State::Ready {
                self.run_fiber(f);
            }
        }
        match self.fibers[FiberId::root()].state {
            State::Done => {
                let inst = self.main.borrow();
                let m = &self.artifact.modules[inst.module as usize];
                let outputs = m
                    .outputs
                    .iter()
                    .map(|(id, o)| (m.strings[o.name].clone(), inst.outputs[id.index()].clone()))
                    .collect();
                Reached::Finished(outputs)
            }
            State::Failed | State::Cancelled => Reached::Failed(
                self.failure
                    .clone()
                    .unwrap_or_else(|| self.top_error(Code::E215, "the program failed")),
            ),
            _ => {
                if self.pending.is_empty() && self.new_requests.is_empty() && self.ready.is_empty()
                {
                    return Reached::Failed(
                        self.top_error(Code::E215, "no fiber can make progress"),
                    );
                }
                Reached::Waiting {
                    requests: std::mem::take(&mut self.new_requests),
                    withdrawn: std::mem::take(&mut self.withdrawn),
                }
            }
        }
    }

    /// An error of the program run as a whole, not of one of its statements.
    fn top_error(&self, code: Code, message: &str) -> RuntimeError {
        let module = self.main.borrow().module;
        RuntimeError {
            code,
            message: message.into(),
            module,
            program: error::file_label(&self.artifact.modules[module as usize]),
            line: 0,
            statement: String::new(),
            request: None,
        }
    }

    fn run_fiber(&mut self, f: FiberId) {
        let art = self.artifact.clone();
        while self.fibers[f].state == State::Ready {
            let Some(frame) = self.fibers[f].stack.last().cloned() else {
                return;
            };
            match self.step(f, &art, &frame) {
                Ok(ops::Flow::Next | ops::Flow::End) => {}
                Ok(ops::Flow::Block) => return,
                Err(e) => self.raise(f, e),
            }
        }
    }

    /// How deeply fiber `f`'s current frame is nested, counting the frames of the fibers
    /// that forked it (they wait at their `Join`).
    fn depth(&self, f: FiberId) -> usize {
        let fiber = &self.fibers[f];
        fiber.base + fiber.stack.len()
    }

    /// Starts branch `i` of group `g`, forked by fiber `parent`, running `frame`.
    fn spawn(&mut self, parent: FiberId, g: usize, i: usize, frame: FrameRef) -> FiberId {
        let p = &self.fibers[parent];
        let lineage = p.lineage.child(p.forks, i);
        let last = p.last_answer.clone();
        let base = self.depth(parent);
        let id = self
            .fibers
            .push(Fiber::new(lineage, frame, Some((g, i)), last, base));
        self.live += 1;
        self.ready.push_back(id);
        id
    }

    /// Parks fiber `f` on a new request for `ask`, to be answered into `dst` of its current
    /// frame; returns the request's id.
    fn request(
        &mut self,
        f: FiberId,
        fr: &Frame,
        ask: crate::protocol::Ask,
        dst: bytecode_spec::Reg,
        expect: fiber::Expect,
    ) -> RequestId {
        let site = self.site(fr);
        let fiber = &mut self.fibers[f];
        let id = RequestId::new(fiber.lineage.clone(), fiber.seq);
        fiber.seq += 1;
        fiber.state = State::Waiting;
        fiber.wait = Wait::Request {
            id: id.clone(),
            dst,
            expect,
        };
        self.pending.insert(id.clone(), f);
        self.new_requests.push(Request {
            id: id.clone(),
            site,
            ask,
        });
        id
    }

    /// Reports a warning about the statement `fr` executes, once per statement.
    fn warn(&mut self, code: Code, fr: &Frame, message: String) {
        let site = self.site(fr);
        if self.warned.insert((code, site.module, site.line)) {
            self.events.push(Event::Warning {
                code,
                site: site.to_string(),
                message,
            });
        }
    }

    /// The id fiber `f`'s next request will have.
    fn next_id(&self, f: FiberId) -> RequestId {
        let fiber = &self.fibers[f];
        RequestId::new(fiber.lineage.clone(), fiber.seq)
    }

    /// Counts one loop iteration against the run's limit. Loop steps call it only when the
    /// body is about to run, so the step that finds a loop finished costs nothing.
    fn tick(&mut self) -> Result<(), crate::value::ErrorValue> {
        self.iterations += 1;
        if self.iterations > self.limits.iterations {
            return Err(crate::value::ErrorValue::new(
                Code::E207,
                format!(
                    "loops ran more than {} iterations in total (a runaway loop?)",
                    self.limits.iterations
                ),
            ));
        }
        Ok(())
    }
}
