//! Expressions: names, strings and their interpolations, invocations of programs and
//! blocks.

use super::{list_or_none, Analyzer, Ctx};
use crate::ast::*;
use crate::diagnostics::suggest;
use crate::diagnostics::{Code, Diagnostic};
use crate::resolved as r;
use crate::span::Span;
use rustc_hash::FxHashSet as HashSet;

fn lit(value: r::Literal, span: Span) -> r::Expr {
    r::Expr {
        kind: r::ExprKind::Lit(value),
        span,
    }
}

impl<'a> Analyzer<'a> {
    pub(super) fn expr(&mut self, e: &'a Expr) -> r::Expr {
        let kind = match &e.kind {
            ExprKind::Name(n) => match self.name_expr(n) {
                Some(v) => r::ExprKind::Var(v),
                None => r::ExprKind::Lit(r::Literal::Null),
            },
            ExprKind::Int(i) => r::ExprKind::Lit(r::Literal::Int(*i)),
            ExprKind::Float(f) => r::ExprKind::Lit(r::Literal::Float(*f)),
            ExprKind::Bool(b) => r::ExprKind::Lit(r::Literal::Bool(*b)),
            ExprKind::Null | ExprKind::Error => r::ExprKind::Lit(r::Literal::Null),
            ExprKind::Str(s) => r::ExprKind::Str(self.template(s)),
            ExprKind::Discretion(s) => r::ExprKind::Discretion(self.discretion(s, e.span)),
            ExprKind::Array(items) => {
                r::ExprKind::List(items.iter().map(|i| self.expr(i)).collect())
            }
            ExprKind::Object(entries) => r::ExprKind::Record(
                entries
                    .iter()
                    .map(|en| (en.key.text.clone(), self.expr(&en.value)))
                    .collect(),
            ),
            ExprKind::Member(base, field) => {
                let b = self.expr(base);
                if let Some((root, path)) = super::shapes::member_path(e) {
                    if let Some(var) = self.lookup(&root.text).map(|v| v.id) {
                        self.shapes.read(var, path);
                    }
                }
                if let ExprKind::Name(n) = &base.kind {
                    let program = self.lookup(&n.text).and_then(|v| v.program.clone());
                    if let Some(p) = program {
                        self.check_program_output(&p, &field.text, field.span);
                    }
                }
                r::ExprKind::Member(Box::new(b), field.text.clone())
            }
            ExprKind::Index(base, idx) => {
                r::ExprKind::Index(Box::new(self.expr(base)), Box::new(self.expr(idx)))
            }
            ExprKind::Call(callee, args) => self.invoke(callee, args),
            ExprKind::Unary(UnOp::Not, x) => r::ExprKind::Not(Box::new(self.expr(x))),
            ExprKind::Unary(UnOp::Neg, x) => r::ExprKind::Neg(Box::new(self.expr(x))),
            ExprKind::Binary(op, l, rhs) => {
                r::ExprKind::Binary(*op, Box::new(self.expr(l)), Box::new(self.expr(rhs)))
            }
            ExprKind::Session(s) => {
                r::ExprKind::Session(Box::new(super::props::session(self, s, e.span)))
            }
            ExprKind::DoCall { name, args } => self.do_call(e, name, args.as_deref()),
            ExprKind::DoBlock(b) => r::ExprKind::Do(self.body(b, Ctx::default(), "`do:` block")),
            ExprKind::Arrow(items) => {
                r::ExprKind::Arrow(items.iter().map(|i| self.expr(i)).collect())
            }
            ExprKind::Pipeline(head, stages) => self.pipeline(head, stages),
            ExprKind::Parallel { mods, body } => self.parallel(mods, body),
            ExprKind::For(l) => self.for_loop(l),
            ExprKind::Repeat(l) => self.repeat(l),
            ExprKind::Loop(l) => self.unbounded(e, l),
            ExprKind::Try(t) => self.try_block(e, t),
            ExprKind::If {
                branches,
                else_body,
            } => self.if_expr(branches, else_body.as_ref()),
            ExprKind::Choice { criteria, options } => self.choice(e, criteria, options),
        };
        r::Expr { kind, span: e.span }
    }

