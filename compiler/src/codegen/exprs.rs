//! Expressions: values, lists and records, operators, and conditions.

use super::module::Lowerer;
use crate::resolved::{self as r, BinOp};
use bytecode_spec as bc;
use bytecode_spec::{Op, Reg};
use cranelift_entity::EntityRef;

/// Most elements of a list literal made at once (see [`Lowerer::list`]).
const LIST_CHUNK: usize = 1024;

/// Whether an expression is a number literal.
fn number(e: &r::Expr) -> bool {
    matches!(
        e.kind,
        r::ExprKind::Lit(r::Literal::Int(_) | r::Literal::Float(_))
    )
}

impl<'a> Lowerer<'a> {
    /// Lowers an expression to a boolean (asking the model for discretion text).
    pub(super) fn cond(&mut self, e: &'a r::Expr) -> Reg {
        match &e.kind {
            r::ExprKind::Discretion(t) => {
                self.set_loc(e.span);
                let cond = self.template(t);
                let dst = self.temp();
                self.emit(Op::Evaluate { dst, cond });
                dst
            }
            r::ExprKind::Binary(
                BinOp::And
                | BinOp::Or
                | BinOp::Eq
                | BinOp::Ne
                | BinOp::Lt
                | BinOp::Le
                | BinOp::Gt
                | BinOp::Ge,
                ..,
            )
            | r::ExprKind::Not(_)
            | r::ExprKind::Lit(r::Literal::Bool(_)) => self.expr(e),
            _ => {
                let v = self.expr(e);
                self.convert(v, bc::Shape::Bool)
            }
        }
    }

    pub(super) fn convert(&mut self, src: Reg, shape: bc::Shape) -> Reg {
        let dst = self.temp();
        self.emit(Op::Convert { dst, src, shape });
        dst
    }

    /// `len` consecutive registers holding `values`, for an instruction that takes a run of
    /// registers (the first is returned; any register when `values` is empty).
    pub(super) fn consecutive(&mut self, values: &[Reg]) -> Reg {
        if values.is_empty() {
            return Reg::new(0);
        }
        let first = self.fb().temp_block(values.len() as u32);
        for (i, &src) in values.iter().enumerate() {
            self.emit(Op::Move {
                dst: Reg::new(first.index() + i),
                src,
            });
        }
        first
    }

    pub(super) fn make_list(&mut self, items: &[Reg]) -> Reg {
        let first = self.consecutive(items);
        let dst = self.temp();
        self.emit(Op::MakeList {
            dst,
            first,
            len: items.len() as u32,
        });
        dst
    }

    pub(super) fn expr(&mut self, e: &'a r::Expr) -> Reg {
        self.set_loc(e.span);
        match &e.kind {
            r::ExprKind::Var(v) => self.read(*v),
            r::ExprKind::Lit(value) => {
                let c = self.literal(value);
                self.load_const(c)
            }
            r::ExprKind::Str(t) => self.string(t),
            r::ExprKind::Discretion(_) => self.cond(e),
            r::ExprKind::List(items) => self.list(items),
            r::ExprKind::Record(entries) => {
                let first = self.fb().temp_block(entries.len() as u32);
                self.fill_slots(first, entries.iter().map(|(_, v)| v));
                let names: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
                let keys = self.keys(&names);
                let first = if entries.is_empty() {
                    Reg::new(0)
                } else {
                    first
                };
                let dst = self.temp();
                self.emit(Op::MakeRecord { dst, first, keys });
                dst
            }
            r::ExprKind::Member(base, field) => {
                let b = self.expr(base);
                let src = self.convert(b, bc::Shape::Record);
                let name = self.s(field);
                let dst = self.temp();
                self.emit(Op::GetField { dst, src, name });
                dst
            }
            r::ExprKind::Index(base, index) => {
                let b = self.expr(base);
                let i = self.expr(index);
                // A literal index (`xs[0]`, `xs[-1]`) says the base is a list: text (a
                // session's answer) is converted into one first.
                let literal = match &index.kind {
                    r::ExprKind::Lit(r::Literal::Int(_)) => true,
                    r::ExprKind::Neg(inner) => {
                        matches!(inner.kind, r::ExprKind::Lit(r::Literal::Int(_)))
                    }
                    _ => false,
                };
                let src = if literal {
                    self.convert(b, bc::Shape::List)
                } else {
                    b
                };
                let dst = self.temp();
                self.emit(Op::GetIndex { dst, src, index: i });
                dst
            }
            r::ExprKind::Invoke(inv) => self.invoke(inv),
            r::ExprKind::Not(x) => {
                let src = self.cond(x);
                let dst = self.temp();
                self.emit(Op::Not { dst, src });
                dst
            }
            r::ExprKind::Neg(x) => {
                let src = self.expr(x);
                let dst = self.temp();
                self.emit(Op::Neg { dst, src });
                dst
            }
            r::ExprKind::Binary(op @ (BinOp::And | BinOp::Or), l, rhs) => {
                let dst = self.temp();
                let a = self.cond(l);
                self.emit(Op::Move { dst, src: a });
                let jump = if *op == BinOp::And {
                    self.emit(Op::JumpIfNot {
                        cond: dst,
                        target: 0,
                    })
                } else {
                    self.emit(Op::JumpIf {
                        cond: dst,
                        target: 0,
                    })
                };
                let b = self.cond(rhs);
                self.emit(Op::Move { dst, src: b });
                let here = self.fb().here();
                self.fb().patch(jump, here);
                dst
            }
            r::ExprKind::Binary(op, l, rhs) => self.binary(*op, l, rhs),
            r::ExprKind::Session(s) => self.session(s, e.span),
            r::ExprKind::Call(c) => self.call(c),
            r::ExprKind::Do(body) => self.stmts_value(body),
            r::ExprKind::Arrow(items) => {
                // Each step passes its result on to the next.
                let outer = self.inherited;
                let mut last = None;
                for i in items {
                    if let Some(prev) = last {
                        self.pass_on(prev, "previous");
                    }
                    last = Some(self.expr(i));
                }
                self.inherited = outer;
                match last {
                    Some(r) => r,
                    None => self.null(),
                }
            }
            r::ExprKind::Pipeline(head, stages) => {
                let mut v = self.expr(head);
                for st in stages {
                    v = self.stage(v, st);
                }
                v
            }
            r::ExprKind::Parallel(p) => self.parallel(p),
            r::ExprKind::For(l) => self.for_loop(l),
            r::ExprKind::Repeat(l) => self.repeat(l),
            r::ExprKind::Loop(l) => self.unbounded(l),
            r::ExprKind::Try(t) => self.try_block(t),
            r::ExprKind::If(i) => self.if_expr(i),
            r::ExprKind::Choice(c) => self.choice(c),
        }
    }

