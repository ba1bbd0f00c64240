//! Semantic analysis: name resolution and the reference's validation rules.
//!
//! Analysis runs in two passes over one file. The first collects what is hoisted or declared
//! by position: imports, skills, agents, blocks (with their parameters and named outputs) and
//! the program's parameters (`input`s before any executable statement). The second walks the
//! program body, then every block body, resolving names in source order and checking each
//! construct. Block bodies see every program-level variable, since blocks are hoisted and
//! run when called.

mod props;
mod scope;

use crate::ast::*;
use crate::diagnostics::{Code, Diagnostic};
use crate::source::FileId;
use crate::span::Span;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use scope::{Scopes, Var, VarKind};
use std::collections::HashMap as StdHashMap;

/// The interface of a program as seen by programs that import it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Contract {
    /// Inputs declared before any executable statement (all required).
    pub inputs: Vec<String>,
    /// Named outputs bound at program level.
    pub outputs: Vec<String>,
}

/// What the import loader found for a `use` path.
#[derive(Clone, Debug)]
pub enum ImportStatus {
    /// Loaded and analysed: its contract is known.
    Resolved(Contract),
    /// A registry name with no library path to look in: usable, but not checked.
    Unresolved,
    /// Loading failed; the loader reported why.
    Failed,
}

/// Facts later phases need about how names were resolved.
#[derive(Clone, Debug, Default)]
pub struct Resolutions {
    /// Start offsets of `{name}` groups that interpolate (the others are literal text).
    pub interpolations: HashSet<u32>,
}

/// The result of analysing one file.
#[derive(Debug, Default)]
pub struct Analysis {
    /// Everything found, in no particular order.
    pub diagnostics: Vec<Diagnostic>,
    /// The file's own interface.
    pub contract: Contract,
    /// Name resolution facts.
    pub resolutions: Resolutions,
}

struct AgentInfo {
    span: Span,
    persistent: bool,
}

struct BlockInfo {
    span: Span,
    params: usize,
    outputs: Vec<String>,
}

struct ProgramInfo {
    span: Span,
    status: ImportStatus,
}

/// Where an expression sits, for the checks that depend on it.
#[derive(Clone, Copy, Default)]
struct Ctx {
    /// Directly a branch of a `parallel:` block: assignments declare named results.
    parallel_branch: bool,
}

struct Analyzer<'a> {
    file: FileId,
    imports: &'a StdHashMap<String, ImportStatus>,
    diags: Vec<Diagnostic>,
    agents: HashMap<String, AgentInfo>,
    blocks: HashMap<String, BlockInfo>,
    programs: HashMap<String, ProgramInfo>,
    skills: HashSet<String>,
    /// The file being analysed.
    program: &'a Program,
    /// Every name declared anywhere in the file (for agent prompts, bound late); computed
    /// on first use, since most programs never interpolate in agent prompts.
    all_names: Option<HashSet<&'a str>>,
    /// Program-level variables, visible inside block bodies.
    globals: HashMap<String, Var>,
    outputs: HashMap<String, Span>,
    contract: Contract,
    scopes: Scopes,
    in_block: bool,
    /// How many bodies deep the walk is (0: the program's top level).
    depth: u32,
    resolutions: Resolutions,
}

/// Analyses a parsed file. `imports` maps each `use` path to what the loader found.
pub fn analyze<'a>(
    file: FileId,
    program: &'a Program,
    imports: &'a StdHashMap<String, ImportStatus>,
) -> Analysis {
    let mut a = Analyzer {
        file,
        imports,
        diags: Vec::new(),
        agents: HashMap::default(),
        blocks: HashMap::default(),
        programs: HashMap::default(),
        skills: HashSet::default(),
        program,
        all_names: None,
        globals: HashMap::default(),
        outputs: HashMap::default(),
        contract: Contract::default(),
        scopes: Scopes::default(),
        in_block: false,
        depth: 0,
        resolutions: Resolutions::default(),
    };
    a.collect(program);
    a.stmts(&program.stmts, Ctx::default());
    a.globals = std::mem::take(&mut a.scopes.flat);
    for stmt in &program.stmts {
        a.block_bodies(stmt);
    }
    Analysis {
        diagnostics: a.diags,
        contract: a.contract,
        resolutions: a.resolutions,
    }
}

