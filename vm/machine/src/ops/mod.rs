//! The instruction handlers, one module per family: [`data`] (moving and computing values),
//! [`control`] (jumps, loops, `try`, errors), [`calls`] (blocks, imported programs, inputs
//! and outputs), [`ask`] (instructions that ask a model or a person), [`fork`] (parallel
//! branches and their join).

mod ask;
mod calls;
mod control;
mod data;
mod fork;

use super::fiber::{FiberId, Frame, FrameRef};
use super::Machine;
use crate::value::ErrorValue;
use bytecode_spec::verify::Verified;
use bytecode_spec::Code;
use bytecode_spec::{Module, Op};
use std::cell::RefMut;
use std::sync::Arc;

/// What the fiber does after an instruction.
pub(super) enum Flow {
    /// Run the next instruction.
    Next,
    /// The fiber waits (for an answer or a join).
    Block,
    /// The fiber ended.
    End,
}

pub(super) type OpResult = Result<Flow, ErrorValue>;

/// Where an instruction runs: the fiber, its current frame, and the frame's module.
struct At<'a> {
    f: FiberId,
    frame: &'a FrameRef,
    m: &'a Module,
}

/// An error raised by an operation on the wrong kind of value (E204).
fn type_error(message: impl Into<String>) -> ErrorValue {
    ErrorValue::new(Code::E204, message)
}

/// The error of an instruction handed to a handler of another family (the dispatch below
/// makes this impossible; it is an error rather than a panic all the same).
fn misrouted(op: &Op) -> ErrorValue {
    ErrorValue::new(Code::E215, format!("{op:?} reached the wrong handler"))
}

/// Register `r` as an index into a frame's registers.
fn ix(r: bytecode_spec::Reg) -> usize {
    r.as_u32() as usize
}

impl Machine {
    /// Runs the instruction at fiber `f`'s program counter in `frame`.
    pub(super) fn step(&mut self, f: FiberId, art: &Arc<Verified>, frame: &FrameRef) -> OpResult {
        let mut fr: RefMut<Frame> = frame.borrow_mut();
        let m = &art.modules[fr.module as usize];
        let Some(op) = m.funcs[fr.func].code.get(fr.pc as usize) else {
            return Err(ErrorValue::new(
                Code::E215,
                "control fell off the end of a function",
            ));
        };
        fr.pc += 1;
        let at = At { f, frame, m };
        match op {
            Op::LoadConst { .. }
            | Op::Move { .. }
            | Op::GetUp { .. }
            | Op::SetUp { .. }
            | Op::Format { .. }
            | Op::MakeList { .. }
            | Op::MakeRecord { .. }
            | Op::Binary { .. }
            | Op::Not { .. }
            | Op::Neg { .. }
            | Op::GetField { .. }
            | Op::GetIndex { .. } => self.data(at, fr, op),
            Op::Jump { .. }
            | Op::JumpIf { .. }
            | Op::JumpIfNot { .. }
            | Op::Switch { .. }
            | Op::ForNext { .. }
            | Op::RepeatNext { .. }
            | Op::LoopNext { .. }
            | Op::TryEnter { .. }
            | Op::TryExit
            | Op::EndFinally { .. }
            | Op::Throw { .. }
            | Op::Rethrow { .. }
            | Op::Assert { .. } => self.control(fr, op),
            Op::Call { .. }
            | Op::Return { .. }
            | Op::SetBlockOutput { .. }
            | Op::Invoke { .. }
            | Op::LoadInput { .. }
            | Op::SetOutput { .. } => self.calls(at, fr, op),
            Op::Convert { .. }
            | Op::Session { .. }
            | Op::Evaluate { .. }
            | Op::Choose { .. }
            | Op::Ask { .. } => self.ask(at, fr, op),
            Op::Fork { .. } | Op::ForkEach { .. } | Op::Join { .. } => self.fork(at, fr, op),
        }
    }
}
