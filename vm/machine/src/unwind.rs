//! Errors in flight: raising one in a fiber (the innermost `try` takes it, or frames unwind),
//! a fiber ending, and cancelling a fiber with everything it started.

use super::error::{file_label, source_line, RuntimeError};
use super::fiber::{FiberId, Frame, Ret, State, Wait};
use super::Machine;
use crate::trace::Event;
use crate::value::{ErrorValue, Value};
use std::sync::Arc;

impl Machine {
    /// The module and line of the instruction `frame` is executing.
    fn location(&self, frame: &Frame) -> (u32, u32) {
        (frame.module, self.line(frame))
    }

    /// Raises `e` in fiber `f`: the innermost handler takes it, or frames unwind; a fiber with
    /// no handler left fails.
    pub(super) fn raise(&mut self, f: FiberId, mut e: ErrorValue) {
        if e.location.is_none() {
            if let Some(frame) = self.fibers[f].stack.last() {
                e.location = Some(self.location(&frame.borrow()));
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
                        fr.regs[r.as_u32() as usize] = Value::Error(e.clone());
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
                    fr.regs[h.pending.as_u32() as usize] = Value::Error(e.clone());
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

    /// Fiber `f` ended with `result`: its fork group learns of it, or, for the program's
    /// fiber, a failure becomes the run's error.
    pub(super) fn finish_fiber(&mut self, f: FiberId, result: Result<Value, Arc<ErrorValue>>) {
        // A finished fiber asks nothing more: release what it held.
        let fiber = &mut self.fibers[f];
        fiber.stack = Vec::new();
        fiber.last_answer = None;
        if let Some((g, i)) = fiber.group {
            self.live -= 1;
            self.child_finished(g, i, result);
        } else if f == FiberId::root() {
            if let Err(e) = result {
                self.failure = Some(self.runtime_error(&e));
            }
        }
    }

    /// `e` as the error that ends the run: located in its own module, quoting that module's
    /// source line.
    pub(super) fn runtime_error(&self, e: &ErrorValue) -> RuntimeError {
        let (module, line) = e.location.unwrap_or((0, 0));
        let m = &self.artifact.modules[module as usize];
        RuntimeError {
            code: e.code,
            message: e.message.clone(),
            module,
            program: file_label(m),
            line,
            statement: source_line(&m.source, line),
            request: e.request.clone(),
        }
    }

    /// Cancels fiber `f` and everything it started; its outstanding request is withdrawn.
    pub(super) fn cancel(&mut self, f: FiberId) {
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
}