/// The name a `use` path is known by without an alias: its last segment, minus `.prose`.
pub fn default_import_name(path: &str) -> String {
    let last = path.rsplit('/').next().unwrap_or(path);
    last.strip_suffix(".prose").unwrap_or(last).to_string()
}

/// Whether a `use` path has a supported form: `@handle/slug`, or a relative path.
pub fn valid_use_path(path: &str) -> bool {
    if let Some(rest) = path.strip_prefix('@') {
        let mut parts = rest.split('/');
        let ok = |s: Option<&str>| {
            s.is_some_and(|s| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            })
        };
        ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
    } else {
        path.strip_prefix("./")
            .or_else(|| path.strip_prefix("../"))
            .is_some_and(|rest| !rest.is_empty())
    }
}

/// Spans of the statements that failed to parse, at any depth (block bodies included).
pub fn unparsed_spans(program: &Program) -> Vec<Span> {
    fn visit(stmts: &[Stmt], out: &mut Vec<Span>) {
        walk_stmts(stmts, &mut |s| match &s.kind {
            StmtKind::Error => out.push(s.span),
            StmtKind::BlockDef(b) => visit(&b.body.stmts, out),
            _ => {}
        });
    }
    let mut out = Vec::new();
    visit(&program.stmts, &mut out);
    out
}

