//! Statements: inputs, outputs, bindings, `throw` and `assert`.

use super::module::Lowerer;
use crate::resolved as r;
use bytecode_spec as bc;
use bytecode_spec::{Op, Reg};
use cranelift_entity::EntityRef;

impl<'a> Lowerer<'a> {
    /// Lowers statements; returns the register holding the last statement's value.
    pub(super) fn stmts_value(&mut self, stmts: &'a [r::Stmt]) -> Reg {
        let result = self.fb().var_reg();
        let c = self.const_null();
        self.emit(Op::LoadConst { dst: result, c });
        self.sequence(stmts, Some(result));
        result
    }

    /// Lowers a loop body, whose value nobody reads (keeping it would hold a second
    /// reference to a list the body appends to, forcing a copy per append).
    pub(super) fn stmts(&mut self, stmts: &'a [r::Stmt]) {
        self.sequence(stmts, None);
    }

    /// Lowers a sequence of statements, moving the last one's value to `result` if given.
    /// A session statement passes its result on to the next statement when that one is a
    /// session too (bound, output or not), which receives it unless it has `context:`; the
    /// first statement inherits nothing.
    fn sequence(&mut self, stmts: &'a [r::Stmt], result: Option<Reg>) {
        let outer = self.inherited.take();
        // Where an unbound session's result waits for the next statement.
        let mut carry = None;
        for (i, s) in stmts.iter().enumerate() {
            let mark = self.fb().temp_mark();
            let v = self.stmt(s);
            if let (Some(v), Some(result)) = (v, result) {
                if v != result && i + 1 == stmts.len() {
                    self.emit(Op::Move {
                        dst: result,
                        src: v,
                    });
                }
            }
            self.inherited = None;
            let next_is_step = stmts
                .get(i + 1)
                .and_then(step_value)
                .is_some_and(is_session_step);
            if let Some(v) = v.filter(|_| next_is_step) {
                self.pass_on_step(s, v, &mut carry);
            }
            self.fb().release_to(mark);
        }
        self.inherited = outer;
    }

    /// If `s` (whose value is in `v`) is a session step, passes its result on: from the
    /// variable it bound, or else from the `carry` register.
    fn pass_on_step(&mut self, s: &'a r::Stmt, v: Reg, carry: &mut Option<Reg>) {
        if !step_value(s).is_some_and(is_session_step) {
            return;
        }
        let var = match &s.kind {
            r::StmtKind::Bind {
                target: r::BindTarget::Var(var),
                ..
            }
            | r::StmtKind::Output { var: Some(var), .. } => Some(*var),
            _ => None,
        };
        if let Some(var) = var {
            let loc = self.slot(var);
            if loc.depth == 0 {
                let name = self.p.vars[var].name.clone().unwrap_or_default();
                self.pass_on(loc.reg, &name);
                return;
            }
        }
        let c = *carry.get_or_insert_with(|| self.fb().var_reg());
        self.emit(Op::Move { dst: c, src: v });
        let label = match var.and_then(|v| self.p.vars[v].name.clone()) {
            Some(name) => name,
            None => "previous".to_string(),
        };
        self.pass_on(c, &label);
    }

    fn stmt(&mut self, s: &'a r::Stmt) -> Option<Reg> {
        self.set_loc(s.span);
        match &s.kind {
            r::StmtKind::Nop => None,
            r::StmtKind::Input { var, input, source } => {
                let id = bc::InputId::new(input.index());
                self.slot(*var);
                let dst = self.temp();
                match source {
                    r::InputSource::Parameter => {
                        self.emit(Op::LoadInput { dst, input: id });
                    }
                    r::InputSource::Ask(question) => {
                        // A mid-program question may interpolate the variables in scope here.
                        if let Some(q) = question {
                            let t = self.template(q);
                            self.m.inputs[id].description = Some(t);
                        }
                        self.emit(Op::Ask { dst, input: id });
                    }
                }
                self.write(*var, dst);
                Some(dst)
            }
            r::StmtKind::Output { value, var, sink } => Some(self.output(value, *var, sink)),
            r::StmtKind::Bind { target, value } => {
                let v = self.expr(value);
                match target {
                    r::BindTarget::Var(var) => self.write(*var, v),
                    r::BindTarget::Destructure(vars) => {
                        for (name, var) in vars {
                            let key = self.s(name);
                            let t = self.temp();
                            self.emit(Op::GetField {
                                dst: t,
                                src: v,
                                name: key,
                            });
                            self.write(*var, t);
                        }
                    }
                }
                Some(v)
            }
            r::StmtKind::Append { var, item, span } => {
                // `x = x + e`: one `binary x, x + e`, so the VM can extend a list in place.
                let loc = self.slot(*var);
                let b = self.expr(item);
                self.set_loc(*span);
                self.emit(Op::Binary {
                    op: bc::BinOp::Add,
                    dst: loc.reg,
                    a: loc.reg,
                    b,
                });
                self.update_output(*var, loc.reg);
                Some(loc.reg)
            }
            r::StmtKind::Throw(message) => {
                let msg = match message {
                    Some(e) => self.expr(e),
                    None => self.null(),
                };
                self.emit(Op::Throw { msg });
                None
            }
            r::StmtKind::Rethrow(err) => {
                let err = self.read(*err);
                self.emit(Op::Rethrow { err });
                None
            }
            r::StmtKind::Assert { cond, message } => {
                let cond = self.cond(cond);
                let msg = message.as_ref().map(|m| self.expr(m));
                self.emit(Op::Assert { cond, msg });
                None
            }
            r::StmtKind::Expr(e) => Some(self.expr(e)),
        }
    }

    fn output(&mut self, value: &'a r::Expr, var: Option<r::VarId>, sink: &r::OutputSink) -> Reg {
        let v = self.expr(value);
        // `output x = x` publishes a variable bound earlier: every binding of it has
        // published the output already, so writing it to itself would say it twice.
        let itself =
            matches!((var, &value.kind), (Some(var), r::ExprKind::Var(read)) if *read == var);
        if let Some(var) = var.filter(|_| !itself) {
            self.write(var, v);
        }
        match sink {
            r::OutputSink::Block { name, returns } => {
                if let Some(n) = name {
                    let name = self.s(n);
                    self.emit(Op::SetBlockOutput { name, src: v });
                }
                if *returns {
                    // `output` inside a block returns from it.
                    self.block_exports();
                    self.emit(Op::Return { src: v });
                }
            }
            // A named output's variable was bound above, which bound the output too.
            r::OutputSink::Program(Some(id)) if var.is_none() => {
                let output = bc::OutputId::new(id.index());
                self.emit(Op::SetOutput { output, src: v });
            }
            r::OutputSink::Program(_) => {}
        }
        v
    }
}

/// The value a statement binds, outputs or evaluates.
fn step_value(s: &r::Stmt) -> Option<&r::Expr> {
    match &s.kind {
        r::StmtKind::Bind { value, .. }
        | r::StmtKind::Output { value, .. }
        | r::StmtKind::Expr(value) => Some(value),
        _ => None,
    }
}

/// Whether `e` is a session, or a `->` sequence of them: a step whose result the next
/// statement inherits.
fn is_session_step(e: &r::Expr) -> bool {
    match &e.kind {
        r::ExprKind::Session(_) => true,
        r::ExprKind::Arrow(items) => items.last().is_some_and(is_session_step),
        _ => false,
    }
}
