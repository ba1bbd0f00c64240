//! Compound constructs: `parallel`, loops, `try`, `if`, `choice` and pipelines.

use super::exprs::null;
use super::scope::{Var, VarKind};
use super::{extent, modifiers, Analyzer, Ctx};
use crate::ast::*;
use crate::diagnostics::{Code, Diagnostic};
use crate::resolved as r;
use crate::span::Span;
use rustc_hash::FxHashMap as HashMap;

/// The span of a construct's leading keyword of `len` bytes.
fn keyword(e: &Expr, len: usize) -> Span {
    Span::new(e.span.start as usize, e.span.start as usize + len)
}

impl<'a> Analyzer<'a> {
    pub(super) fn parallel(&mut self, mods: &[Arg], body: &'a Body) -> r::ExprKind {
        let join = modifiers::parallel(self, mods, Some(body.stmts.len()));
        if body.stmts.is_empty() {
            self.diag(Code::W116, body.span, "parallel block has an empty body");
        }
        // Each branch runs in a frame of its own and declares into a namespace of its own.
        self.depth += 1;
        let mut branches = Vec::with_capacity(body.stmts.len());
        for s in &body.stmts {
            let func = self.new_branch();
            self.scopes.push_branch(s.span);
            let ctx = Ctx {
                parallel_branch: true,
            };
            let stmt = self.in_func(func, |a| a.stmt(s, ctx, true));
            self.scopes.pop_branch();
            let result = match (&s.kind, &stmt.kind) {
                (
                    StmtKind::Bind {
                        kind: BindKind::Assign,
                        target: Target::Name(n),
                        ..
                    },
                    r::StmtKind::Bind {
                        target: r::BindTarget::Var(v),
                        ..
                    },
                ) => Some((n.text.clone(), *v)),
                _ => None,
            };
            branches.push(r::Branch { func, result, stmt });
        }
        self.depth -= 1;
        r::ExprKind::Parallel(Box::new(r::Parallel { join, branches }))
    }

    pub(super) fn for_loop(&mut self, l: &'a ForLoop) -> r::ExprKind {
        let ForLoop {
            parallel,
            item,
            index,
            iter,
            body,
        } = l;
        let join = parallel
            .as_ref()
            .map(|mods| modifiers::parallel(self, mods, None));
        let iter = self.expr(iter);
        let mut names = vec![item];
        names.extend(index.as_ref());
        let (vars, body, parallel) = match join {
            Some(join) => {
                // Each iteration runs in a frame of its own, with a namespace of its own; the
                // item and index are its parameters.
                let func = self.new_branch();
                let (vars, body) = self.in_func(func, |a| {
                    let vars = a.open_frame(&names, VarKind::Loop, Code::W106, extent(body));
                    a.scopes.push_branch(extent(body));
                    let body = a.body(body, Ctx::default(), "for loop");
                    a.scopes.pop_branch();
                    (vars, body)
                });
                (vars, body, Some((join, func)))
            }
            None => {
                let vars = self.open_frame(&names, VarKind::Loop, Code::W106, extent(body));
                (vars, self.body(body, Ctx::default(), "for loop"), None)
            }
        };
        self.scopes.pop();
        r::ExprKind::For(Box::new(r::For {
            parallel,
            item: vars[0],
            index: vars.get(1).copied(),
            iter,
            body,
        }))
    }

    pub(super) fn repeat(&mut self, l: &'a RepeatLoop) -> r::ExprKind {
        let RepeatLoop { count, index, body } = l;
        let count = match &count.kind {
            ExprKind::Int(n) if *n < 1 => {
                self.diag(
                    Code::E117,
                    count.span,
                    format!("repeat count must be positive, not {n}"),
                );
                null(count.span)
            }
            ExprKind::Unary(UnOp::Neg, _) => {
                self.diag(Code::E117, count.span, "repeat count must be positive");
                null(count.span)
            }
            ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::Null
            | ExprKind::Array(_)
            | ExprKind::Object(_) => {
                self.diag(Code::E118, count.span, "repeat count must be an integer");
                null(count.span)
            }
            _ => self.expr(count),
        };
        let names: Vec<&Name> = index.iter().collect();
        let vars = self.open_frame(&names, VarKind::Loop, Code::W106, extent(body));
        let body = self.body(body, Ctx::default(), "repeat loop");
        self.scopes.pop();
        r::ExprKind::Repeat(Box::new(r::Repeat {
            count,
            index: vars.first().copied(),
            body,
        }))
    }

