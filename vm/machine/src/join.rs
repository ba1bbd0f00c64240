//! Fork groups: the branches a `parallel` block, `parallel for` or `pmap` started, and how
//! their results combine under the fork's join strategy and failure policy.

use super::fiber::{FiberId, State, Wait};
use super::Machine;
use crate::trace::Event;
use crate::value::{ErrorValue, Value};
use bytecode_spec::Code;
use bytecode_spec::{ForkId, OnFail, Strategy};
use std::sync::Arc;

/// A running fork.
pub(super) struct Group {
    pub module: u32,
    pub fork: ForkId,
    /// The fiber that forked (and joins).
    pub parent: FiberId,
    pub children: Vec<FiberId>,
    pub results: Vec<Option<Result<Value, Arc<ErrorValue>>>>,
    pub finished: usize,
    pub successes: usize,
    pub first_error: Option<Arc<ErrorValue>>,
    /// Set once the join's outcome is known; later branch results are ignored.
    pub outcome: Option<Result<Value, Arc<ErrorValue>>>,
}

impl Machine {
    /// Branch `i` of group `g` ended with `result`; completes the group when its strategy
    /// and policy decide.
    pub(super) fn child_finished(
        &mut self,
        g: usize,
        i: usize,
        result: Result<Value, Arc<ErrorValue>>,
    ) {
        if self.groups[g].outcome.is_some() {
            return;
        }
        let (strategy, count, on_fail) = {
            let d =
                &self.artifact.modules[self.groups[g].module as usize].forks[self.groups[g].fork];
            (d.strategy, d.count, d.on_fail)
        };
        let group = &mut self.groups[g];
        group.finished += 1;
        let failed = result.is_err();
        if let Err(e) = &result {
            group.first_error.get_or_insert_with(|| e.clone());
        } else {
            group.successes += 1;
        }
        group.results[i] = Some(result);
        let n = group.children.len();
        let all_done = group.finished == n;
        let outcome: Option<Result<(), Arc<ErrorValue>>> = if failed && on_fail == OnFail::FailFast
        {
            group.first_error.clone().map(Err)
        } else {
            let enough = match strategy {
                Strategy::All => all_done,
                Strategy::First => group.successes >= 1,
                Strategy::Any => group.successes >= count as usize,
            };
            let impossible = match strategy {
                Strategy::All => false,
                Strategy::First => all_done && group.successes == 0,
                Strategy::Any => group.successes + (n - group.finished) < count as usize,
            };
            if enough
                && !(strategy == Strategy::All
                    && on_fail == OnFail::Continue
                    && group.first_error.is_some())
            {
                Some(Ok(()))
            } else if enough || impossible {
                match on_fail {
                    OnFail::Ignore => Some(Ok(())),
                    _ => Some(Err(group.first_error.clone().unwrap_or_else(|| {
                        Arc::new(ErrorValue::new(
                            Code::E211,
                            format!("only {} of {} branches succeeded", group.successes, n),
                        ))
                    }))),
                }
            } else {
                None
            }
        };
        if let Some(o) = outcome {
            self.complete_group(g, strategy, o);
        }
    }

    /// Group `g` is decided: the other branches are cancelled and the joining fiber resumes
    /// with the results (the winner's value alone for `first`), or with the error.
    fn complete_group(&mut self, g: usize, strategy: Strategy, o: Result<(), Arc<ErrorValue>>) {
        let results = &self.groups[g].results;
        let bounds = self.limits.values;
        let outcome = o.and_then(|()| {
            let v = match strategy {
                // `first` yields the winning branch's value.
                Strategy::First => results
                    .iter()
                    .find_map(|r| match r {
                        Some(Ok(v)) => Some(v.clone()),
                        _ => None,
                    })
                    .unwrap_or_default(),
                _ => Value::List(Arc::new(
                    results
                        .iter()
                        .map(|r| match r {
                            Some(Ok(v)) => v.clone(),
                            _ => Value::Null,
                        })
                        .collect(),
                )),
            };
            // The branches' values nest one level down in the list of results.
            v.within(bounds)
                .map(|()| v)
                .map_err(|e| Arc::new(e.error("the parallel block's results")))
        });
        self.groups[g].outcome = Some(outcome.clone());
        for c in self.groups[g].children.clone() {
            self.cancel(c);
        }
        self.events.push(Event::Joined {
            succeeded: self.groups[g].successes,
            branches: self.groups[g].children.len(),
        });
        let parent = self.groups[g].parent;
        if let Wait::Join { group, dst } = self.fibers[parent].wait {
            if group == g && self.fibers[parent].state == State::Waiting {
                self.fibers[parent].wait = Wait::Nothing;
                self.fibers[parent].state = State::Ready;
                match outcome {
                    Ok(v) => {
                        if let Some(frame) = self.fibers[parent].stack.last() {
                            frame.borrow_mut().regs[dst.as_u32() as usize] = v;
                        }
                    }
                    Err(e) => self.raise(parent, (*e).clone()),
                }
                if self.fibers[parent].state == State::Ready {
                    self.ready.push_back(parent);
                }
            }
        }
    }
}
