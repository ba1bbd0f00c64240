//! Fibers and their frames. A fiber is a stack of frames (function, pc, registers) that runs
//! until it asks something or joins its branches; a program invocation is an [`Instance`]
//! whose frames share its inputs and outputs.

use crate::protocol::{Lineage, RequestId};
use crate::value::Value;
use bytecode_spec::{AgentId, FuncId, Pc, Reg, Shape};
use cranelift_entity::entity_impl;
use rustc_hash::FxHashMap;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

/// A fiber's index in the machine (not stable across replays: the lineage is).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct FiberId(u32);
entity_impl!(FiberId, "fiber");

impl FiberId {
    /// The program's own fiber, the first.
    pub fn root() -> FiberId {
        FiberId::from_u32(0)
    }
}

pub(super) type FrameRef = Rc<RefCell<Frame>>;
pub(super) type InstRef = Rc<RefCell<Instance>>;

/// One running program (the main one, or an invoked import).
pub(super) struct Instance {
    pub module: u32,
    /// The execution id of this invocation (0 for the program run): its binding files live
    /// in a directory of their own.
    pub exec: u32,
    pub outputs: Vec<Value>,
    pub inputs: FxHashMap<u32, Value>,
    pub main: Option<FrameRef>,
}

/// Where a frame's result goes when it returns.
pub(super) enum Ret {
    /// It is the fiber's bottom frame: the fiber ends.
    Fiber,
    /// A block call: the value into this register of the caller, its outputs into the next.
    Call(Reg),
    /// A program invocation: its outputs, as a record, into this register of the caller.
    Invoke(Reg),
}

/// A `try` region a frame is in.
pub(super) struct Handler {
    pub catch: Option<Pc>,
    pub finally: Option<Pc>,
    pub err: Reg,
    pub pending: Reg,
    pub in_catch: bool,
}

/// Bytes the registers of a machine's live frames take, shared with the frames: each adds
/// its registers when it is made and takes them back when it is dropped (frames outlive
/// their fibers while branches or an invocation still link to them).
#[derive(Clone, Default)]
pub(super) struct FrameMemory(Rc<Cell<usize>>);

impl FrameMemory {
    /// Adds `bytes`, unless that would pass `limit`; returns the bytes in use either way.
    pub fn take(&self, bytes: usize, limit: usize) -> Result<usize, usize> {
        let now = self.0.get();
        match now.checked_add(bytes) {
            Some(n) if n <= limit => {
                self.0.set(n);
                Ok(n)
            }
            _ => Err(now),
        }
    }

    /// Bytes in use.
    pub fn in_use(&self) -> usize {
        self.0.get()
    }
}

/// The bytes `n` registers take.
pub(super) fn register_bytes(n: usize) -> usize {
    n.saturating_mul(std::mem::size_of::<Value>())
}

/// One activation of a function.
pub(super) struct Frame {
    pub inst: InstRef,
    pub module: u32,
    pub func: FuncId,
    pub regs: Vec<Value>,
    /// The frame this one is lexically nested in (blocks: the program's; branches: the
    /// forking frame).
    pub link: Option<FrameRef>,
    pub handlers: Vec<Handler>,
    /// A block's named outputs.
    pub outputs: Vec<(Arc<str>, Value)>,
    pub pc: Pc,
    pub ret: Ret,
    /// The execution id of the block invocation this frame belongs to (0 at the top level;
    /// fork branches share their parent's), which scopes its binding files.
    pub exec: u32,
    /// Where its registers are counted.
    pub memory: FrameMemory,
}

impl Drop for Frame {
    fn drop(&mut self) {
        let bytes = register_bytes(self.regs.len());
        self.memory.0.set(self.memory.0.get().saturating_sub(bytes));
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum State {
    Ready,
    Waiting,
    Done,
    Failed,
    Cancelled,
}

/// What kind of answer a waiting fiber takes.
#[derive(Clone, Copy)]
pub(super) enum Expect {
    /// A session's answer; for a persistent agent, where its memory is kept.
    Session(Option<(u32, AgentId)>),
    Bool,
    Choice(usize),
    Value,
    Shape(Shape),
}

pub(super) enum Wait {
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

pub(super) struct Fiber {
    pub lineage: Lineage,
    /// Requests asked so far.
    pub seq: u32,
    /// Forks started so far.
    pub forks: u32,
    pub stack: Vec<FrameRef>,
    pub state: State,
    pub wait: Wait,
    /// The fork group and branch this fiber is (none for the program's fiber).
    pub group: Option<(usize, usize)>,
    /// Fork groups this fiber started.
    pub owned: Vec<usize>,
    pub last_answer: Option<Arc<str>>,
    /// Frames below this fiber's stack: those of the fibers that forked it, which wait.
    pub base: usize,
}

impl Fiber {
    /// A ready fiber running `frame`.
    pub fn new(
        lineage: Lineage,
        frame: FrameRef,
        group: Option<(usize, usize)>,
        last_answer: Option<Arc<str>>,
        base: usize,
    ) -> Fiber {
        Fiber {
            lineage,
            seq: 0,
            forks: 0,
            stack: vec![frame],
            state: State::Ready,
            wait: Wait::Nothing,
            group,
            owned: Vec::new(),
            last_answer,
            base,
        }
    }
}

/// Follows `depth` static links from `frame`.
pub(super) fn up(frame: &FrameRef, depth: u8) -> Option<FrameRef> {
    let mut cur = frame.clone();
    for _ in 0..depth {
        let next = cur.borrow().link.clone()?;
        cur = next;
    }
    Some(cur)
}
