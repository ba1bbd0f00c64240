//! Control flow: jumps, `choice` tables, the three loop steps, `try` regions, and the
//! instructions that raise errors (`throw`, rethrow, `assert`).

use super::{ix, misrouted, type_error, Flow, OpResult};
use crate::fiber::{Frame, Handler};
use crate::trace::Event;
use crate::value::{ErrorValue, Value};
use crate::Machine;
use bytecode_spec::Code;
use bytecode_spec::Op;
use std::cell::RefMut;

/// Reads an integer register that loop bookkeeping keeps (0 before the first iteration).
/// An error message made of `v`, unless it is larger than `max` bytes.
fn message(v: &Value, max: usize) -> Result<String, ErrorValue> {
    v.render(max).map_err(|e| e.error("the error message"))
}

fn counter(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        _ => 0,
    }
}

impl Machine {
    /// Counts a jump back (to the instruction itself or before it) as a loop iteration,
    /// unless it goes to a loop step, which counts its own: a backward jump is a loop however
    /// the artifact was made, and `--max-iterations` bounds every loop (a verified artifact
    /// that jumps back onto itself would otherwise spin the machine forever).
    fn jump_back(&mut self, fr: &Frame, target: bytecode_spec::Pc) -> Result<(), ErrorValue> {
        // `pc` is already past the jump.
        if target >= fr.pc {
            return Ok(());
        }
        let code = &self.artifact.modules[fr.module as usize].funcs[fr.func].code;
        match code.get(target as usize) {
            Some(Op::ForNext { .. } | Op::RepeatNext { .. } | Op::LoopNext { .. }) => Ok(()),
            _ => self.tick(),
        }
    }

    pub(super) fn control(&mut self, mut fr: RefMut<Frame>, op: &Op) -> OpResult {
        let bytes = self.limits.values.bytes;
        match op {
            Op::Jump { target } => {
                self.jump_back(&fr, *target)?;
                fr.pc = *target
            }
            Op::JumpIf { cond, target } | Op::JumpIfNot { cond, target } => {
                let want = matches!(op, Op::JumpIf { .. });
                match fr.regs[ix(*cond)] {
                    Value::Bool(b) if b == want => {
                        self.jump_back(&fr, *target)?;
                        fr.pc = *target
                    }
                    Value::Bool(_) => {}
                    ref v => {
                        return Err(type_error(format!(
                            "a condition must be a boolean, not {}",
                            v.kind()
                        )))
                    }
                }
            }
            Op::Switch { index, table } => {
                let m = &self.artifact.modules[fr.module as usize];
                match fr.regs[ix(*index)] {
                    Value::Int(i) if i >= 0 && (i as usize) < m.tables[*table].len() => {
                        let target = m.tables[*table][i as usize];
                        self.jump_back(&fr, target)?;
                        fr.pc = target
                    }
                    ref v => {
                        return Err(ErrorValue::new(
                            Code::E212,
                            format!("no option {}", v.display()),
                        ))
                    }
                }
            }
            Op::ForNext {
                list,
                counter: c,
                item,
                index,
                exit,
            } => {
                let Value::List(l) = fr.regs[ix(*list)].clone() else {
                    return Err(type_error(format!(
                        "cannot iterate over {}",
                        fr.regs[ix(*list)].kind()
                    )));
                };
                let i = counter(&fr.regs[ix(*c)]).max(0) as usize;
                if i < l.len() {
                    self.tick()?;
                    fr.regs[ix(*item)] = l[i].clone();
                    if let Some(x) = index {
                        fr.regs[ix(*x)] = Value::Int(i as i64);
                    }
                    fr.regs[ix(*c)] = Value::Int(i as i64 + 1);
                } else {
                    fr.pc = *exit;
                }
            }
            Op::RepeatNext {
                count,
                counter: c,
                index,
                exit,
            } => {
                let n = match fr.regs[ix(*count)] {
                    Value::Int(n) => n,
                    ref v => {
                        return Err(type_error(format!(
                            "repeat needs an integer count, not {}",
                            v.kind()
                        )))
                    }
                };
                let i = counter(&fr.regs[ix(*c)]);
                if i < n {
                    self.tick()?;
                    if let Some(x) = index {
                        fr.regs[ix(*x)] = Value::Int(i);
                    }
                    fr.regs[ix(*c)] = Value::Int(i + 1);
                } else {
                    fr.pc = *exit;
                }
            }
            Op::LoopNext {
                counter: c,
                max,
                index,
                exit,
            } => {
                let i = counter(&fr.regs[ix(*c)]);
                let limit = match max.map(|m| fr.regs[ix(m)].clone()) {
                    Some(Value::Int(n)) => Some(n),
                    Some(v) => {
                        return Err(type_error(format!(
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
                    if let Some(x) = index {
                        fr.regs[ix(*x)] = Value::Int(i);
                    }
                    fr.regs[ix(*c)] = Value::Int(i + 1);
                }
            }
            Op::TryEnter {
                catch,
                finally,
                err,
                pending,
            } => {
                self.events.push(Event::TryEnter);
                fr.handlers.push(Handler {
                    catch: *catch,
                    finally: *finally,
                    err: *err,
                    pending: *pending,
                    in_catch: false,
                });
            }
            Op::TryExit => {
                fr.handlers.pop();
            }
            Op::EndFinally { pending } => {
                if let Value::Error(e) = &fr.regs[ix(*pending)] {
                    return Err((**e).clone());
                }
            }
            Op::Throw { msg } => {
                let message = match &fr.regs[ix(*msg)] {
                    Value::Null => "error thrown".to_string(),
                    v => message(v, bytes)?,
                };
                return Err(ErrorValue::new(Code::E202, message));
            }
            Op::Rethrow { err } => {
                return Err(match &fr.regs[ix(*err)] {
                    Value::Error(e) => (**e).clone(),
                    v => ErrorValue::new(Code::E202, message(v, bytes)?),
                });
            }
            Op::Assert { cond, msg } => match fr.regs[ix(*cond)] {
                Value::Bool(true) => {}
                Value::Bool(false) => {
                    let message = match msg {
                        Some(m) => message(&fr.regs[ix(*m)], bytes)?,
                        None => "assertion failed".into(),
                    };
                    return Err(ErrorValue::new(Code::E203, message));
                }
                ref v => {
                    return Err(type_error(format!(
                        "an assertion needs a boolean, not {}",
                        v.kind()
                    )))
                }
            },
            other => return Err(misrouted(other)),
        }
        Ok(Flow::Next)
    }
}