impl Analyzer<'_> {
    fn report(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn diag(&mut self, code: Code, span: Span, msg: impl Into<String>) -> &mut Diagnostic {
        self.diags.push(Diagnostic::new(code, self.file, span, msg));
        self.diags.last_mut().expect("just pushed")
    }

    // ------------------------------------------------------------------ pass 1

    fn collect(&mut self, program: &Program) {
        let mut executable_seen = false;
        let mut use_paths: HashMap<String, Span> = HashMap::default();
        for stmt in &program.stmts {
            match &stmt.kind {
                StmtKind::Use { path, alias } => self.collect_use(path, alias, &mut use_paths),
                StmtKind::Import { skill, source } => self.collect_import(skill, source),
                StmtKind::Input {
                    name: Some(name), ..
                } if !executable_seen
                    && !name.text.is_empty()
                    && !self.contract.inputs.contains(&name.text) =>
                {
                    self.contract.inputs.push(name.text.clone());
                }
                _ => {}
            }
            executable_seen |= stmt.is_executable();
        }
        // Agents and blocks may be defined anywhere; they are hoisted.
        let mut agents = Vec::new();
        let mut blocks = Vec::new();
        walk_stmts(&program.stmts, &mut |s| match &s.kind {
            StmtKind::Agent(a) => agents.push(a),
            StmtKind::BlockDef(b) => blocks.push((s.span, b)),
            _ => {}
        });
        for stmt in &program.stmts {
            if let StmtKind::BlockDef(b) = &stmt.kind {
                walk_stmts(&b.body.stmts, &mut |s| match &s.kind {
                    StmtKind::Agent(a) => agents.push(a),
                    StmtKind::BlockDef(b) => blocks.push((s.span, b)),
                    _ => {}
                });
            }
        }
        for a in agents {
            let persistent = a.props.iter().any(|p| {
                p.key.text == "persist"
                    && !matches!(
                        &p.value,
                        PropValue::Expr(Expr {
                            kind: ExprKind::Bool(false),
                            ..
                        })
                    )
            });
            if let Some(prev) = self.agents.get(&a.name.text) {
                let prev = prev.span;
                self.report(
                    Diagnostic::new(
                        Code::E006,
                        self.file,
                        a.name.span,
                        format!("agent `{}` is defined twice", a.name.text),
                    )
                    .with_label("defined again here")
                    .with_secondary(prev, "first defined here"),
                );
                continue;
            }
            self.agents.insert(
                a.name.text.clone(),
                AgentInfo {
                    span: a.name.span,
                    persistent,
                },
            );
        }
        for (stmt_span, b) in blocks {
            let Some(name) = &b.name else {
                let keyword = Span::new(
                    stmt_span.start as usize,
                    stmt_span.start as usize + "block".len(),
                );
                self.diag(Code::E111, keyword, "block definition has no name")
                    .help = Some("name it: `block name:` or `block name(params):`".into());
                continue;
            };
            if let Some(prev) = self.blocks.get(&name.text) {
                let prev = prev.span;
                self.report(
                    Diagnostic::new(
                        Code::E109,
                        self.file,
                        name.span,
                        format!("block `{}` is defined twice", name.text),
                    )
                    .with_secondary(prev, "first defined here"),
                );
                continue;
            }
            if let Some(agent) = self.agents.get(&name.text) {
                let prev = agent.span;
                self.report(
                    Diagnostic::new(
                        Code::E110,
                        self.file,
                        name.span,
                        format!("block `{}` has the name of an agent", name.text),
                    )
                    .with_secondary(prev, "agent defined here"),
                );
            }
            let mut seen = HashSet::default();
            for p in &b.params {
                if !seen.insert(p.text.as_str()) {
                    self.diag(
                        Code::E142,
                        p.span,
                        format!("parameter `{}` is listed twice", p.text),
                    );
                }
            }
            let mut outputs = Vec::new();
            walk_stmts(&b.body.stmts, &mut |s| {
                if let StmtKind::Output { name: Some(n), .. } = &s.kind {
                    if !n.text.is_empty() && !outputs.contains(&n.text) {
                        outputs.push(n.text.clone());
                    }
                }
            });
            self.blocks.insert(
                name.text.clone(),
                BlockInfo {
                    span: name.span,
                    params: b.params.len(),
                    outputs,
                },
            );
        }
        // Program outputs: named outputs anywhere at program level (not inside blocks).
        let mut outputs = Vec::new();
        walk_stmts(&program.stmts, &mut |s| {
            if let StmtKind::Output { name: Some(n), .. } = &s.kind {
                if !n.text.is_empty() && !outputs.contains(&n.text) {
                    outputs.push(n.text.clone());
                }
            }
        });
        self.contract.outputs = outputs;
    }

    fn collect_use(
        &mut self,
        path: &StrLit,
        alias: &Option<Name>,
        use_paths: &mut HashMap<String, Span>,
    ) {
        let text = path.raw_text();
        if text.trim().is_empty() {
            self.diag(Code::E011, path.span, "`use` path is empty").help =
                Some("write `use \"@handle/slug\"` or `use \"./file.prose\"`".into());
            return;
        }
        if !valid_use_path(&text) {
            self.diag(Code::E012, path.span, format!("`{text}` is not a program path"))
                .help = Some("use `@handle/slug` for the registry, or a relative path starting with `./` or `../`".into());
            return;
        }
        if let Some(prev) = use_paths.get(&text) {
            let prev = *prev;
            self.report(
                Diagnostic::new(
                    Code::E010,
                    self.file,
                    path.span,
                    format!("`{text}` is already imported"),
                )
                .with_secondary(prev, "first imported here"),
            );
            return;
        }
        use_paths.insert(text.clone(), path.span);
        let (name, span) = match alias {
            Some(a) => (a.text.clone(), a.span),
            None => (default_import_name(&text), path.span),
        };
        if let Some(prev) = self.programs.get(&name) {
            let prev = prev.span;
            self.report(
                Diagnostic::new(
                    Code::E101,
                    self.file,
                    span,
                    format!("two imports are both named `{name}`"),
                )
                .with_secondary(prev, "the other one")
                .with_help("give one of them an alias: `use \"...\" as other-name`"),
            );
            return;
        }
        let status = self
            .imports
            .get(&text)
            .cloned()
            .unwrap_or(ImportStatus::Unresolved);
        self.skills.insert(name.clone());
        self.programs.insert(name, ProgramInfo { span, status });
    }

    fn collect_import(&mut self, skill: &StrLit, source: &StrLit) {
        let name = skill.raw_text();
        let src = source.raw_text();
        if name.trim().is_empty() {
            self.diag(Code::E011, skill.span, "imported skill name is empty");
            return;
        }
        if src.trim().is_empty() {
            self.diag(Code::E011, source.span, "skill source is empty");
            return;
        }
        if !(src.starts_with("github:")
            || src.starts_with("npm:")
            || src.starts_with("./")
            || src.starts_with("../"))
        {
            self.diag(
                Code::W006,
                source.span,
                format!("unknown skill source format `{src}`"),
            )
            .help = Some("sources start with `github:`, `npm:`, `./` or `../`".into());
        }
        if !self.skills.insert(name.clone()) {
            self.diag(
                Code::E010,
                skill.span,
                format!("skill `{name}` is already imported"),
            );
        }
    }

    // ------------------------------------------------------------------ pass 2

    fn block_bodies(&mut self, stmt: &Stmt) {
        if let StmtKind::BlockDef(b) = &stmt.kind {
            if let Some(name) = &b.name {
                if self.blocks.get(&name.text).map(|i| i.span) != Some(name.span) {
                    return; // a duplicate, already reported
                }
            }
            self.in_block = true;
            self.scopes = Scopes::default();
            self.scopes.push();
            for p in &b.params {
                if let Some(outer) = self.globals.get(&p.text) {
                    let outer = outer.span;
                    self.report(
                        Diagnostic::new(
                            Code::W104,
                            self.file,
                            p.span,
                            format!("parameter `{}` shadows a program variable", p.text),
                        )
                        .with_secondary(outer, "declared here"),
                    );
                }
                self.scopes.declare_scoped(
                    &p.text,
                    Var {
                        kind: VarKind::Param,
                        span: p.span,
                        program: None,
                    },
                );
            }
            self.body(&b.body, Ctx::default(), "block");
            self.scopes.pop();
            self.in_block = false;
        }
    }

    fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.lookup(name).or_else(|| {
            if self.in_block {
                self.globals.get(name)
            } else {
                None
            }
        })
    }

    fn stmts(&mut self, stmts: &[Stmt], ctx: Ctx) {
        let mut executable_seen = false;
        for s in stmts {
            self.stmt(s, ctx, executable_seen);
            executable_seen |= s.is_executable();
        }
    }

    fn body(&mut self, body: &Body, ctx: Ctx, what: &str) {
        if body.stmts.is_empty() {
            self.diag(Code::W116, body.span, format!("{what} has an empty body"));
        }
        self.depth += 1;
        self.stmts(&body.stmts, ctx);
        self.depth -= 1;
    }

    fn stmt(&mut self, stmt: &Stmt, ctx: Ctx, executable_seen: bool) {
        match &stmt.kind {
            StmtKind::Use { .. } | StmtKind::Import { .. } | StmtKind::Error => {}
            StmtKind::Input { name, description } => {
                self.input(stmt, name, description, executable_seen)
            }
            StmtKind::Output { name, value } => self.output(name, value),
            StmtKind::Agent(a) => props::agent(self, a),
            StmtKind::Bind {
                kind,
                target,
                value,
            } => self.bind(*kind, target, value, ctx),
            StmtKind::BlockDef(_) => {}
            StmtKind::Throw(e) => {
                if let Some(e) = e {
                    if let ExprKind::Str(s) = &e.kind {
                        if s.raw_text().trim().is_empty() {
                            self.diag(Code::W112, e.span, "throw message is empty");
                        }
                    }
                    self.expr(e);
                }
            }
            StmtKind::Assert { cond, message } => {
                self.expr(cond);
                if let Some(m) = message {
                    self.expr(m);
                }
            }
            StmtKind::Expr(e) => self.expr(e),
        }
    }

    /// After `do f(...)` (as a statement or inside a value), the block's named outputs are
    /// visible to the caller.
    fn declare_block_outputs(&mut self, name: &Name) {
        let outputs = match self.blocks.get(&name.text) {
            Some(b) => b.outputs.clone(),
            None => return,
        };
        for o in outputs {
            if self.lookup(&o).is_none() {
                self.scopes.ns().insert(
                    o,
                    Var {
                        kind: VarKind::BlockOutput,
                        span: name.span,
                        program: None,
                    },
                );
            }
        }
    }

    fn input(
        &mut self,
        stmt: &Stmt,
        name: &Option<Name>,
        description: &Option<Box<Expr>>,
        executable_seen: bool,
    ) {
        let Some(name) = name else {
            self.diag(
                Code::E020,
                Span::new(stmt.span.start as usize, stmt.span.start as usize + 5),
                "input has no name",
            )
            .help = Some("write `input name: \"description\"`".into());
            return;
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
        if let Some(d) = description {
            self.expr(d);
        }
        if executable_seen || self.in_block || self.depth > 0 {
            self.diag(Code::E022, name.span, format!("input `{}` comes after executable statements", name.text))
                .help = Some("it is asked for when the run reaches it (a mid-program input); move it to the top to make it a parameter".into());
        }
        if let Some(prev) = self.lookup(&name.text) {
            let (prev, kind) = (prev.span, prev.kind);
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
            return;
        }
        self.declare(name, VarKind::Input, None);
    }

    fn output(&mut self, name: &Option<Name>, value: &Expr) {
        self.expr(value);
        let Some(name) = name else { return };
        if name.text.is_empty() {
            self.diag(Code::E023, name.span, "output has no name").help = Some(
                "write `output name = value`, or `output value` for an anonymous block result"
                    .into(),
            );
            return;
        }
        match self.scopes.ns().get(&name.text).cloned() {
            Some(prev) if prev.kind == VarKind::Output => {
                if let Some(first) = self.outputs.get(&name.text) {
                    let first = *first;
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
                self.outputs.entry(name.text.clone()).or_insert(name.span);
            }
            None => {
                // A block's own output, seen from a caller that already ran `do block(...)`,
                // is not a conflict.
                if let Some(prev) = self
                    .lookup(&name.text)
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
                self.check_agent_clash(name);
                self.outputs.insert(name.text.clone(), name.span);
                self.scopes.ns().insert(
                    name.text.clone(),
                    Var {
                        kind: VarKind::Output,
                        span: name.span,
                        program: program_of(value),
                    },
                );
            }
        }
    }

    fn check_agent_clash(&mut self, name: &Name) {
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

    fn declare(&mut self, name: &Name, kind: VarKind, program: Option<String>) {
        self.check_agent_clash(name);
        self.scopes.ns().insert(
            name.text.clone(),
            Var {
                kind,
                span: name.span,
                program,
            },
        );
    }

    /// Declares a parallel branch's named result in the namespace around the branch.
    fn declare_result(&mut self, name: &Name, program: Option<String>) {
        self.check_agent_clash(name);
        self.scopes.outer_ns().insert(
            name.text.clone(),
            Var {
                kind: VarKind::Let,
                span: name.span,
                program,
            },
        );
    }

    fn bind(&mut self, kind: BindKind, target: &Target, value: &Expr, ctx: Ctx) {
        self.expr(value);
        let program = program_of(value);
        match target {
            Target::Name(name) => self.bind_name(kind, name, program, ctx),
            Target::Destructure(names, _) => {
                let outputs = program
                    .as_ref()
                    .and_then(|p| self.contract_of(p))
                    .map(|c| c.outputs);
                for n in names {
                    if let (Some(outputs), Some(p)) = (&outputs, &program) {
                        if !outputs.contains(&n.text) {
                            self.diag(
                                Code::E028,
                                n.span,
                                format!("program `{p}` has no output `{}`", n.text),
                            )
                            .help = Some(format!("its outputs: {}", list_or_none(outputs)));
                        }
                    }
                    self.bind_name(kind, n, None, ctx);
                }
            }
        }
    }

    fn bind_name(&mut self, kind: BindKind, name: &Name, program: Option<String>, ctx: Ctx) {
        let existing = self.lookup(&name.text).cloned();
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
            }
            (BindKind::Assign, None) if ctx.parallel_branch => {
                // A parallel branch's named result: visible after the block.
                self.declare_result(name, program);
            }
            (BindKind::Assign, None) => {
                self.diag(
                    Code::W117,
                    name.span,
                    format!("`{}` is assigned without being declared", name.text),
                )
                .help = Some(format!("declare it with `let {} = ...`", name.text));
                self.declare(name, VarKind::Let, program);
            }
            (BindKind::Let | BindKind::Const, Some(prev)) => {
                let in_flat = self.scopes.ns().contains_key(&name.text);
                if prev.kind == VarKind::Const
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
                if in_flat {
                    if let Some(v) = self.scopes.ns().get_mut(&name.text) {
                        v.program = program;
                    }
                } else {
                    let k = if kind == BindKind::Const {
                        VarKind::Const
                    } else {
                        VarKind::Let
                    };
                    self.declare(name, k, program);
                }
            }
            (BindKind::Let, None) => self.declare(name, VarKind::Let, program),
            (BindKind::Const, None) => self.declare(name, VarKind::Const, program),
        }
    }

    /// Reports E028 when `field` is not an output of imported program `program`.
    fn check_program_output(&mut self, program: &str, field: &str, span: Span) {
        if let Some(c) = self.contract_of(program) {
            if !c.outputs.iter().any(|o| o == field) {
                self.diag(
                    Code::E028,
                    span,
                    format!("program `{program}` has no output `{field}`"),
                )
                .help = Some(format!("its outputs: {}", list_or_none(&c.outputs)));
            }
        }
    }

    fn contract_of(&self, program: &str) -> Option<Contract> {
        match &self.programs.get(program)?.status {
            ImportStatus::Resolved(c) => Some(c.clone()),
            _ => None,
        }
    }

    /// Declares scoped names (loop variables and the like) in a new frame, warning on shadowing.
    fn open_frame(&mut self, names: &[&Name], kind: VarKind, code: Code) {
        let outer: Vec<(Name, Span)> = names
            .iter()
            .filter_map(|n| self.lookup(&n.text).map(|v| ((*n).clone(), v.span)))
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
        self.scopes.push();
        for n in names {
            self.scopes.declare_scoped(
                &n.text,
                Var {
                    kind,
                    span: n.span,
                    program: None,
                },
            );
        }
    }

    // ------------------------------------------------------------------ expressions

    fn strlit(&mut self, s: &StrLit) {
        for part in &s.parts {
            if let StrPart::Interp(i) = part {
                if let Some(var) = self.lookup(&i.root) {
                    let program = var.program.clone();
                    self.resolutions.interpolations.insert(i.span.start);
                    if let (Some(p), Some(PathSeg::Field(field))) = (program, i.path.first()) {
                        self.check_program_output(&p, field, i.span);
                    }
                } else {
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
                }
            }
        }
    }

    /// Whether the program declares `name` anywhere (for names bound late).
    fn declared_anywhere(&mut self, name: &str) -> bool {
        let program = self.program;
        self.all_names
            .get_or_insert_with(|| {
                let mut names = HashSet::default();
                collect_declared_names(&program.stmts, &mut names);
                names
            })
            .contains(name)
    }

    /// Interpolations in agent prompts resolve when a session uses the agent.
    fn late_strlit(&mut self, s: &StrLit) {
        for part in &s.parts {
            if let StrPart::Interp(i) = part {
                let program = self.program;
                let names = self.all_names.get_or_insert_with(|| {
                    let mut names = HashSet::default();
                    collect_declared_names(&program.stmts, &mut names);
                    names
                });
                if names.contains(i.root.as_str()) {
                    self.resolutions.interpolations.insert(i.span.start);
                } else {
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

    fn discretion(&mut self, s: &StrLit, span: Span) {
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
        self.strlit(s);
    }

    fn name_expr(&mut self, n: &Name) {
        if self.lookup(&n.text).is_some() {
            return;
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
        } else if let Some((a, b)) = n.text.rsplit_once('-') {
            if self.lookup(a).is_some() {
                d = d.with_help(format!(
                    "a hyphen joins names; for subtraction write `{a} - {b}`"
                ));
            }
        }
        self.report(d);
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Name(n) => self.name_expr(n),
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Bool(_)
            | ExprKind::Null
            | ExprKind::Error => {}
            ExprKind::Str(s) => self.strlit(s),
            ExprKind::Discretion(s) => self.discretion(s, e.span),
            ExprKind::Array(items) => items.iter().for_each(|i| self.expr(i)),
            ExprKind::Object(entries) => entries.iter().for_each(|en| self.expr(&en.value)),
            ExprKind::Member(base, field) => {
                self.expr(base);
                if let ExprKind::Name(n) = &base.kind {
                    let program = self.lookup(&n.text).and_then(|v| v.program.clone());
                    if let Some(p) = program {
                        self.check_program_output(&p, &field.text, field.span);
                    }
                }
            }
            ExprKind::Index(base, idx) => {
                self.expr(base);
                self.expr(idx);
            }
            ExprKind::Call(callee, args) => self.call(callee, args),
            ExprKind::Unary(_, x) => self.expr(x),
            ExprKind::Binary(_, l, r) => {
                self.expr(l);
                self.expr(r);
            }
            ExprKind::Session(s) => props::session(self, s, e.span),
            ExprKind::DoCall { name, args } => {
                for a in args.iter().flatten() {
                    self.expr(&a.value);
                }
                match self.blocks.get(&name.text) {
                    None => {
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
                        }
                        self.report(d);
                    }
                    Some(b) => {
                        let expected = b.params;
                        let got = args.as_ref().map_or(0, Vec::len);
                        if expected != got {
                            let span = b.span;
                            self.report(
                                Diagnostic::new(Code::W103, self.file, e.span, format!("block `{}` takes {expected} argument(s) but {got} were given", name.text))
                                    .with_secondary(span, "block defined here"),
                            );
                        }
                    }
                }
                self.declare_block_outputs(name);
            }
            ExprKind::DoBlock(b) => self.body(b, Ctx::default(), "`do:` block"),
            ExprKind::Arrow(items) => items.iter().for_each(|i| self.expr(i)),
            ExprKind::Pipeline(head, stages) => self.pipeline(head, stages),
            ExprKind::Parallel { mods, body } => {
                props::parallel_mods(self, mods, Some(body.stmts.len()));
                if body.stmts.is_empty() {
                    self.diag(Code::W116, body.span, "parallel block has an empty body");
                }
                // Each branch declares into a namespace of its own.
                self.depth += 1;
                for branch in &body.stmts {
                    self.scopes.push_branch();
                    let ctx = Ctx {
                        parallel_branch: true,
                    };
                    self.stmt(branch, ctx, true);
                    self.scopes.pop_branch();
                }
                self.depth -= 1;
            }
            ExprKind::For(l) => {
                let ForLoop {
                    parallel,
                    item,
                    index,
                    iter,
                    body,
                } = &**l;
                if let Some(mods) = parallel {
                    props::parallel_mods(self, mods, None);
                }
                self.expr(iter);
                let mut names = vec![item];
                names.extend(index.as_ref());
                self.open_frame(&names, VarKind::Loop, Code::W106);
                if parallel.is_some() {
                    // Each iteration runs as a branch with a namespace of its own.
                    self.scopes.push_branch();
                    self.body(body, Ctx::default(), "for loop");
                    self.scopes.pop_branch();
                } else {
                    self.body(body, Ctx::default(), "for loop");
                }
                self.scopes.pop();
            }
            ExprKind::Repeat(l) => {
                let RepeatLoop { count, index, body } = &**l;
                match &count.kind {
                    ExprKind::Int(n) if *n < 1 => {
                        self.diag(
                            Code::E117,
                            count.span,
                            format!("repeat count must be positive, not {n}"),
                        );
                    }
                    ExprKind::Unary(UnOp::Neg, _) => {
                        self.diag(Code::E117, count.span, "repeat count must be positive");
                    }
                    ExprKind::Float(_) => {
                        self.diag(Code::E118, count.span, "repeat count must be an integer");
                    }
                    ExprKind::Str(_)
                    | ExprKind::Bool(_)
                    | ExprKind::Null
                    | ExprKind::Array(_)
                    | ExprKind::Object(_) => {
                        self.diag(Code::E118, count.span, "repeat count must be an integer");
                    }
                    _ => self.expr(count),
                }
                let names: Vec<&Name> = index.iter().collect();
                self.open_frame(&names, VarKind::Loop, Code::W106);
                self.body(body, Ctx::default(), "repeat loop");
                self.scopes.pop();
            }
            ExprKind::Loop(l) => {
                let UnboundedLoop {
                    kind,
                    cond,
                    mods,
                    index,
                    body,
                } = &**l;
                let has_max = props::loop_mods(self, mods);
                if let Some(c) = cond {
                    self.expr(c);
                }
                match (kind, has_max) {
                    (LoopKind::Plain, false) => {
                        self.diag(Code::W107, Span::new(e.span.start as usize, e.span.start as usize + 4), "loop has no condition and no max")
                            .help = Some("add `(max: N)`; without it the run stops the loop at the VM's global iteration limit".into());
                    }
                    (LoopKind::Until | LoopKind::While, false) => {
                        self.diag(Code::W108, Span::new(e.span.start as usize, e.span.start as usize + 4), "conditional loop has no max")
                            .help = Some("add `(max: N)` after the condition so the loop ends even if the condition never settles".into());
                    }
                    _ => {}
                }
                let names: Vec<&Name> = index.iter().collect();
                self.open_frame(&names, VarKind::Loop, Code::W106);
                self.body(body, Ctx::default(), "loop");
                self.scopes.pop();
            }
            ExprKind::Try(t) => {
                let TryBlock {
                    body,
                    catch,
                    finally,
                } = &**t;
                if catch.is_none() && finally.is_none() {
                    self.diag(
                        Code::E124,
                        Span::new(e.span.start as usize, e.span.start as usize + 3),
                        "`try` needs a `catch:` or a `finally:`",
                    );
                }
                self.body(body, Ctx::default(), "try");
                if let Some(c) = catch {
                    let names: Vec<&Name> = c.name.iter().collect();
                    self.open_frame(&names, VarKind::Error, Code::W111);
                    self.body(&c.body, Ctx::default(), "catch");
                    self.scopes.pop();
                }
                if let Some(f) = finally {
                    self.body(f, Ctx::default(), "finally");
                }
            }
            ExprKind::If {
                branches,
                else_body,
            } => {
                for (c, b) in branches {
                    self.condition(c);
                    self.body(b, Ctx::default(), "condition");
                }
                if let Some(b) = else_body {
                    self.body(b, Ctx::default(), "else");
                }
            }
            ExprKind::Choice { criteria, options } => {
                match &criteria.kind {
                    ExprKind::Str(s) if s.raw_text().trim().is_empty() => {
                        self.diag(Code::E121, criteria.span, "choice criteria are empty");
                    }
                    _ => self.expr(criteria),
                }
                if options.is_empty() {
                    self.diag(
                        Code::E128,
                        Span::new(e.span.start as usize, e.span.start as usize + 6),
                        "choice has no options",
                    )
                    .help = Some("add indented `option \"label\":` blocks".into());
                }
                let mut labels: HashMap<String, Span> = HashMap::default();
                for o in options {
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
                    self.strlit(&o.label);
                    if o.body.stmts.is_empty() {
                        self.diag(Code::W115, o.label.span, "option has an empty body");
                    }
                    self.depth += 1;
                    self.stmts(&o.body.stmts, Ctx::default());
                    self.depth -= 1;
                }
            }
        }
    }

    fn condition(&mut self, c: &Expr) {
        self.expr(c);
    }

    fn call(&mut self, callee: &Expr, args: &[Arg]) {
        for a in args {
            self.expr(&a.value);
        }
        let ExprKind::Name(name) = &callee.kind else {
            self.diag(
                Code::E141,
                callee.span,
                "only imported programs can be called",
            );
            return;
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
                self.diag(
                    Code::E025,
                    name.span,
                    format!("no imported program is named `{}`", name.text),
                )
                .help = Some(format!("import it first: `use \"@handle/{}\"`", name.text));
            }
            return;
        };
        let contract = match &program.status {
            ImportStatus::Resolved(c) => Some(c.clone()),
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
                    given.insert(n.text.clone());
                    if let Some(c) = &contract {
                        if !c.inputs.contains(&n.text) {
                            self.diag(
                                Code::E027,
                                n.span,
                                format!("program `{}` has no input `{}`", name.text, n.text),
                            )
                            .help = Some(format!("its inputs: {}", list_or_none(&c.inputs)));
                        }
                    }
                }
            }
        }
        if let Some(c) = contract {
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
        }
    }

    fn pipeline(&mut self, head: &Expr, stages: &[PipeStage]) {
        self.expr(head);
        for st in stages {
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
                    self.diag(
                        Code::E122,
                        st.op.span,
                        format!("`{op}` is not a pipeline operation"),
                    )
                    .help = Some("use map, filter, reduce or pmap".into());
                    Vec::new()
                }
            };
            let implicit = Name {
                text: "item".into(),
                span: st.op.span,
            };
            let frame: Vec<&Name> = if op == "reduce" {
                names
            } else {
                vec![&implicit]
            };
            // The implicit `item` of map/filter/pmap shadows silently unless the program
            // declared its own `item`.
            if op == "reduce" {
                self.open_frame(&frame, VarKind::Pipe, Code::W110);
            } else {
                let shadows = self.lookup("item").map(|v| v.span);
                if let Some(prev) = shadows {
                    if !matches!(self.lookup("item").map(|v| v.kind), Some(VarKind::Pipe)) {
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
                self.scopes.push();
                self.scopes.declare_scoped(
                    "item",
                    Var {
                        kind: VarKind::Pipe,
                        span: st.op.span,
                        program: None,
                    },
                );
            }
            if op == "pmap" {
                // Each element runs as a branch with a namespace of its own.
                self.scopes.push_branch();
                self.body(&st.body, Ctx::default(), "pipeline stage");
                self.scopes.pop_branch();
            } else {
                self.body(&st.body, Ctx::default(), "pipeline stage");
            }
            self.scopes.pop();
        }
    }
}

/// The import alias an expression's value comes from, if it is a program invocation.
fn program_of(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Call(callee, _) => match &callee.kind {
            ExprKind::Name(n) => Some(n.text.clone()),
            _ => None,
        },
        _ => None,
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ")
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
