//! Variables: looking names up, declaring them, and reading them.

use super::index::Target as Named;
use super::scope::{exclusive, Var, VarKind};
use super::{Analyzer, BlockVar, Ctx};
use crate::ast::*;
use crate::diagnostics::suggest;
use crate::diagnostics::{Code, Diagnostic};
use crate::resolved::{BlockId, FnId, VarId};
use crate::span::Span;
use rustc_hash::FxHashSet as HashSet;

/// Names a caller receives from a call, with the caller's variables that hold them.
type Received = Vec<(String, VarId)>;

impl<'a> Analyzer<'a> {
    /// Finds a visible name: the function's scopes, then (in a block) the program's.
    pub(super) fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.lookup(name).or_else(|| {
            if self.in_block {
                self.globals.get(name)
            } else {
                None
            }
        })
    }

    /// Finds a visible name that the program itself declared (not a block's variable seen
    /// after a call), for the rules about declaring names twice.
    pub(super) fn lookup_declared(&self, name: &str) -> Option<&Var> {
        self.lookup(name).filter(|v| v.kind != VarKind::BlockVar)
    }

    /// Every visible name, for suggestions.
    pub(super) fn visible_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.scopes.names().collect();
        if self.in_block {
            names.extend(self.globals.keys().map(String::as_str));
        }
        names
    }

    /// Marks a variable as read, reporting the first read of a block's variable (E146).
    pub(super) fn read_var(&mut self, var: &Var, at: Span, report: bool) -> VarId {
        self.out.vars[var.id].read = true;
        // In a `{name.path}` group, the name is just after the brace.
        let len = self.out.vars[var.id].name.as_ref().map_or(0, String::len);
        let written = if (at.end - at.start) as usize > len {
            Span::new(at.start as usize + 1, at.start as usize + 1 + len)
        } else {
            at
        };
        self.index.add(written, Named::Var(var.id), false);
        if var.kind == VarKind::BlockVar {
            if let Some(bv) = self.block_vars.get_mut(&var.id) {
                let first = !bv.reported;
                bv.reported |= report;
                let (providers, call) = (bv.providers.clone(), bv.call);
                let name = self.out.vars[var.id].name.clone().unwrap_or_default();
                for b in &providers {
                    let names = self.exported.entry(*b).or_default();
                    if !names.contains(&name) {
                        names.push(name.clone());
                    }
                }
                if first && report {
                    let block = &self.out.blocks[providers[0]].name;
                    let d = Diagnostic::new(
                        Code::E146,
                        self.file,
                        at,
                        format!(
                            "`{name}` is a variable of block `{block}`, not one of its outputs"
                        ),
                    )
                    .with_secondary(call, "visible here because of this call")
                    .with_help(format!(
                        "make it an output of the block: `output {name} = ...`"
                    ));
                    self.report(d);
                }
            }
        }
        var.id
    }

    /// Reads the variable `n`, reporting E105 (with a suggestion) when there is none.
    pub(super) fn name_expr(&mut self, n: &Name) -> Option<VarId> {
        if let Some(var) = self.lookup(&n.text).cloned() {
            return Some(self.read_var(&var, n.span, true));
        }
        let mut d = Diagnostic::new(
            Code::E105,
            self.file,
            n.span,
            format!("undefined variable `{}`", n.text),
        );
        if self.agents.contains_key(&n.text) {
            d = d.with_help(format!(
                "`{}` is an agent; run it with `session: {}`",
                n.text, n.text
            ));
        } else if self.blocks.contains_key(&n.text) {
            d = d.with_help(format!(
                "`{}` is a block; run it with `do {}`",
                n.text, n.text
            ));
        } else if self.programs.contains_key(&n.text) {
            d = d.with_help(format!(
                "`{}` is an imported program; call it with `{}(input: value)`",
                n.text, n.text
            ));
        } else if let Some((a, b)) = n
            .text
            .rsplit_once('-')
            .filter(|(a, _)| self.lookup(a).is_some())
        {
            d = d.with_help(format!(
                "a hyphen joins names; for subtraction write `{a} - {b}`"
            ));
        } else if let Some(s) = suggest::closest(&n.text, self.visible_names()) {
            d = d.with_help(format!("did you mean `{s}`?"));
        }
        self.report(d);
        None
    }

    pub(super) fn check_agent_clash(&mut self, name: &Name) {
        if let Some(agent) = self.agents.get(&name.text) {
            let prev = agent.span;
            self.report(
                Diagnostic::new(
                    Code::E106,
                    self.file,
                    name.span,
                    format!("variable `{}` has the name of an agent", name.text),
                )
                .with_secondary(prev, "agent defined here"),
            );
        }
    }

    /// A variable record for `name` declared here.
    fn var(&mut self, name: &Name, kind: VarKind, program: Option<String>, owner: FnId) -> Var {
        let id = self.new_var(Some(&name.text), owner);
        if !matches!(kind, VarKind::BlockOutput | VarKind::BlockVar) {
            self.index.add(name.span, Named::Var(id), true);
        }
        self.out.vars[id].kind = match kind {
            VarKind::Const => bytecode_spec::BindingKind::Const,
            VarKind::Input => bytecode_spec::BindingKind::Input,
            VarKind::Output => bytecode_spec::BindingKind::Output,
            _ => bytecode_spec::BindingKind::Let,
        };
        Var {
            kind,
            span: name.span,
            program,
            id,
            arms: self.arms.clone(),
        }
    }

    /// Declares `name` in the current namespace.
    pub(super) fn declare(&mut self, name: &Name, kind: VarKind, program: Option<String>) -> VarId {
        self.check_agent_clash(name);
        let var = self.var(name, kind, program, self.func);
        let id = var.id;
        self.scopes.ns().insert(name.text.clone(), var);
        let region = self.scopes.ns_region();
        self.index.add_visible(id, self.stmt_end, region);
        id
    }

    /// Declares a parallel branch's named result in the namespace around the branch.
    fn declare_result(&mut self, name: &Name, program: Option<String>) -> VarId {
        self.check_agent_clash(name);
        let owner = self.parent_func();
        let var = self.var(name, VarKind::Let, program, owner);
        let id = var.id;
        self.scopes.outer_ns().insert(name.text.clone(), var);
        let region = self.scopes.outer_ns_region();
        self.index.add_visible(id, self.stmt_end, region);
        id
    }

    /// Binds `name` with `let`, `const` or an assignment; returns the variable written.
    pub(super) fn bind_name(
        &mut self,
        kind: BindKind,
        name: &Name,
        program: Option<String>,
        ctx: Ctx,
    ) -> VarId {
        let existing = self.lookup_declared(&name.text).cloned();
        match (kind, existing) {
            (BindKind::Assign, Some(prev)) => {
                if !prev.kind.is_mutable() {
                    self.report(
                        Diagnostic::new(
                            Code::E104,
                            self.file,
                            name.span,
                            format!("cannot reassign {} `{}`", prev.kind.describe(), name.text),
                        )
                        .with_secondary(prev.span, "declared here"),
                    );
                }
                if let Some(v) = self.scopes.ns().get_mut(&name.text) {
                    v.program = program;
                }
                self.index.add(name.span, Named::Var(prev.id), false);
                prev.id
            }
            (BindKind::Assign, None) if ctx.parallel_branch => {
                // A parallel branch's named result: visible after the block.
                self.declare_result(name, program)
            }
            (BindKind::Assign, None) => {
                let help = match suggest::closest(&name.text, self.visible_names()) {
                    Some(s) => format!(
                        "did you mean `{s}`? As written this declares a new variable `{}`",
                        name.text
                    ),
                    None => format!("declare it with `let {} = ...`", name.text),
                };
                self.diag(
                    Code::W117,
                    name.span,
                    format!("`{}` is assigned without being declared", name.text),
                )
                .help = Some(help);
                self.declare(name, VarKind::Let, program)
            }
            (BindKind::Let | BindKind::Const, Some(prev)) => {
                let in_flat = self.scopes.ns().contains_key(&name.text);
                if in_flat && exclusive(&prev.arms, &self.arms) {
                    // Declared in another arm of an `if` or `choice`: only one ever runs.
                } else if prev.kind == VarKind::BlockOutput {
                    // Named by a call's output (`let analysis = do analyze(...)` where the
                    // block outputs `analysis`): one variable, declared once by the program.
                } else if prev.kind == VarKind::Const
                    || (!prev.kind.is_mutable() && prev.kind != VarKind::Input)
                {
                    self.report(
                        Diagnostic::new(
                            Code::E019,
                            self.file,
                            name.span,
                            format!(
                                "`{}` is already declared as a {}",
                                name.text,
                                prev.kind.describe()
                            ),
                        )
                        .with_secondary(prev.span, "declared here"),
                    );
                    if prev.kind == VarKind::Const && in_flat {
                        let d = Diagnostic::new(
                            Code::E104,
                            self.file,
                            name.span,
                            format!("cannot reassign const `{}`", name.text),
                        );
                        self.report(d);
                    }
                } else {
                    self.report(
                        Diagnostic::new(Code::E019, self.file, name.span, format!("`{}` is declared twice", name.text))
                            .with_secondary(prev.span, "first declared here")
                            .with_help("the second declaration is treated as an assignment; drop the `let` or pick another name"),
                    );
                }
                // The second declaration is an assignment to the variable already there.
                self.index.add(name.span, Named::Var(prev.id), false);
                if in_flat {
                    if let Some(v) = self.scopes.ns().get_mut(&name.text) {
                        v.program = program;
                    }
                } else {
                    let kind = if kind == BindKind::Const {
                        VarKind::Const
                    } else {
                        VarKind::Let
                    };
                    self.check_agent_clash(name);
                    let var = Var {
                        kind,
                        span: name.span,
                        program,
                        id: prev.id,
                        arms: self.arms.clone(),
                    };
                    self.scopes.ns().insert(name.text.clone(), var);
                }
                prev.id
            }
            (BindKind::Let, None) => self.declare(name, VarKind::Let, program),
            (BindKind::Const, None) => self.declare(name, VarKind::Const, program),
        }
    }

    /// Declares scoped names (loop variables and the like) in a new frame for a construct
    /// whose body is `region`, warning on shadowing; the variables belong to the current
    /// function.
    pub(super) fn open_frame(
        &mut self,
        names: &[&Name],
        kind: VarKind,
        code: Code,
        region: Span,
    ) -> Vec<VarId> {
        let outer: Vec<(Name, Span)> = names
            .iter()
            .filter_map(|n| {
                self.lookup_declared(&n.text)
                    .map(|v| ((*n).clone(), v.span))
            })
            .collect();
        for (n, prev) in outer {
            self.report(
                Diagnostic::new(
                    code,
                    self.file,
                    n.span,
                    format!("`{}` shadows an outer variable", n.text),
                )
                .with_secondary(prev, "outer variable declared here"),
            );
        }
        self.scopes.push(region);
        let mut ids = Vec::new();
        for n in names {
            let var = self.var(n, kind, None, self.func);
            ids.push(var.id);
            self.index.add_visible(var.id, region.start, region);
            self.scopes.declare_scoped(&n.text, var);
        }
        ids
    }

    /// After `do f(...)`, the block's named outputs are visible to the caller, and so are
    /// its other variables (reading one is E146). Returns the caller's variables receiving
    /// the outputs and those receiving the block's variables.
    pub(super) fn declare_block_outputs(
        &mut self,
        name: &Name,
        block: BlockId,
    ) -> (Received, Received) {
        let (outputs, names) = match self.blocks.get(&name.text) {
            Some(b) => (b.outputs.clone(), b.names.clone()),
            None => return (Vec::new(), Vec::new()),
        };
        let mut received = Vec::new();
        for o in outputs {
            let id = match self.lookup(&o) {
                Some(v) => v.id,
                None => {
                    let n = Name {
                        text: o.clone(),
                        span: name.span,
                    };
                    let var = self.var(&n, VarKind::BlockOutput, None, self.func);
                    let id = var.id;
                    self.scopes.ns().insert(o.clone(), var);
                    let region = self.scopes.ns_region();
                    self.index.add_visible(id, self.stmt_end, region);
                    id
                }
            };
            self.shapes.unknown(id);
            received.push((o, id));
        }
        let mut exports = Vec::new();
        for n in names {
            match self.lookup(&n) {
                None => {
                    let nm = Name {
                        text: n.clone(),
                        span: name.span,
                    };
                    let var = self.var(&nm, VarKind::BlockVar, None, self.func);
                    let id = var.id;
                    self.scopes.ns().insert(n.clone(), var);
                    self.block_vars.insert(
                        id,
                        BlockVar {
                            providers: vec![block],
                            call: name.span,
                            reported: false,
                        },
                    );
                    self.shapes.unknown(id);
                    exports.push((n, id));
                }
                Some(v) if v.kind == VarKind::BlockVar => {
                    let id = v.id;
                    if let Some(bv) = self.block_vars.get_mut(&id) {
                        if !bv.providers.contains(&block) {
                            bv.providers.push(block);
                        }
                    }
                    exports.push((n, id));
                }
                Some(_) => {}
            }
        }
        (received, exports)
    }

    /// Whether the program declares `name` anywhere (for names bound late).
    pub(super) fn declared_anywhere(&mut self, name: &str) -> bool {
        let program = self.program;
        self.all_names
            .get_or_insert_with(|| {
                let mut names = HashSet::default();
                collect_declared_names(&program.stmts, &mut names);
                names
            })
            .contains(name)
    }
}

