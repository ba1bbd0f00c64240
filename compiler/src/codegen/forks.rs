//! Forks and pipelines: `parallel:` blocks, fan-outs (`parallel for`, `pmap`), and the
//! sequential pipeline stages.

use super::module::Lowerer;
use crate::resolved::{self as r, FnId, VarId};
use bytecode_spec as bc;
use bytecode_spec::{Op, Reg};

impl<'a> Lowerer<'a> {
    pub(super) fn parallel(&mut self, p: &'a r::Parallel) -> Reg {
        // A branch's named result lives in the forking frame.
        let mut names = Vec::with_capacity(p.branches.len());
        for b in &p.branches {
            names.push(b.result.as_ref().map(|(name, var)| {
                self.slot(*var);
                self.s(name)
            }));
        }
        let mut branches = Vec::with_capacity(p.branches.len());
        for (i, b) in p.branches.iter().enumerate() {
            let f = self.branch_fn(&format!("parallel-branch-{i}"), b.func, &[], |lw| {
                lw.set_loc(b.stmt.span);
                lw.stmts_value(std::slice::from_ref(&b.stmt))
            });
            branches.push(f);
        }
        let fork = self.fork_desc(p.join, branches, names);
        let handle = self.temp();
        self.emit(Op::Fork { fork, handle });
        let dst = self.temp();
        self.emit(Op::Join { handle, dst });
        dst
    }

    /// One branch per element of `list`, each running `body` in frame `frame` with the
    /// element and its index as parameters.
    pub(super) fn fan_out(
        &mut self,
        name: &str,
        frame: FnId,
        join: r::Join,
        list: Reg,
        (item, index): (VarId, Option<VarId>),
        body: &'a [r::Stmt],
    ) -> Reg {
        let params = [(Some(item), ""), (index, "$index")];
        let f = self.branch_fn(name, frame, &params, |lw| lw.stmts_value(body));
        let fork = self.fork_desc(join, vec![f], vec![None]);
        let handle = self.temp();
        self.emit(Op::ForkEach { fork, list, handle });
        let dst = self.temp();
        self.emit(Op::Join { handle, dst });
        dst
    }

    pub(super) fn stage(&mut self, input: Reg, st: &'a r::Stage) -> Reg {
        self.set_loc(st.span);
        let list = self.convert(input, bc::Shape::List);
        let (item, acc) = match st.op {
            r::StageOp::Pmap { item, func } => {
                return self.fan_out(
                    "pmap-body",
                    func,
                    r::Join::default(),
                    list,
                    (item, None),
                    &st.body,
                );
            }
            r::StageOp::Map { item } | r::StageOp::Filter { item } => (item, None),
            r::StageOp::Reduce { acc, item } => (item, Some(acc)),
        };
        let out = self.fb().var_reg();
        let counter = self.temp();
        let zero = self.const_int(0);
        self.emit(Op::LoadConst {
            dst: counter,
            c: zero,
        });
        let item = self.slot(item).reg;
        let first = match acc {
            Some(acc) => {
                let acc = self.slot(acc).reg;
                let c = self.const_null();
                self.emit(Op::LoadConst { dst: acc, c });
                let first = self.fb().var_reg();
                let t = self.const_bool(true);
                self.emit(Op::LoadConst { dst: first, c: t });
                Some((acc, first))
            }
            None => {
                let empty = self.make_list(&[]);
                self.emit(Op::Move {
                    dst: out,
                    src: empty,
                });
                None
            }
        };
        let head = self.emit(Op::ForNext {
            list,
            counter,
            item,
            index: None,
            exit: 0,
        });
        if let Some((acc, first)) = first {
            // The first element seeds the accumulator.
            let body = self.emit(Op::JumpIfNot {
                cond: first,
                target: 0,
            });
            self.emit(Op::Move {
                dst: acc,
                src: item,
            });
            let f = self.const_bool(false);
            self.emit(Op::LoadConst { dst: first, c: f });
            self.emit(Op::Jump { target: head });
            let here = self.fb().here();
            self.fb().patch(body, here);
            let v = self.stmts_value(&st.body);
            self.emit(Op::Move { dst: acc, src: v });
            self.emit(Op::Move { dst: out, src: acc });
        } else {
            let v = self.stmts_value(&st.body);
            let mark = self.fb().temp_mark();
            let one = if matches!(st.op, r::StageOp::Filter { .. }) {
                let keep = self.convert(v, bc::Shape::Bool);
                self.emit(Op::JumpIfNot {
                    cond: keep,
                    target: head,
                });
                self.make_list(&[item])
            } else {
                self.make_list(&[v])
            };
            self.emit(Op::Binary {
                op: bc::BinOp::Add,
                dst: out,
                a: out,
                b: one,
            });
            self.fb().release_to(mark);
        }
        self.emit(Op::Jump { target: head });
        let exit = self.fb().here();
        self.fb().patch(head, exit);
        if let Some((_, first)) = first {
            // `out` holds the accumulator; null for an empty list.
            let c = self.const_null();
            let skip = self.emit(Op::JumpIfNot {
                cond: first,
                target: 0,
            });
            self.emit(Op::LoadConst { dst: out, c });
            let here = self.fb().here();
            self.fb().patch(skip, here);
        }
        out
    }
}