    /// Evaluates `values` straight into consecutive registers from `first` (each value's
    /// temporaries are free again for the next).
    fn fill_slots(&mut self, first: Reg, values: impl Iterator<Item = &'a r::Expr>) {
        for (i, e) in values.enumerate() {
            let mark = self.fb().temp_mark();
            let src = self.expr(e);
            self.emit(Op::Move {
                dst: Reg::new(first.index() + i),
                src,
            });
            self.fb().release_to(mark);
        }
    }

    /// A list literal. Its elements go straight into a run of registers; a list longer than
    /// [`LIST_CHUNK`] is made chunk by chunk (reusing the run) and the chunks appended in
    /// place, so any length fits in a function's registers and costs time in proportion.
    fn list(&mut self, items: &'a [r::Expr]) -> Reg {
        if items.is_empty() {
            return self.make_list(&[]);
        }
        let first = self.fb().temp_block(items.len().min(LIST_CHUNK) as u32);
        let list = self.temp();
        let chunk = if items.len() > LIST_CHUNK {
            Some(self.temp())
        } else {
            None
        };
        for (n, part) in items.chunks(LIST_CHUNK).enumerate() {
            self.fill_slots(first, part.iter());
            let len = part.len() as u32;
            match chunk {
                Some(c) if n > 0 => {
                    self.emit(Op::MakeList { dst: c, first, len });
                    self.emit(Op::Binary {
                        op: bc::BinOp::Add,
                        dst: list,
                        a: list,
                        b: c,
                    });
                }
                _ => {
                    self.emit(Op::MakeList {
                        dst: list,
                        first,
                        len,
                    });
                }
            }
        }
        list
    }

    fn binary(&mut self, op: BinOp, l: &'a r::Expr, rhs: &'a r::Expr) -> Reg {
        let mut a = self.expr(l);
        let mut b = self.expr(rhs);
        // Text compared with or subtracted from a number must become a number.
        if matches!(
            op,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Sub
        ) {
            if number(rhs) && !number(l) {
                a = self.convert(a, bc::Shape::Int);
            } else if number(l) && !number(rhs) {
                b = self.convert(b, bc::Shape::Int);
            }
        }
        let op = match op {
            BinOp::Add => bc::BinOp::Add,
            BinOp::Sub => bc::BinOp::Sub,
            BinOp::Eq => bc::BinOp::Eq,
            BinOp::Ne => bc::BinOp::Ne,
            BinOp::Lt => bc::BinOp::Lt,
            BinOp::Le => bc::BinOp::Le,
            BinOp::Gt => bc::BinOp::Gt,
            // `and`/`or` short-circuit (see `expr`).
            BinOp::Ge | BinOp::And | BinOp::Or => bc::BinOp::Ge,
        };
        let dst = self.temp();
        self.emit(Op::Binary { op, dst, a, b });
        dst
    }

    fn string(&mut self, t: &r::Template) -> Reg {
        if t.parts.iter().all(|p| matches!(p, r::TplPart::Text(_))) {
            let text: String = t
                .parts
                .iter()
                .map(|p| match p {
                    r::TplPart::Text(s) => s.as_str(),
                    r::TplPart::Var { .. } => "",
                })
                .collect();
            let c = self.const_str(&text);
            return self.load_const(c);
        }
        let tpl = self.template(t);
        let dst = self.temp();
        self.emit(Op::Format { dst, tpl });
        dst
    }
}