    /// A string's template: `{name}` groups naming a visible variable interpolate, others
    /// stay as written (E140).
    pub(super) fn template(&mut self, s: &StrLit) -> r::Template {
        let mut parts = Vec::with_capacity(s.parts.len());
        for part in &s.parts {
            match part {
                StrPart::Text(t) => parts.push(r::TplPart::Text(t.clone())),
                StrPart::Interp(i) => match self.lookup(&i.root).cloned() {
                    Some(var) => {
                        let id = self.read_var(&var, i.span, true);
                        self.shapes.read(id, super::shapes::interp_path(i));
                        if let (Some(p), Some((field, span))) =
                            (&var.program, super::shapes::interp_path(i).first())
                        {
                            self.check_program_output(p, field, *span);
                        }
                        parts.push(r::TplPart::Var {
                            var: id,
                            path: i.path.clone(),
                            name: i.root.clone(),
                        });
                    }
                    None if self.misspelt_interpolation(i) => {
                        parts.push(r::TplPart::Text(i.raw.clone()));
                    }
                    None => {
                        self.diag(
                            Code::E140,
                            i.span,
                            format!(
                                "`{}` is not a variable here; the text stays as written",
                                i.raw
                            ),
                        )
                        .help = Some(
                            "declare the variable before this point, or write `\\{` for literal braces"
                                .into(),
                        );
                        parts.push(r::TplPart::Text(i.raw.clone()));
                    }
                },
            }
        }
        r::Template { parts }
    }

    /// Reports W122 when a `{name}` that is no variable is a likely misspelling of one in
    /// scope (placeholder text for the model, far from every name, stays E140).
    fn misspelt_interpolation(&mut self, i: &Interp) -> bool {
        let Some(s) = suggest::closest(&i.root, self.visible_names()).map(str::to_string) else {
            return false;
        };
        let root = Span::new(
            i.span.start as usize + 1,
            i.span.start as usize + 1 + i.root.len(),
        );
        self.diag(
            Code::W122,
            root,
            format!(
                "`{}` is not a variable here; the text goes to the model as written",
                i.raw
            ),
        )
        .help = Some(format!("did you mean `{s}`?"));
        true
    }

    /// A template resolved in the current scope without reporting anything: for text whose
    /// problems are reported where it is written (an agent's prompt and permissions, used
    /// by each session of the agent).
    pub(super) fn quiet_template(&mut self, s: &StrLit) -> r::Template {
        let mut parts = Vec::with_capacity(s.parts.len());
        for part in &s.parts {
            match part {
                StrPart::Text(t) => parts.push(r::TplPart::Text(t.clone())),
                StrPart::Interp(i) => match self.lookup(&i.root).cloned() {
                    Some(var) => parts.push(r::TplPart::Var {
                        var: self.read_var(&var, i.span, false),
                        path: i.path.clone(),
                        name: i.root.clone(),
                    }),
                    None => parts.push(r::TplPart::Text(i.raw.clone())),
                },
            }
        }
        r::Template { parts }
    }

    /// Interpolations in agent prompts resolve when a session uses the agent: they may
    /// name any variable of the program.
    pub(super) fn late_strlit(&mut self, s: &StrLit) {
        for part in &s.parts {
            if let StrPart::Interp(i) = part {
                if !self.declared_anywhere(&i.root) {
                    self.diag(
                        Code::E140,
                        i.span,
                        format!(
                            "`{}` names no variable of this program; the text stays as written",
                            i.raw
                        ),
                    );
                }
            }
        }
    }