    pub(super) fn unbounded(&mut self, e: &Expr, l: &'a UnboundedLoop) -> r::ExprKind {
        let UnboundedLoop {
            kind,
            cond,
            mods,
            index,
            body,
        } = l;
        let max = modifiers::loop_max(self, mods);
        let cond = cond.as_ref().map(|c| self.expr(c));
        match (kind, &max) {
            (LoopKind::Plain, None) => {
                self.diag(Code::W107, keyword(e, 4), "loop has no condition and no max")
                    .help = Some("add `(max: N)`; without it the run stops the loop at the VM's global iteration limit".into());
            }
            (LoopKind::Until | LoopKind::While, None) => {
                self.diag(Code::W108, keyword(e, 4), "conditional loop has no max")
                    .help = Some("add `(max: N)` after the condition so the loop ends even if the condition never settles".into());
            }
            _ => {}
        }
        let names: Vec<&Name> = index.iter().collect();
        let vars = self.open_frame(&names, VarKind::Loop, Code::W106, extent(body));
        let body = self.body(body, Ctx::default(), "loop");
        self.scopes.pop();
        r::ExprKind::Loop(Box::new(r::Loop {
            kind: *kind,
            cond,
            max,
            index: vars.first().copied(),
            body,
        }))
    }

    pub(super) fn try_block(&mut self, e: &Expr, t: &'a TryBlock) -> r::ExprKind {
        let TryBlock {
            body,
            catch,
            finally,
        } = t;
        if catch.is_none() && finally.is_none() {
            self.diag(
                Code::E124,
                keyword(e, 3),
                "`try` needs a `catch:` or a `finally:`",
            );
        }
        let body = self.body(body, Ctx::default(), "try");
        let catch = catch.as_ref().map(|c| {
            let err = match &c.name {
                Some(n) => self.open_frame(&[n], VarKind::Error, Code::W111, extent(&c.body))[0],
                None => {
                    self.scopes.push(extent(&c.body));
                    self.new_var(None, self.func)
                }
            };
            self.catches.push(err);
            let body = self.body(&c.body, Ctx::default(), "catch");
            self.catches.pop();
            self.scopes.pop();
            (err, body)
        });
        let finally = finally
            .as_ref()
            .map(|f| self.body(f, Ctx::default(), "finally"));
        r::ExprKind::Try(Box::new(r::Try {
            body,
            catch,
            finally,
        }))
    }

    pub(super) fn if_expr(
        &mut self,
        branches: &'a [(Expr, Body)],
        else_body: Option<&'a Body>,
    ) -> r::ExprKind {
        let construct = self.new_construct();
        let mut arms = Vec::with_capacity(branches.len());
        for (i, (c, b)) in branches.iter().enumerate() {
            let cond = self.expr(c);
            let what = if i == 0 { "`if`" } else { "`elif`" };
            let body = self.exclusive_arm(construct, i as u32, |a| {
                a.branch_body(b, Ctx::default(), what)
            });
            arms.push((cond, body));
        }
        let else_body = else_body.map(|b| {
            self.exclusive_arm(construct, branches.len() as u32, |a| {
                a.branch_body(b, Ctx::default(), "`else`")
            })
        });
        r::ExprKind::If(Box::new(r::If {
            branches: arms,
            else_body,
        }))
    }

    pub(super) fn choice(
        &mut self,
        e: &Expr,
        criteria: &'a Expr,
        options: &'a [ChoiceOption],
    ) -> r::ExprKind {
        let criteria = match &criteria.kind {
            ExprKind::Str(s) if s.raw_text().trim().is_empty() => {
                self.diag(Code::E121, criteria.span, "choice criteria are empty");
                r::Template::text("")
            }
            _ => match self.expr(criteria).kind {
                r::ExprKind::Str(t) | r::ExprKind::Discretion(t) => t,
                // `choice verdict:`: the criteria are the variable's value when the choice
                // is made.
                r::ExprKind::Var(var) => r::Template {
                    parts: vec![r::TplPart::Var {
                        var,
                        path: Vec::new(),
                        name: self.out.vars[var].name.clone().unwrap_or_default(),
                    }],
                },
                _ => {
                    self.diag(
                        Code::E144,
                        criteria.span,
                        "choice criteria must be text: a string, a `**condition**` or a variable",
                    )
                    .help = Some("write `choice **what decides**:`".into());
                    r::Template::text("")
                }
            },
        };
        if options.is_empty() {
            self.diag(Code::E128, keyword(e, 6), "choice has no options")
                .help = Some("add indented `option \"label\":` blocks".into());
        }
        let construct = self.new_construct();
        let mut labels: HashMap<String, Span> = HashMap::default();
        let mut out = Vec::with_capacity(options.len());
        for (i, o) in options.iter().enumerate() {
            let label = o.label.raw_text();
            if let Some(prev) = labels.get(&label) {
                let prev = *prev;
                self.report(
                    Diagnostic::new(
                        Code::W114,
                        self.file,
                        o.label.span,
                        format!("option label {label:?} is used twice"),
                    )
                    .with_secondary(prev, "first used here"),
                );
            } else {
                labels.insert(label, o.label.span);
            }
            let label = self.template(&o.label);
            if o.body.stmts.is_empty() {
                self.diag(Code::W115, o.label.span, "option has an empty body");
            }
            self.depth += 1;
            let body = self.exclusive_arm(construct, i as u32, |a| {
                a.stmts(&o.body.stmts, Ctx::default())
            });
            self.depth -= 1;
            out.push((label, body));
        }
        r::ExprKind::Choice(Box::new(r::Choice {
            criteria,
            options: out,
        }))
    }

