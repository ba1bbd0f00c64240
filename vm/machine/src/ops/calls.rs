//! Calls: block calls and returns, a block's named outputs, invoking an imported program,
//! and a program's inputs and outputs.

use super::{ix, misrouted, At, Flow, OpResult};
use crate::fiber::{Frame, Instance, Ret, State};
use crate::trace::Event;
use crate::value::{ErrorValue, Value};
use crate::Machine;
use bytecode_spec::Code;
use bytecode_spec::Op;
use rustc_hash::FxHashMap;
use std::cell::{RefCell, RefMut};
use std::rc::Rc;
use std::sync::Arc;

impl Machine {
    pub(super) fn calls(&mut self, at: At, mut fr: RefMut<Frame>, op: &Op) -> OpResult {
        let (f, m) = (at.f, at.m);
        match op {
            Op::Call {
                func,
                args,
                argc,
                dst,
            } => {
                if self.depth(f) >= self.limits.depth {
                    return Err(ErrorValue::new(
                        Code::E208,
                        format!(
                            "block calls nest deeper than {} (runaway recursion?)",
                            self.limits.depth
                        ),
                    ));
                }
                let inst = fr.inst.clone();
                let main = inst.borrow().main.clone();
                self.execs += 1;
                let new =
                    self.new_frame(&inst, fr.module, *func, main, Ret::Call(*dst), self.execs)?;
                {
                    let mut nf = new.borrow_mut();
                    for i in 0..*argc as usize {
                        nf.regs[i] = fr.regs[ix(*args) + i].clone();
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
                let v = fr.regs[ix(*src)].clone();
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
                        let outputs = Value::record(outputs);
                        outputs
                            .within(self.limits.values)
                            .map_err(|e| e.error("the block's outputs"))?;
                        if let Some(caller) = self.fibers[f].stack.last() {
                            let mut c = caller.borrow_mut();
                            c.regs[ix(dst)] = v;
                            c.regs[ix(dst) + 1] = outputs;
                        }
                    }
                    Ret::Invoke(dst) => {
                        let i = inst.borrow();
                        let callee = &self.artifact.modules[i.module as usize];
                        let rec = callee
                            .outputs
                            .iter()
                            .map(|(id, o)| {
                                (
                                    Arc::from(callee.strings[o.name].as_str()),
                                    i.outputs[id.as_u32() as usize].clone(),
                                )
                            })
                            .collect();
                        self.events.push(Event::ImportDone {
                            program: callee.name.clone(),
                        });
                        let outputs = Value::record(rec);
                        outputs
                            .within(self.limits.values)
                            .map_err(|e| e.error("the program's outputs"))?;
                        if let Some(caller) = self.fibers[f].stack.last() {
                            caller.borrow_mut().regs[ix(dst)] = outputs;
                        }
                        drop(i);
                        // Its top frame and the instance refer to each other: the invocation
                        // is over, and nothing calls its blocks again.
                        inst.borrow_mut().main = None;
                    }
                }
            }
            Op::SetBlockOutput { name, src } => {
                let v = fr.regs[ix(*src)].clone();
                let key: Arc<str> = Arc::from(m.strings[*name].as_str());
                fr.outputs.retain(|(k, _)| *k != key);
                fr.outputs.push((key, v));
            }
            Op::Invoke { prog, args, dst } => {
                if self.depth(f) >= self.limits.depth {
                    return Err(ErrorValue::new(
                        Code::E208,
                        "imported programs nest too deeply",
                    ));
                }
                let target = m.programs[*prog].module;
                let callee = &self.artifact.modules[target as usize];
                let mut inputs = FxHashMap::default();
                for (k, (id, _)) in callee
                    .inputs
                    .iter()
                    .filter(|(_, i)| i.parameter)
                    .enumerate()
                {
                    inputs.insert(id.as_u32(), fr.regs[ix(*args) + k].clone());
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
                )?;
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
                fr.regs[ix(*dst)] = v;
            }
            Op::SetOutput { output, src } => {
                let v = fr.regs[ix(*src)].clone();
                let name = &m.strings[m.outputs[*output].name];
                let value = v
                    .render(self.limits.values.bytes)
                    .map_err(|e| e.error(&format!("output `{name}`")))?;
                self.events.push(Event::Output {
                    name: name.clone(),
                    value,
                });
                fr.inst.borrow_mut().outputs[output.as_u32() as usize] = v;
            }
            other => return Err(misrouted(other)),
        }
        Ok(Flow::Next)
    }
}