    fn discretion(&mut self, s: &StrLit, span: Span) -> r::Template {
        let text = s.raw_text();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            self.diag(Code::E121, span, "discretion condition is empty");
        } else if trimmed.chars().count() < 4 {
            self.diag(
                Code::W109,
                span,
                format!("discretion condition `{trimmed}` is very short and may be ambiguous"),
            )
            .help = Some("say what should be true, in a few words".into());
        }
        self.template(s)
    }

    /// `program(input: value)`: an invocation of an imported program.
    fn invoke(&mut self, callee: &Expr, args: &'a [Arg]) -> r::ExprKind {
        let mut values: Vec<Option<r::Expr>> =
            args.iter().map(|a| Some(self.expr(&a.value))).collect();
        let null = r::ExprKind::Lit(r::Literal::Null);
        let ExprKind::Name(name) = &callee.kind else {
            self.diag(
                Code::E141,
                callee.span,
                "only imported programs can be called",
            );
            return null;
        };
        let Some(program) = self.programs.get(&name.text) else {
            if self.blocks.contains_key(&name.text) {
                self.diag(
                    Code::E141,
                    name.span,
                    format!("`{}` is a block, not a program", name.text),
                )
                .help = Some(format!("call blocks with `do {}(...)`", name.text));
            } else {
                let mut d = Diagnostic::new(
                    Code::E025,
                    self.file,
                    name.span,
                    format!("no imported program is named `{}`", name.text),
                );
                d = match suggest::closest(&name.text, self.programs.keys().map(String::as_str)) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => {
                        d.with_help(format!("import it first: `use \"@handle/{}\"`", name.text))
                    }
                };
                self.report(d);
            }
            return null;
        };
        let import = program.import;
        self.index.add(
            name.span,
            super::index::Target::Program(name.text.clone()),
            false,
        );
        let contract = match &program.status {
            super::ImportStatus::Resolved(c) => Some(c.clone()),
            _ => None,
        };
        let mut given = HashSet::default();
        for a in args {
            match &a.name {
                None => {
                    self.diag(
                        Code::E143,
                        a.value.span,
                        "arguments to a program must be named",
                    )
                    .help = Some("write `input-name: value`".into());
                }
                Some(n) => {
                    self.index.add_contract_ref(
                        n.span,
                        &name.text,
                        super::index::ContractSide::Input,
                        &n.text,
                    );
                    given.insert(n.text.clone());
                    if let Some(c) = &contract {
                        if !c.inputs.contains(&n.text) {
                            let mut d = Diagnostic::new(
                                Code::E027,
                                self.file,
                                n.span,
                                format!("program `{}` has no input `{}`", name.text, n.text),
                            );
                            d = match suggest::closest(&n.text, c.inputs.iter().map(String::as_str))
                            {
                                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                                None => {
                                    d.with_help(format!("its inputs: {}", list_or_none(&c.inputs)))
                                }
                            };
                            self.report(d);
                        }
                    }
                }
            }
        }
        let Some(c) = contract else {
            return null;
        };
        let missing: Vec<&String> = c.inputs.iter().filter(|i| !given.contains(*i)).collect();
        if !missing.is_empty() {
            let list: Vec<String> = missing.iter().map(|m| format!("`{m}`")).collect();
            self.diag(
                Code::E026,
                callee.span,
                format!(
                    "missing input {} for program `{}`",
                    list.join(", "),
                    name.text
                ),
            );
        }
        let Some(import) = import else {
            return null;
        };
        // Arguments in the callee's input order.
        let args = c
            .inputs
            .iter()
            .map(|p| {
                let i = args
                    .iter()
                    .position(|a| a.name.as_ref().is_some_and(|n| &n.text == p))?;
                values[i].take()
            })
            .collect();
        r::ExprKind::Invoke(Box::new(r::Invoke {
            import,
            args,
            callee: callee.span,
        }))
    }

    /// `do block(args)`.
    fn do_call(&mut self, e: &Expr, name: &Name, args: Option<&'a [Arg]>) -> r::ExprKind {
        let mut values: Vec<Option<r::Expr>> = args
            .unwrap_or_default()
            .iter()
            .map(|a| Some(self.expr(&a.value)))
            .collect();
        let Some(b) = self.blocks.get(&name.text) else {
            let mut d = Diagnostic::new(
                Code::E108,
                self.file,
                name.span,
                format!("undefined block `{}`", name.text),
            );
            if self.agents.contains_key(&name.text) {
                d = d.with_help(format!(
                    "`{}` is an agent; run it with `session: {}`",
                    name.text, name.text
                ));
            } else if self.programs.contains_key(&name.text) {
                d = d.with_help(format!(
                    "`{}` is an imported program; call it with `{}(input: value)`",
                    name.text, name.text
                ));
            } else if let Some(s) =
                suggest::closest(&name.text, self.blocks.keys().map(String::as_str))
            {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
            self.report(d);
            return r::ExprKind::Lit(r::Literal::Null);
        };
        let (block, expected, span) = (b.id, b.def.params.len(), b.span);
        self.index
            .add(name.span, super::index::Target::Block(block), false);
        let got = values.len();
        if expected != got {
            self.report(
                Diagnostic::new(
                    Code::W103,
                    self.file,
                    e.span,
                    format!(
                        "block `{}` takes {expected} argument(s) but {got} were given",
                        name.text
                    ),
                )
                .with_secondary(span, "block defined here"),
            );
        }
        values.resize_with(expected, || None);
        let (outputs, exports) = self.declare_block_outputs(name, block);
        r::ExprKind::Call(Box::new(r::Call {
            block,
            args: values,
            name: name.span,
            outputs,
            exports,
        }))
    }
}

/// A `null` standing for an expression that was reported as wrong.
pub(super) fn null(span: Span) -> r::Expr {
    lit(r::Literal::Null, span)
}