/// Collects every name a file declares anywhere (bindings, inputs, outputs, loop variables,
/// parameters), for late-bound interpolation in agent prompts.
fn collect_declared_names<'a>(stmts: &'a [Stmt], out: &mut HashSet<&'a str>) {
    fn expr_names<'a>(e: &'a Expr, out: &mut HashSet<&'a str>) {
        match &e.kind {
            ExprKind::For(l) => {
                out.insert(l.item.text.as_str());
                if let Some(i) = &l.index {
                    out.insert(i.text.as_str());
                }
            }
            ExprKind::Repeat(l) => {
                if let Some(i) = &l.index {
                    out.insert(i.text.as_str());
                }
            }
            ExprKind::Loop(l) => {
                if let Some(i) = &l.index {
                    out.insert(i.text.as_str());
                }
            }
            ExprKind::Try(t) => {
                if let Some(CatchClause { name: Some(n), .. }) = &t.catch {
                    out.insert(n.text.as_str());
                }
            }
            ExprKind::Pipeline(_, stages) => {
                out.insert("item");
                for s in stages {
                    for p in s.params.iter().flatten() {
                        out.insert(p.text.as_str());
                    }
                }
            }
            _ => {}
        }
    }
    let mut visit = |s: &'a Stmt| {
        match &s.kind {
            StmtKind::Input { name: Some(n), .. } | StmtKind::Output { name: Some(n), .. } => {
                out.insert(n.text.as_str());
            }
            StmtKind::Bind { target, .. } => match target {
                Target::Name(n) => {
                    out.insert(n.text.as_str());
                }
                Target::Destructure(ns, _) => {
                    for n in ns {
                        out.insert(n.text.as_str());
                    }
                }
            },
            StmtKind::BlockDef(b) => {
                for p in &b.params {
                    out.insert(p.text.as_str());
                }
                collect_declared_names(&b.body.stmts, out);
            }
            _ => {}
        }
        if let StmtKind::Output { value, .. }
        | StmtKind::Bind { value, .. }
        | StmtKind::Expr(value) = &s.kind
        {
            expr_names(value, out);
        }
    };
    let mut all = Vec::new();
    walk_stmts(stmts, &mut |s| all.push(s));
    for s in all {
        visit(s);
    }
}
