//! Pictures of where the machine is, for `state.md`: live fibers' call stacks with the loops
//! each frame is in, and the forks waiting for their branches.

use super::fiber::{Frame, State, Wait};
use super::Machine;
use crate::snapshot::{FiberView, ForkView, FrameView, LoopView, Snapshot};
use crate::value::Value;
use bytecode_spec::{Op, Reg};

impl Machine {
    /// Where the run is now: live fibers' call stacks (at most [`Snapshot::MAX_FIBERS`]) with
    /// the loops each frame is in, and the forks waiting for their branches.
    pub fn snapshot(&self) -> Snapshot {
        let live: Vec<_> = self
            .fibers
            .values()
            .filter(|f| matches!(f.state, State::Ready | State::Waiting))
            .collect();
        let fibers = live
            .iter()
            .take(Snapshot::MAX_FIBERS)
            .map(|f| FiberView {
                lineage: f.lineage.to_string(),
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
                    .map_or(0, |fr| self.line(&fr.borrow()));
                let desc = &self.artifact.modules[g.module as usize].forks[g.fork];
                ForkView {
                    module: g.module,
                    line,
                    strategy: desc.strategy.name(),
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
    pub(super) fn frame_view(&self, fr: &Frame) -> FrameView {
        let m = &self.artifact.modules[fr.module as usize];
        let func = &m.funcs[fr.func];
        let at = fr.pc.saturating_sub(1) as usize;
        let line_of = |pc: usize| func.locs.get(pc).map_or(0, |l| l.line);
        let int = |reg: Reg| match fr.regs.get(reg.as_u32() as usize) {
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
                        let len = match fr.regs.get(list.as_u32() as usize) {
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
}
