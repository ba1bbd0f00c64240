//! Statements: inputs, outputs, bindings, `throw` and `assert`.

use super::scope::{exclusive, VarKind};
use super::{list_or_none, program_of, Analyzer, Ctx};
use crate::ast::*;
use crate::diagnostics::{Code, Diagnostic};
use crate::resolved::{self as r, VarId};
use crate::span::Span;

impl<'a> Analyzer<'a> {
    pub(super) fn stmts(&mut self, stmts: &'a [Stmt], ctx: Ctx) -> Vec<r::Stmt> {
        let mut executable_seen = false;
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            out.push(self.stmt(s, ctx, executable_seen));
            executable_seen |= s.is_executable();
        }
        out
    }

    pub(super) fn body(&mut self, body: &'a Body, ctx: Ctx, what: &str) -> Vec<r::Stmt> {
        if body.stmts.is_empty() {
            self.diag(Code::W116, body.span, format!("{what} has an empty body"));
        }
        self.statements_of(body, ctx)
    }

    /// The body of an `if`, `elif` or `else` branch (`what`). An empty one is an error
    /// (E157): what was meant as its body is almost always the next lines, written without
    /// the indentation that would put them in it, so they run whatever the condition is.
    pub(super) fn branch_body(&mut self, body: &'a Body, ctx: Ctx, what: &str) -> Vec<r::Stmt> {
        if body.stmts.is_empty() {
            self.diag(Code::E157, body.span, format!("{what} has an empty body"))
                .help = Some(
                "the lines after it are not indented under it, so they are not part of it and \
                 run whether or not the condition holds; indent the branch's statements, or \
                 remove the branch"
                    .into(),
            );
        }
        self.statements_of(body, ctx)
    }

    /// The statements of `body`, one level deeper.
    fn statements_of(&mut self, body: &'a Body, ctx: Ctx) -> Vec<r::Stmt> {
        self.depth += 1;
        let stmts = self.stmts(&body.stmts, ctx);
        self.depth -= 1;
        stmts
    }

    pub(super) fn stmt(&mut self, stmt: &'a Stmt, ctx: Ctx, executable_seen: bool) -> r::Stmt {
        let outer = std::mem::replace(&mut self.stmt_end, stmt.span.end);
        let kind = self.stmt_kind(stmt, ctx, executable_seen);
        self.stmt_end = outer;
        r::Stmt {
            kind,
            span: stmt.span,
        }
    }

    fn stmt_kind(&mut self, stmt: &'a Stmt, ctx: Ctx, executable_seen: bool) -> r::StmtKind {
        match &stmt.kind {
            StmtKind::Use { .. }
            | StmtKind::Import { .. }
            | StmtKind::BlockDef(_)
            | StmtKind::Error => r::StmtKind::Nop,
            StmtKind::Input { name, description } => {
                self.input(stmt, name, description, executable_seen)
            }
            StmtKind::Output { name, value } => self.output(name, value),
            StmtKind::Agent(a) => {
                super::props::agent(self, a);
                r::StmtKind::Nop
            }
            StmtKind::Bind {
                kind,
                target,
                value,
            } => self.bind(*kind, target, value, ctx),
            StmtKind::Throw(None) => match self.catches.last() {
                Some(&err) => r::StmtKind::Rethrow(err),
                None => r::StmtKind::Throw(None),
            },
            StmtKind::Throw(Some(e)) => {
                if let ExprKind::Str(s) = &e.kind {
                    if s.raw_text().trim().is_empty() {
                        self.diag(Code::W112, e.span, "throw message is empty");
                    }
                }
                r::StmtKind::Throw(Some(self.expr(e)))
            }
            StmtKind::Assert { cond, message } => r::StmtKind::Assert {
                cond: self.expr(cond),
                message: message.as_ref().map(|m| self.expr(m)),
            },
            StmtKind::Expr(e) => r::StmtKind::Expr(self.expr(e)),
        }
    }

    fn input(
        &mut self,
        stmt: &Stmt,
        name: &Option<Name>,
        description: &'a Option<Box<Expr>>,
        executable_seen: bool,
    ) -> r::StmtKind {
        let Some(name) = name else {
            self.diag(
                Code::E020,
                Span::new(stmt.span.start as usize, stmt.span.start as usize + 5),
                "input has no name",
            )
            .help = Some("write `input name: \"description\"`".into());
            return r::StmtKind::Nop;
        };
        let desc_empty = match description.as_deref() {
            None => true,
            Some(Expr {
                kind: ExprKind::Str(s) | ExprKind::Discretion(s),
                ..
            }) => s.raw_text().trim().is_empty(),
            Some(_) => false,
        };
        if desc_empty {
            self.diag(
                Code::W101,
                name.span,
                format!("input `{}` has no description", name.text),
            )
            .help = Some("describe what the caller should provide: `input name: \"...\"`".into());
        }
        let question = description.as_deref().map(|d| self.expr(d));
        if executable_seen || self.in_block || self.depth > 0 {
            self.diag(Code::E022, name.span, format!("input `{}` comes after executable statements", name.text))
                .help = Some("it is asked for when the run reaches it (a mid-program input); move it to the top to make it a parameter".into());
        }
        let var = match self.lookup_declared(&name.text) {
            Some(prev) => {
                let (prev, kind, id) = (prev.span, prev.kind, prev.id);
                let code = if kind == VarKind::Input {
                    Code::E021
                } else {
                    Code::E019
                };
                self.report(
                    Diagnostic::new(
                        code,
                        self.file,
                        name.span,
                        format!("`{}` is already declared", name.text),
                    )
                    .with_secondary(prev, format!("{} declared here", kind.describe())),
                );
                id
            }
            None => self.declare(name, VarKind::Input, None),
        };
        self.shapes.unknown(var);
        let Some(&input) = self.input_ids.get(&name.text) else {
            return r::StmtKind::Nop;
        };
        let source = if self.out.inputs[input].parameter && self.func == self.out.main {
            r::InputSource::Parameter
        } else {
            r::InputSource::Ask(question.and_then(|q| match q.kind {
                r::ExprKind::Str(t) | r::ExprKind::Discretion(t) => Some(t),
                _ => None,
            }))
        };
        r::StmtKind::Input { var, input, source }
    }

    fn output(&mut self, name: &Option<Name>, value: &'a Expr) -> r::StmtKind {
        let expr = self.expr(value);
        let var = match name {
            Some(n) if n.text.is_empty() => {
                self.diag(Code::E023, n.span, "output has no name").help = Some(
                    "write `output name = value`, or `output value` for an anonymous block result"
                        .into(),
                );
                None
            }
            Some(n) => {
                let var = self.bind_output(n, value);
                self.shapes.bind(var, value);
                Some(var)
            }
            None => None,
        };
        let named = name
            .as_ref()
            .filter(|n| !n.text.is_empty())
            .map(|n| n.text.clone());
        let sink = if self.in_block {
            let block_fn = self.out.funcs[self.func].kind != r::FrameKind::Branch;
            r::OutputSink::Block {
                name: named,
                returns: block_fn,
            }
        } else {
            let key = named.as_deref().unwrap_or("result");
            let id = self.output_ids.get(key).copied();
            if let Some(v) = var {
                self.out.vars[v].output = id;
                self.out.vars[v].kind = bytecode_spec::BindingKind::Output;
            }
            r::OutputSink::Program(id)
        };
        r::StmtKind::Output {
            value: expr,
            var,
            sink,
        }
    }

    /// Declares (or reuses) the variable of a named output.
    fn bind_output(&mut self, name: &Name, value: &Expr) -> VarId {
        let arms = self.arms.clone();
        let prev = self
            .scopes
            .ns()
            .get(&name.text)
            .filter(|v| v.kind != VarKind::BlockVar)
            .cloned();
        match prev {
            Some(prev) if prev.kind == VarKind::Output => {
                let bound = self.outputs.entry(name.text.clone()).or_default();
                let conflict = bound
                    .iter()
                    .find(|(_, at)| !exclusive(at, &arms))
                    .map(|(s, _)| *s);
                bound.push((name.span, arms));
                if let Some(first) = conflict {
                    self.report(
                        Diagnostic::new(
                            Code::E024,
                            self.file,
                            name.span,
                            format!("output `{}` is bound more than once", name.text),
                        )
                        .with_secondary(first, "first bound here")
                        .with_help("the last binding wins"),
                    );
                }
                prev.id
            }
            Some(prev) => {
                let promotes = matches!(&value.kind, ExprKind::Name(n) if n.text == name.text);
                if prev.kind == VarKind::Const && !promotes {
                    self.report(
                        Diagnostic::new(
                            Code::E104,
                            self.file,
                            name.span,
                            format!("cannot reassign const `{}`", name.text),
                        )
                        .with_secondary(prev.span, "declared const here"),
                    );
                } else if !promotes && prev.kind != VarKind::BlockOutput {
                    self.report(
                        Diagnostic::new(
                            Code::E102,
                            self.file,
                            name.span,
                            format!(
                                "output `{}` has the name of an existing {}",
                                name.text,
                                prev.kind.describe()
                            ),
                        )
                        .with_secondary(prev.span, "declared here")
                        .with_help(format!(
                            "to publish the variable as it is, write `output {0} = {0}`",
                            name.text
                        )),
                    );
                }
                if let Some(v) = self.scopes.ns().get_mut(&name.text) {
                    v.kind = VarKind::Output;
                }
                self.outputs
                    .entry(name.text.clone())
                    .or_default()
                    .push((name.span, arms));
                prev.id
            }
            None => {
                // A block's own output, seen from a caller that already ran `do block(...)`,
                // is not a conflict.
                if let Some(prev) = self
                    .lookup_declared(&name.text)
                    .filter(|v| v.kind != VarKind::BlockOutput)
                {
                    let prev = prev.clone();
                    self.report(
                        Diagnostic::new(
                            Code::E102,
                            self.file,
                            name.span,
                            format!(
                                "output `{}` has the name of an existing {}",
                                name.text,
                                prev.kind.describe()
                            ),
                        )
                        .with_secondary(prev.span, "declared here"),
                    );
                }
                self.outputs
                    .entry(name.text.clone())
                    .or_default()
                    .push((name.span, arms));
                self.declare(name, VarKind::Output, program_of(value))
            }
        }
    }

    fn bind(&mut self, kind: BindKind, target: &Target, value: &'a Expr, ctx: Ctx) -> r::StmtKind {
        let expr = self.expr(value);
        let program = program_of(value);
        match target {
            Target::Name(name) => {
                let var = self.bind_name(kind, name, program, ctx);
                self.shapes.bind(var, value);
                self.append_or_bind(var, expr, value.span)
            }
            Target::Destructure(names, _) => {
                let outputs = program
                    .as_ref()
                    .and_then(|p| self.contract_of(p))
                    .map(|c| c.outputs);
                // `let {a, b} = r`: each name is a field read of `r`.
                let source = super::shapes::member_path(value)
                    .and_then(|(root, path)| Some((self.lookup(&root.text)?.id, path)));
                let mut vars = Vec::new();
                for n in names {
                    if let Some((root, path)) = &source {
                        let mut path = path.clone();
                        path.push((n.text.clone(), n.span));
                        self.shapes.read(*root, path);
                    }
                    if let Some(p) = &program {
                        self.index.add_contract_ref(
                            n.span,
                            p,
                            super::index::ContractSide::Output,
                            &n.text,
                        );
                    }
                    if let (Some(outputs), Some(p)) = (&outputs, &program) {
                        if !outputs.contains(&n.text) {
                            let mut d = Diagnostic::new(
                                Code::E028,
                                self.file,
                                n.span,
                                format!("program `{p}` has no output `{}`", n.text),
                            );
                            d = match crate::diagnostics::closest(
                                &n.text,
                                outputs.iter().map(String::as_str),
                            ) {
                                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                                None => {
                                    d.with_help(format!("its outputs: {}", list_or_none(outputs)))
                                }
                            };
                            self.report(d);
                        }
                    }
                    let var = self.bind_name(kind, n, None, ctx);
                    self.shapes.unknown(var);
                    vars.push((n.text.clone(), var));
                }
                r::StmtKind::Bind {
                    target: r::BindTarget::Destructure(vars),
                    value: expr,
                }
            }
        }
    }

    /// `x = x + item` on a variable of this frame extends it in place (appending in a loop
    /// stays linear); any other value is a plain binding.
    fn append_or_bind(&mut self, var: VarId, expr: r::Expr, span: Span) -> r::StmtKind {
        let own = self.out.vars[var].owner == self.func;
        let whole = expr.span;
        match expr.kind {
            r::ExprKind::Binary(BinOp::Add, l, item)
                if own && matches!(l.kind, r::ExprKind::Var(v) if v == var) =>
            {
                r::StmtKind::Append {
                    var,
                    item: *item,
                    span,
                }
            }
            kind => r::StmtKind::Bind {
                target: r::BindTarget::Var(var),
                value: r::Expr { kind, span: whole },
            },
        }
    }
}
