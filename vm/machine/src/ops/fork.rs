//! Parallel branches: `Fork` starts one fiber per branch of a `parallel` block, `ForkEach`
//! one per element of a list (`parallel for`, `pmap`), and `Join` waits for the group.

use super::{ix, misrouted, type_error, At, Flow, OpResult};
use crate::fiber::{register_bytes, Frame, Ret, State, Wait};
use crate::join::Group;
use crate::trace::Event;
use crate::value::{ErrorValue, Value};
use crate::Machine;
use bytecode_spec::Code;
use bytecode_spec::{Op, Strategy};
use std::cell::RefMut;
use std::sync::Arc;

impl Machine {
    pub(super) fn fork(&mut self, at: At, mut fr: RefMut<Frame>, op: &Op) -> OpResult {
        let (f, m) = (at.f, at.m);
        match op {
            Op::Fork { fork, handle } | Op::ForkEach { fork, handle, .. } => {
                let desc = &m.forks[*fork];
                let items: Vec<Option<(Value, usize)>> = match op {
                    Op::ForkEach { list, .. } => match &fr.regs[ix(*list)] {
                        Value::List(l) => l
                            .iter()
                            .cloned()
                            .enumerate()
                            .map(|(i, v)| Some((v, i)))
                            .collect(),
                        v => return Err(type_error(format!("cannot fan out over {}", v.kind()))),
                    },
                    _ => vec![None; desc.branches.len()],
                };
                if self.live + items.len() > self.limits.fibers {
                    return Err(ErrorValue::new(
                        Code::E209,
                        format!(
                            "more than {} parallel branches at once (runaway recursion? \
                             `--max-branches` raises the limit)",
                            self.limits.fibers
                        ),
                    ));
                }
                // Every branch's frame must fit before any is made.
                let funcs = &m.funcs;
                let regs: usize = if matches!(op, Op::ForkEach { .. }) {
                    let body = desc
                        .branches
                        .first()
                        .map_or(0, |b| funcs[*b].nregs as usize);
                    body.saturating_mul(items.len())
                } else {
                    desc.branches.iter().map(|b| funcs[*b].nregs as usize).sum()
                };
                self.frames_fit(register_bytes(regs))?;
                // Room for the branches, and for the requests the next run makes (at most its
                // request cap), at once: growing by doubling would hold the old and the new
                // buffers together at the peak of a large fan-out.
                let n = items.len();
                self.fibers.reserve(n);
                self.ready.reserve(n);
                let asked = n.min(self.request_cap);
                self.new_requests.reserve(asked);
                self.pending.reserve(asked);
                let g = self.groups.len();
                fr.regs[ix(*handle)] = Value::Group(g as u32);
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
                    strategy: desc.strategy.name(),
                });
                for (i, item) in items.into_iter().enumerate() {
                    let func = if item.is_some() {
                        desc.branches[0]
                    } else {
                        desc.branches[i]
                    };
                    let child = self.new_frame(
                        &inst,
                        module,
                        func,
                        Some(at.frame.clone()),
                        Ret::Fiber,
                        exec,
                    )?;
                    if let Some((v, x)) = item {
                        let mut c = child.borrow_mut();
                        c.regs[0] = v;
                        c.regs[1] = Value::Int(x as i64);
                    }
                    let id = self.spawn(f, g, i, child);
                    self.groups[g].children.push(id);
                }
                self.fibers[f].forks += 1;
                self.fibers[f].owned.push(g);
                if self.groups[g].children.is_empty() {
                    let empty = match desc.strategy {
                        Strategy::First => Value::Null,
                        _ => Value::List(Arc::new(Vec::new())),
                    };
                    self.groups[g].outcome = Some(Ok(empty));
                }
            }
            Op::Join { handle, dst } => {
                let group = match fr.regs[ix(*handle)] {
                    Value::Group(g) => self.groups.get(g as usize).map(|gr| (g, gr)),
                    _ => None,
                };
                let Some((g, group)) = group else {
                    return Err(ErrorValue::new(Code::E215, "join without a fork"));
                };
                let g = g as usize;
                match group.outcome.clone() {
                    Some(Ok(v)) => fr.regs[ix(*dst)] = v,
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
            other => return Err(misrouted(other)),
        }
        Ok(Flow::Next)
    }
}