    pub(super) fn pipeline(&mut self, head: &'a Expr, stages: &'a [PipeStage]) -> r::ExprKind {
        let head = self.expr(head);
        let mut out = Vec::with_capacity(stages.len());
        for st in stages {
            out.push(self.stage(st));
        }
        r::ExprKind::Pipeline(Box::new(head), out)
    }

    fn stage(&mut self, st: &'a PipeStage) -> r::Stage {
        let op = st.op.text.as_str();
        let names: Vec<&Name> = match (op, &st.params) {
            ("map" | "filter" | "pmap", None) => Vec::new(),
            ("map" | "filter" | "pmap", Some(_)) => {
                self.diag(
                    Code::E122,
                    st.op.span,
                    format!("`{op}` takes no names; its element is `item`"),
                );
                Vec::new()
            }
            ("reduce", Some(ps)) if ps.len() == 2 => ps.iter().collect(),
            ("reduce", _) => {
                self.diag(
                    Code::E123,
                    st.op.span,
                    "`reduce` needs accumulator and item names",
                )
                .help = Some("write `reduce(acc, item):`".into());
                Vec::new()
            }
            _ => {
                let mut d = Diagnostic::new(
                    Code::E122,
                    self.file,
                    st.op.span,
                    format!("`{op}` is not a pipeline operation"),
                );
                d = match crate::diagnostics::closest(op, ["map", "filter", "reduce", "pmap"]) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help("use map, filter, reduce or pmap"),
                };
                self.report(d);
                Vec::new()
            }
        };
        if op == "reduce" {
            let vars = self.open_frame(&names, VarKind::Pipe, Code::W110, extent(&st.body));
            let body = self.body(&st.body, Ctx::default(), "pipeline stage");
            self.scopes.pop();
            let (acc, item) = match vars[..] {
                [acc, item] => (acc, item),
                // Reported above (E123): the stage is not lowered.
                _ => (self.new_var(None, self.func), self.new_var(None, self.func)),
            };
            return r::Stage {
                op: r::StageOp::Reduce { acc, item },
                body,
                span: st.span,
            };
        }
        // The implicit `item` of map/filter/pmap shadows silently unless the program
        // declared its own `item`.
        let shadows = self.lookup_declared("item").map(|v| (v.span, v.kind));
        if let Some((prev, kind)) = shadows {
            if kind != VarKind::Pipe {
                self.report(
                    Diagnostic::new(
                        Code::W110,
                        self.file,
                        st.op.span,
                        "the pipeline's `item` shadows an outer variable named `item`",
                    )
                    .with_secondary(prev, "outer `item` declared here"),
                );
            }
        }
        let pmap = (op == "pmap").then(|| self.new_branch());
        let owner = pmap.unwrap_or(self.func);
        let item = self.new_var(Some("item"), owner);
        let region = extent(&st.body);
        self.scopes.push(region);
        self.index.add_visible(item, region.start, region);
        self.scopes.declare_scoped(
            "item",
            Var {
                kind: VarKind::Pipe,
                span: st.op.span,
                program: None,
                id: item,
                arms: self.arms.clone(),
            },
        );
        let (op, body) = match pmap {
            Some(func) => {
                // Each element runs as a branch with a namespace of its own.
                let body = self.in_func(func, |a| {
                    a.scopes.push_branch(region);
                    let body = a.body(&st.body, Ctx::default(), "pipeline stage");
                    a.scopes.pop_branch();
                    body
                });
                (r::StageOp::Pmap { item, func }, body)
            }
            None => {
                let body = self.body(&st.body, Ctx::default(), "pipeline stage");
                let op = if op == "filter" {
                    r::StageOp::Filter { item }
                } else {
                    r::StageOp::Map { item }
                };
                (op, body)
            }
        };
        self.scopes.pop();
        r::Stage {
            op,
            body,
            span: st.span,
        }
    }
}
