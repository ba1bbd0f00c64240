//! The instruction set.
//!
//! Registers are named directly in operands (Lua 5 style). Each function declares how many
//! registers its frame has; a frame may also reach the registers of the frames it is
//! lexically nested in through its static link (`GetUp`/`SetUp`), which is how parallel
//! branches and blocks share the variables declared outside them. Jump targets are indices
//! into the function's code. Instructions marked *suspends* may hand one request to the
//! driver and park the fiber until the answer arrives.

use crate::ids::*;
use serde::{Deserialize, Serialize};

/// An index into a function's code.
pub type Pc = u32;

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinOp {
    /// Integer addition; string concatenation; list concatenation (a list plus a non-list
    /// appends it).
    Add,
    /// Integer subtraction.
    Sub,
    /// Structural equality.
    Eq,
    /// Structural inequality.
    Ne,
    /// Integer or string ordering.
    Lt,
    /// Integer or string ordering.
    Le,
    /// Integer or string ordering.
    Gt,
    /// Integer or string ordering.
    Ge,
}

/// The shape text must take when a program uses it as structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shape {
    /// A list (JSON array, fenced JSON, bulleted or numbered lines).
    List,
    /// A record (JSON object).
    Record,
    /// An integer.
    Int,
    /// A boolean (yes/no, true/false).
    Bool,
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// `dst = consts[c]`.
    LoadConst {
        /// Destination.
        dst: Reg,
        /// The constant.
        c: ConstId,
    },
    /// `dst = src`.
    Move {
        /// Destination.
        dst: Reg,
        /// Source.
        src: Reg,
    },
    /// `dst = reg` of the frame `depth` static links out (`depth >= 1`).
    GetUp {
        /// Destination.
        dst: Reg,
        /// How many static links to follow.
        depth: u8,
        /// Register in that frame.
        reg: Reg,
    },
    /// `reg` of the frame `depth` static links out `= src`.
    SetUp {
        /// How many static links to follow.
        depth: u8,
        /// Register in that frame.
        reg: Reg,
        /// Source.
        src: Reg,
    },
    /// `dst` = the template rendered with the current frame's variables.
    Format {
        /// Destination.
        dst: Reg,
        /// The template.
        tpl: TplId,
    },
    /// `dst = [first, first+1, ..., first+len-1]`.
    MakeList {
        /// Destination.
        dst: Reg,
        /// First element register.
        first: Reg,
        /// Number of elements.
        len: u32,
    },
    /// `dst = {keys[0]: first, keys[1]: first+1, ...}`.
    MakeRecord {
        /// Destination.
        dst: Reg,
        /// First value register.
        first: Reg,
        /// The keys, in register order.
        keys: KeysId,
    },
    /// `dst = a op b`.
    Binary {
        /// The operator.
        op: BinOp,
        /// Destination.
        dst: Reg,
        /// Left operand.
        a: Reg,
        /// Right operand.
        b: Reg,
    },
    /// `dst = not src` (src must be a boolean).
    Not {
        /// Destination.
        dst: Reg,
        /// Operand.
        src: Reg,
    },
    /// `dst = -src` (src must be an integer).
    Neg {
        /// Destination.
        dst: Reg,
        /// Operand.
        src: Reg,
    },
    /// `dst = src.name` (src must be a record).
    GetField {
        /// Destination.
        dst: Reg,
        /// The record.
        src: Reg,
        /// The field.
        name: StrId,
    },
    /// `dst = src[index]` (a list and an integer, or a record and a string).
    GetIndex {
        /// Destination.
        dst: Reg,
        /// The collection.
        src: Reg,
        /// The index.
        index: Reg,
    },
    /// `dst = src` as `shape`: values of that shape pass through; text is parsed locally
    /// (JSON, fenced JSON, bulleted or numbered lists, yes/no, numbers). *Suspends* with a
    /// convert request when local parsing fails.
    Convert {
        /// Destination.
        dst: Reg,
        /// The value.
        src: Reg,
        /// The shape wanted.
        shape: Shape,
    },
    /// Continue at `target`.
    Jump {
        /// Where.
        target: Pc,
    },
    /// Continue at `target` if `cond` is `true` (cond must be a boolean).
    JumpIf {
        /// The condition.
        cond: Reg,
        /// Where.
        target: Pc,
    },
    /// Continue at `target` if `cond` is `false` (cond must be a boolean).
    JumpIfNot {
        /// The condition.
        cond: Reg,
        /// Where.
        target: Pc,
    },
    /// Continue at `tables[table][index]` (index must be an integer in range).
    Switch {
        /// The index.
        index: Reg,
        /// The jump table.
        table: TableId,
    },
    /// One step of a for-each loop, executed at the loop head: if `counter < len(list)`,
    /// sets `item = list[counter]`, `index = counter`, increments `counter` and continues;
    /// otherwise continues at `exit`. The compiler sets `counter = 0` before the loop.
    ForNext {
        /// The list being iterated.
        list: Reg,
        /// The hidden position.
        counter: Reg,
        /// The item variable.
        item: Reg,
        /// The index variable, if the loop names one.
        index: Option<Reg>,
        /// Where the loop ends.
        exit: Pc,
    },
    /// One step of `repeat count`: if `counter < count`, sets `index = counter`, increments
    /// `counter` and continues; otherwise continues at `exit`.
    RepeatNext {
        /// How many iterations (an integer).
        count: Reg,
        /// The hidden position.
        counter: Reg,
        /// The index variable, if the loop names one.
        index: Option<Reg>,
        /// Where the loop ends.
        exit: Pc,
    },
    /// One step of an unbounded `loop`: continues at `exit` when `counter >= max`; raises a
    /// runtime error when the VM's global iteration limit is reached; otherwise sets
    /// `index = counter`, increments `counter` and continues. An `until`/`while` condition is
    /// tested by the instructions that follow.
    LoopNext {
        /// The hidden iteration count.
        counter: Reg,
        /// The `(max: N)` limit, if any (an integer).
        max: Option<Reg>,
        /// The index variable, if the loop names one.
        index: Option<Reg>,
        /// Where the loop ends.
        exit: Pc,
    },
    /// Enters a protected region. An error raised inside it (in this frame or a callee)
    /// stores the error in `err` and continues at `catch`; if there is no `catch`, or the
    /// error is raised while the catch clause runs, stores it in `pending` and continues at
    /// `finally`. Without either, the error propagates.
    TryEnter {
        /// The catch clause.
        catch: Option<Pc>,
        /// The finally clause.
        finally: Option<Pc>,
        /// Receives the error for the catch clause.
        err: Reg,
        /// Receives the error that the finally clause must re-raise.
        pending: Reg,
    },
    /// Leaves the innermost protected region normally.
    TryExit,
    /// Ends a finally clause: re-raises `pending` unless it is null.
    EndFinally {
        /// The pending error, or null.
        pending: Reg,
    },
    /// Raises a new error whose message is `msg` (text, or null for a generic message).
    Throw {
        /// The message.
        msg: Reg,
    },
    /// Raises the error value in `err` again (a bare `throw` in a catch clause).
    Rethrow {
        /// The error.
        err: Reg,
    },
    /// Raises an error with message `msg` (or a generic one) unless `cond` is `true`.
    Assert {
        /// The condition (a boolean).
        cond: Reg,
        /// The message, if any.
        msg: Option<Reg>,
    },
    /// Calls block `func` with arguments in `args, args+1, ...` (`argc` of them). On return,
    /// `dst` holds the block's value and `dst+1` a record of the named outputs it bound.
    /// The callee's static link is the module's main frame.
    Call {
        /// The block.
        func: FuncId,
        /// First argument register.
        args: Reg,
        /// Number of arguments.
        argc: u32,
        /// Receives the value; `dst+1` receives the named outputs.
        dst: Reg,
    },
    /// Returns `src` from the current function (discarding its protected regions).
    Return {
        /// The value.
        src: Reg,
    },
    /// Records a named output of the current block call (visible to the caller).
    SetBlockOutput {
        /// The output's name.
        name: StrId,
        /// The value.
        src: Reg,
    },
    /// Runs imported program `prog` with its inputs in `args, args+1, ...` (in the callee's
    /// input order) in a namespace of its own; `dst` receives a record of its outputs.
    Invoke {
        /// The program.
        prog: ProgId,
        /// First input register.
        args: Reg,
        /// Receives the outputs record.
        dst: Reg,
    },
    /// `dst` = the value the caller provided for top-level input `input`.
    LoadInput {
        /// Destination.
        dst: Reg,
        /// The input.
        input: InputId,
    },
    /// Binds program output `output` to `src` (the last binding wins).
    SetOutput {
        /// The output.
        output: OutputId,
        /// The value.
        src: Reg,
    },
    /// *Suspends*: runs session `desc` (fresh or resume) with context values `ctx` (a list,
    /// labelled by the descriptor); `dst` receives the answer text.
    Session {
        /// Destination.
        dst: Reg,
        /// The session descriptor.
        desc: SessionId,
        /// The context values (a list), labelled by the descriptor's context labels.
        ctx: Reg,
    },
    /// *Suspends*: asks the model to judge the discretion text `cond`; `dst` receives a
    /// boolean.
    Evaluate {
        /// Destination.
        dst: Reg,
        /// The condition text.
        cond: TplId,
    },
    /// *Suspends*: asks the model to pick one option of choice `choice`; `dst` receives the
    /// 0-based index of the option.
    Choose {
        /// Destination.
        dst: Reg,
        /// The choice descriptor.
        choice: ChoiceId,
    },
    /// *Suspends*: asks the host for the mid-program input `input`; `dst` receives the value.
    Ask {
        /// Destination.
        dst: Reg,
        /// The input.
        input: InputId,
    },
    /// Starts one child fiber per branch function of fork `fork`; each child's static link is
    /// the current frame. `handle` receives the group, which a `Join` must wait for.
    Fork {
        /// The fork descriptor.
        fork: ForkId,
        /// Receives the group handle.
        handle: Reg,
    },
    /// Starts one child fiber per element of `list`, each running the fork's body function
    /// with arguments `(item, index)`; `handle` receives the group.
    ForkEach {
        /// The fork descriptor.
        fork: ForkId,
        /// The elements (a list).
        list: Reg,
        /// Receives the group handle.
        handle: Reg,
    },
    /// *Suspends* until the group in `handle` completes by its fork's strategy and failure
    /// policy, cancelling the children still running; `dst` receives the list of branch
    /// values in branch order (null for a branch that failed, was cancelled or did not run).
    Join {
        /// The group handle.
        handle: Reg,
        /// Receives the results.
        dst: Reg,
    },
}

