//! Control flow: `if`, `choice`, `try`, and the sequential loops.

use super::module::Lowerer;
use crate::resolved::{self as r, LoopKind};
use bytecode_spec as bc;
use bytecode_spec::{Op, Reg};

impl<'a> Lowerer<'a> {
    pub(super) fn for_loop(&mut self, l: &'a r::For) -> Reg {
        let src = self.expr(&l.iter);
        let list = self.convert(src, bc::Shape::List);
        if let Some((join, frame)) = l.parallel {
            return self.fan_out(
                "parallel-for-body",
                frame,
                join,
                list,
                (l.item, l.index),
                &l.body,
            );
        }
        let counter = self.temp();
        let zero = self.const_int(0);
        self.emit(Op::LoadConst {
            dst: counter,
            c: zero,
        });
        let item = self.slot(l.item).reg;
        let index = l.index.map(|i| self.slot(i).reg);
        let head = self.emit(Op::ForNext {
            list,
            counter,
            item,
            index,
            exit: 0,
        });
        self.counted_body(head, &l.body)
    }

    /// A counted loop's body after its head at `head`, the jump back, and the head's exit
    /// patched to just after; the loop's value is null.
    fn counted_body(&mut self, head: bytecode_spec::Pc, body: &'a [r::Stmt]) -> Reg {
        self.stmts(body);
        self.emit(Op::Jump { target: head });
        let exit = self.fb().here();
        self.fb().patch(head, exit);
        self.null()
    }

    pub(super) fn repeat(&mut self, l: &'a r::Repeat) -> Reg {
        let n = self.expr(&l.count);
        let count = self.convert(n, bc::Shape::Int);
        let counter = self.temp();
        let zero = self.const_int(0);
        self.emit(Op::LoadConst {
            dst: counter,
            c: zero,
        });
        let index = l.index.map(|i| self.slot(i).reg);
        let head = self.emit(Op::RepeatNext {
            count,
            counter,
            index,
            exit: 0,
        });
        self.counted_body(head, &l.body)
    }

    pub(super) fn unbounded(&mut self, l: &'a r::Loop) -> Reg {
        let max = l.max.as_ref().map(|m| {
            let v = self.expr(m);
            self.convert(v, bc::Shape::Int)
        });
        let counter = self.temp();
        let zero = self.const_int(0);
        self.emit(Op::LoadConst {
            dst: counter,
            c: zero,
        });
        let index = l.index.map(|i| self.slot(i).reg);
        let head = self.emit(Op::LoopNext {
            counter,
            max,
            index,
            exit: 0,
        });
        let mut exits = vec![head];
        if let Some(cond) = &l.cond {
            let mark = self.fb().temp_mark();
            let c = self.cond(cond);
            let j = match l.kind {
                LoopKind::While => self.emit(Op::JumpIfNot { cond: c, target: 0 }),
                _ => self.emit(Op::JumpIf { cond: c, target: 0 }),
            };
            self.fb().release_to(mark);
            exits.push(j);
        }
        self.stmts(&l.body);
        self.emit(Op::Jump { target: head });
        let exit = self.fb().here();
        for j in exits {
            self.fb().patch(j, exit);
        }
        self.null()
    }

    pub(super) fn try_block(&mut self, t: &'a r::Try) -> Reg {
        let res = self.fb().var_reg();
        let err = self.fb().var_reg();
        let pending = self.fb().var_reg();
        let enter = self.emit(Op::TryEnter {
            catch: None,
            finally: None,
            err,
            pending,
        });
        let v = self.stmts_value(&t.body);
        self.emit(Op::Move { dst: res, src: v });
        self.emit(Op::TryExit);
        let after_body = self.emit(Op::Jump { target: 0 });
        let mut to_end = Vec::new();
        let mut catch_pc = None;
        if let Some((var, body)) = &t.catch {
            catch_pc = Some(self.fb().here());
            self.bind(*var, err);
            let v = self.stmts_value(body);
            self.emit(Op::Move { dst: res, src: v });
            self.emit(Op::TryExit);
            if t.finally.is_none() {
                to_end.push(self.emit(Op::Jump { target: 0 }));
            }
        }
        let mut finally_pc = None;
        let normal_finally = self.fb().here();
        if let Some(f) = &t.finally {
            let c = self.const_null();
            self.emit(Op::LoadConst { dst: pending, c });
            finally_pc = Some(self.fb().here());
            self.stmts_value(f);
            self.emit(Op::EndFinally { pending });
        }
        let end = self.fb().here();
        self.fb().patch(
            after_body,
            if t.finally.is_some() {
                normal_finally
            } else {
                end
            },
        );
        for j in to_end {
            self.fb().patch(j, end);
        }
        if let Op::TryEnter { catch, finally, .. } = &mut self.fb().code[enter as usize] {
            *catch = catch_pc;
            *finally = finally_pc;
        }
        res
    }

    pub(super) fn if_expr(&mut self, i: &'a r::If) -> Reg {
        let res = self.fb().var_reg();
        let c = self.const_null();
        self.emit(Op::LoadConst { dst: res, c });
        let mut to_end = Vec::new();
        for (cond, body) in &i.branches {
            let mark = self.fb().temp_mark();
            let c = self.cond(cond);
            let skip = self.emit(Op::JumpIfNot { cond: c, target: 0 });
            self.fb().release_to(mark);
            let v = self.stmts_value(body);
            self.emit(Op::Move { dst: res, src: v });
            to_end.push(self.emit(Op::Jump { target: 0 }));
            let here = self.fb().here();
            self.fb().patch(skip, here);
        }
        if let Some(body) = &i.else_body {
            let v = self.stmts_value(body);
            self.emit(Op::Move { dst: res, src: v });
        }
        let end = self.fb().here();
        for j in to_end {
            self.fb().patch(j, end);
        }
        res
    }

    pub(super) fn choice(&mut self, c: &'a r::Choice) -> Reg {
        let res = self.fb().var_reg();
        let null = self.const_null();
        self.emit(Op::LoadConst { dst: res, c: null });
        if c.options.is_empty() {
            return res;
        }
        let criteria = self.template(&c.criteria);
        let options = c.options.iter().map(|(l, _)| self.template(l)).collect();
        let choice = self.m.choices.push(bc::ChoiceDesc { criteria, options });
        let idx = self.temp();
        self.emit(Op::Choose { dst: idx, choice });
        let table = self.m.tables.push(Vec::new());
        self.emit(Op::Switch { index: idx, table });
        let mut targets = Vec::new();
        let mut to_end = Vec::new();
        for (_, body) in &c.options {
            targets.push(self.fb().here());
            let v = self.stmts_value(body);
            self.emit(Op::Move { dst: res, src: v });
            to_end.push(self.emit(Op::Jump { target: 0 }));
        }
        let end = self.fb().here();
        for j in to_end {
            self.fb().patch(j, end);
        }
        self.m.tables[table] = targets;
        res
    }
}
