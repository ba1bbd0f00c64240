//! Replies reaching the fibers that asked: an answer becomes a value in the asking register
//! (a failure an error raised there), with the trace events that tell what came back.

use super::fiber::{Expect, FiberId, Ret, State, Wait};
use super::Machine;
use crate::convert;
use crate::protocol::{shape_name, Answer, Reply};
use crate::trace::Event;
use crate::value::{ErrorValue, Value};
use bytecode_spec::Code;
use bytecode_spec::{Op, Reg};
use std::sync::Arc;

impl Machine {
    /// Whether the answer about to land in `dst` of fiber `f`'s current frame is kept under a
    /// name: the code moves it (through unnamed registers) into a named variable (here or in
    /// an enclosing frame), makes it an output, or returns it from a block; or it is a
    /// branch's value and its fork's result is kept (a `pmap` or `parallel for` element of a
    /// bound list lives in that list, not in a file of its own).
    fn captured(&self, f: FiberId, dst: Reg) -> bool {
        let mut fiber = f;
        let mut reg = dst;
        // Each round follows the value out of one fiber into the fiber that joins it.
        for _ in 0..=self.limits.depth {
            let Some(frame) = self.fibers[fiber].stack.last() else {
                return false;
            };
            let fr = frame.borrow();
            let func = &self.artifact.modules[fr.module as usize].funcs[fr.func];
            let is_var = |r: &Reg| func.vars.binary_search_by_key(r, |(v, _, _)| *v).is_ok();
            let mut pc = fr.pc as usize;
            // A statement's value passes through a few unnamed registers at most.
            loop {
                match func.code.get(pc) {
                    Some(Op::Move { dst: d, src }) if *src == reg => {
                        if is_var(d) {
                            return true;
                        }
                        reg = *d;
                        pc += 1;
                    }
                    Some(
                        Op::SetUp { src, .. }
                        | Op::SetOutput { src, .. }
                        | Op::SetBlockOutput { src, .. },
                    ) => return *src == reg,
                    Some(Op::Return { src }) if *src == reg => break,
                    _ => return false,
                }
                if pc > fr.pc as usize + 4 {
                    return false;
                }
            }
            // A block's value goes to its caller, which keeps it (`output session ...`).
            if !matches!(fr.ret, Ret::Fiber) {
                return true;
            }
            // A branch's value goes to its fork's join; the program's value to nobody.
            let Some((g, _)) = self.fibers[fiber].group else {
                return false;
            };
            let parent = self.groups[g].parent;
            match self.fibers[parent].wait {
                Wait::Join { group, dst } if group == g => {
                    fiber = parent;
                    reg = dst;
                }
                _ => return false,
            }
        }
        false
    }

    /// The label of option `index` of the choice fiber `f` waits on (its frame stopped just
    /// after the `choose`), interpolated as it was sent.
    fn option_label(&mut self, f: FiberId, index: usize) -> String {
        let Some(frame) = self.fibers[f].stack.last().cloned() else {
            return String::new();
        };
        let fr = frame.borrow();
        let artifact = self.artifact.clone();
        let m = &artifact.modules[fr.module as usize];
        let at = fr.pc.saturating_sub(1) as usize;
        let Some(bytecode_spec::Op::Choose { choice, .. }) = m.funcs[fr.func].code.get(at) else {
            return String::new();
        };
        match m.choices[*choice].options.get(index) {
            Some(t) => self.interpolate(&fr, m, *t).unwrap_or_default(),
            None => String::new(),
        }
    }

    /// Hands `reply` to the fiber that asked. Unknown ids (withdrawn, or answered already)
    /// are ignored and reported as `false`.
    pub fn complete(&mut self, reply: Reply) -> bool {
        let Some(f) = self.pending.remove(&reply.id) else {
            return false;
        };
        let Wait::Request { dst, expect, .. } =
            std::mem::replace(&mut self.fibers[f].wait, Wait::Nothing)
        else {
            return false;
        };
        self.fibers[f].state = State::Ready;
        let id = reply.id;
        let mismatch = |what: &str| {
            ErrorValue::new(
                Code::E212,
                format!("the answer to {id} is {what}, which does not fit the question"),
            )
        };
        let value = match (reply.outcome, expect) {
            (Err(failure), _) => Err(ErrorValue {
                request: Some(id.clone()),
                ..ErrorValue::new(Code::E210, failure.0)
            }),
            (Ok(Answer::Session(a)), Expect::Session(key)) => {
                if let (Some(key), Some(memory)) = (key, a.memory) {
                    if self.trace {
                        let m = &self.artifact.modules[key.0 as usize];
                        self.events.push(Event::Memory {
                            module: key.0,
                            agent: m.strings[m.agents[key.1].name].clone(),
                            id: id.clone(),
                            memory: memory.clone(),
                            answer: a.text.clone(),
                        });
                    }
                    self.memory.insert(key, memory);
                }
                if self.trace {
                    let bound = self.captured(f, dst);
                    self.events.push(Event::Answer {
                        id: id.clone(),
                        text: a.text.clone(),
                        bound,
                    });
                }
                let t: Arc<str> = Arc::from(a.text);
                self.fibers[f].last_answer = Some(t.clone());
                Ok(Value::Text(t))
            }
            (Ok(Answer::Evaluate(b)), Expect::Bool) => {
                self.events.push(Event::Flow {
                    id: id.clone(),
                    result: b,
                });
                Ok(Value::Bool(b))
            }
            (Ok(Answer::Choose(i)), Expect::Choice(n)) if i < n => {
                if self.trace {
                    let option = self.option_label(f, i);
                    self.events.push(Event::Chose {
                        id: id.clone(),
                        index: i,
                        option,
                    });
                }
                Ok(Value::Int(i as i64))
            }
            (Ok(Answer::Choose(i)), Expect::Choice(n)) => {
                Err(mismatch(&format!("option {} of {n}", i.saturating_add(1))))
            }
            (Ok(Answer::Input(v)), Expect::Value) => Ok(v),
            (Ok(Answer::Convert(v)), Expect::Shape(shape)) => match convert::local(&v, shape) {
                Some(v) => {
                    if self.trace {
                        self.events.push(Event::Converted {
                            id: id.clone(),
                            shape: shape_name::name(shape).to_string(),
                            value: v.to_json().to_string(),
                        });
                    }
                    Ok(v)
                }
                None => Err(mismatch(&format!(
                    "{} where {} was asked",
                    v.kind(),
                    shape_name::name(shape)
                ))),
            },
            (Ok(other), _) => Err(mismatch(&format!("a `{}` answer", other.kind()))),
        };
        // An answer past the value bounds is an error where it lands (it stays journaled:
        // resuming with a larger --max-value-size uses it).
        let value = value.and_then(|v| {
            v.within(self.limits.values)
                .map(|()| v)
                .map_err(|e| e.error(&format!("the answer to {id}")))
        });
        match value {
            Ok(v) => {
                if let Some(frame) = self.fibers[f].stack.last() {
                    frame.borrow_mut().regs[dst.as_u32() as usize] = v;
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
}