impl Op {
    /// Whether the instruction never continues to the next one.
    pub fn is_terminator(&self) -> bool {
        matches!(
            self,
            Op::Jump { .. }
                | Op::Switch { .. }
                | Op::Throw { .. }
                | Op::Rethrow { .. }
                | Op::Return { .. }
        )
    }

    /// Whether the instruction may hand a request to the driver and park the fiber.
    pub fn suspends(&self) -> bool {
        matches!(
            self,
            Op::Convert { .. }
                | Op::Session { .. }
                | Op::Evaluate { .. }
                | Op::Choose { .. }
                | Op::Ask { .. }
                | Op::Join { .. }
                | Op::Call { .. }
                | Op::Invoke { .. }
        )
    }

    /// The instruction's name as shown by the disassembler.
    pub fn name(&self) -> &'static str {
        match self {
            Op::LoadConst { .. } => "load_const",
            Op::Move { .. } => "move",
            Op::GetUp { .. } => "get_up",
            Op::SetUp { .. } => "set_up",
            Op::Format { .. } => "format",
            Op::MakeList { .. } => "make_list",
            Op::MakeRecord { .. } => "make_record",
            Op::Binary { .. } => "binary",
            Op::Not { .. } => "not",
            Op::Neg { .. } => "neg",
            Op::GetField { .. } => "get_field",
            Op::GetIndex { .. } => "get_index",
            Op::Convert { .. } => "convert",
            Op::Jump { .. } => "jump",
            Op::JumpIf { .. } => "jump_if",
            Op::JumpIfNot { .. } => "jump_if_not",
            Op::Switch { .. } => "switch",
            Op::ForNext { .. } => "for_next",
            Op::RepeatNext { .. } => "repeat_next",
            Op::LoopNext { .. } => "loop_next",
            Op::TryEnter { .. } => "try_enter",
            Op::TryExit => "try_exit",
            Op::EndFinally { .. } => "end_finally",
            Op::Throw { .. } => "throw",
            Op::Rethrow { .. } => "rethrow",
            Op::Assert { .. } => "assert",
            Op::Call { .. } => "call",
            Op::Return { .. } => "return",
            Op::SetBlockOutput { .. } => "set_block_output",
            Op::Invoke { .. } => "invoke",
            Op::LoadInput { .. } => "load_input",
            Op::SetOutput { .. } => "set_output",
            Op::Session { .. } => "session",
            Op::Evaluate { .. } => "evaluate",
            Op::Choose { .. } => "choose",
            Op::Ask { .. } => "ask",
            Op::Fork { .. } => "fork",
            Op::ForkEach { .. } => "fork_each",
            Op::Join { .. } => "join",
        }
    }
}
