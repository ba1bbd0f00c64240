//! Pass 1: what is hoisted or declared by position. Imports and skills, agents, blocks with
//! their parameters and named outputs, the program's parameters and outputs; the program's
//! tables are filled here, in the order code generation numbers them.

use super::{list_or_none, AgentInfo, Analyzer, BlockInfo, ProgramInfo};
use crate::ast::*;
use crate::diagnostics::{Code, Diagnostic};
use crate::resolved as r;
use crate::span::Span;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

impl<'a> Analyzer<'a> {
    pub(super) fn collect(&mut self, program: &'a Program) {
        let mut executable_seen = false;
        let mut use_paths: HashMap<String, Span> = HashMap::default();
        for stmt in &program.stmts {
            match &stmt.kind {
                StmtKind::Use { path, alias } => self.collect_use(path, alias, &mut use_paths),
                StmtKind::Import { skill, source } => self.collect_import(skill, source),
                StmtKind::Input {
                    name: Some(name),
                    description,
                } if !executable_seen && !name.text.is_empty() => {
                    if !self.contract.inputs.contains(&name.text) {
                        self.contract.inputs.push(name.text.clone());
                    }
                    self.add_input(name, description.as_deref(), true);
                }
                _ => {}
            }
            executable_seen |= stmt.is_executable();
        }
        // Agents, blocks and inputs may be written anywhere, blocks inside blocks included;
        // agents and blocks are hoisted.
        let mut agents = Vec::new();
        let mut blocks = Vec::new();
        let mut inputs = Vec::new();
        walk_stmts(&program.stmts, &mut |s| match &s.kind {
            StmtKind::Agent(a) => agents.push(&**a),
            StmtKind::BlockDef(b) => blocks.push((s.span, &**b)),
            StmtKind::Input {
                name: Some(n),
                description,
            } => inputs.push((n, description.as_deref())),
            _ => {}
        });
        let mut i = 0;
        while i < blocks.len() {
            let (_, b) = blocks[i];
            walk_stmts(&b.body.stmts, &mut |s| match &s.kind {
                StmtKind::Agent(a) => agents.push(&**a),
                StmtKind::BlockDef(b) => blocks.push((s.span, &**b)),
                StmtKind::Input {
                    name: Some(n),
                    description,
                } => inputs.push((n, description.as_deref())),
                _ => {}
            });
            i += 1;
        }
        for (n, description) in inputs {
            if !n.text.is_empty() && !self.input_ids.contains_key(&n.text) {
                self.add_input(n, description, false);
                self.contract.asked.push(n.text.clone());
            }
        }
        for a in agents {
            self.collect_agent(a);
        }
        for (stmt_span, b) in blocks {
            self.collect_block(stmt_span, b);
        }
        // Program outputs: named outputs anywhere at program level (not inside blocks).
        let mut outputs = Vec::new();
        let mut anonymous = false;
        walk_stmts(&program.stmts, &mut |s| match &s.kind {
            StmtKind::Output { name: Some(n), .. }
                if !n.text.is_empty() && !outputs.contains(&n.text) =>
            {
                outputs.push(n.text.clone());
            }
            StmtKind::Output { name: None, .. } => anonymous = true,
            _ => {}
        });
        for o in &outputs {
            let id = self.out.outputs.push(o.clone());
            self.output_ids.insert(o.clone(), id);
        }
        if anonymous && !self.output_ids.contains_key("result") {
            let id = self.out.outputs.push("result".into());
            self.output_ids.insert("result".into(), id);
        }
        self.contract.outputs = outputs;
    }

    fn add_input(&mut self, name: &Name, description: Option<&Expr>, parameter: bool) {
        let description = match description.map(|d| &d.kind) {
            Some(ExprKind::Str(l) | ExprKind::Discretion(l)) => Some(l.raw_text()),
            _ => None,
        };
        let id = self.out.inputs.push(r::Input {
            name: name.text.clone(),
            description,
            parameter,
        });
        self.input_ids.entry(name.text.clone()).or_insert(id);
    }

    fn collect_agent(&mut self, a: &'a AgentDef) {
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
            return;
        }
        let id = self.out.agents.push(super::props::agent_entry(a));
        self.index
            .add(a.name.span, super::index::Target::Agent(id), true);
        self.agents.insert(
            a.name.text.clone(),
            AgentInfo {
                span: a.name.span,
                persistent,
                id,
                def: a,
            },
        );
    }

    fn collect_block(&mut self, stmt_span: Span, b: &'a BlockDef) {
        let Some(name) = &b.name else {
            let keyword = Span::new(
                stmt_span.start as usize,
                stmt_span.start as usize + "block".len(),
            );
            self.diag(Code::E111, keyword, "block definition has no name")
                .help = Some("name it: `block name:` or `block name(params):`".into());
            return;
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
            return;
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
        let mut names = Vec::new();
        namespace_names(&b.body.stmts, &mut names);
        names.retain(|n| !outputs.contains(n) && !b.params.iter().any(|p| &p.text == n));
        let func = self.out.funcs.next_key();
        let id = self.out.blocks.push(r::Block {
            name: name.text.clone(),
            func,
            params: Vec::new(),
            body: Vec::new(),
            span: b.body.span,
            exports: Vec::new(),
        });
        self.out.funcs.push(r::Frame {
            kind: r::FrameKind::Block(id),
            parent: Some(self.out.main),
        });
        self.index
            .add(name.span, super::index::Target::Block(id), true);
        self.blocks.insert(
            name.text.clone(),
            BlockInfo {
                span: name.span,
                def: b,
                outputs,
                names,
                id,
            },
        );
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
        if !super::valid_use_path(&text) {
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
            None => (super::default_import_name(&text), path.span),
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
        self.index
            .add(span, super::index::Target::Program(name.clone()), true);
        let status = self
            .imports
            .get(&text)
            .cloned()
            .unwrap_or(ImportStatus::Unresolved);
        let import = match &status {
            ImportStatus::Resolved(c) => Some(self.out.imports.push(r::Import {
                alias: name.clone(),
                path: text,
                params: c.inputs.clone(),
            })),
            _ => None,
        };
        self.skills.insert(name.clone());
        self.programs.insert(
            name,
            ProgramInfo {
                span,
                status,
                import,
            },
        );
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
            return;
        }
        self.out.skills.push(r::SkillImport {
            name,
            source: src,
            span: source.span,
        });
    }

    /// The contract of an imported program, when it was loaded.
    pub(super) fn contract_of(&self, program: &str) -> Option<super::Contract> {
        match &self.programs.get(program)?.status {
            ImportStatus::Resolved(c) => Some(c.clone()),
            _ => None,
        }
    }

    /// Reports E028 when `field` (written at `span`) is not an output of imported program
    /// `program`.
    pub(super) fn check_program_output(&mut self, program: &str, field: &str, span: Span) {
        self.index
            .add_contract_ref(span, program, super::index::ContractSide::Output, field);
        if let Some(c) = self.contract_of(program) {
            if !c.outputs.iter().any(|o| o == field) {
                let mut d = Diagnostic::new(
                    Code::E028,
                    self.file,
                    span,
                    format!("program `{program}` has no output `{field}`"),
                );
                d = match crate::diagnostics::closest(field, c.outputs.iter().map(String::as_str)) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(format!("its outputs: {}", list_or_none(&c.outputs))),
                };
                self.report(d);
            }
        }
    }
}

use super::ImportStatus;

/// The names a block body declares in the block's own namespace, in order: `let`, `const`,
/// assigned and destructured names, inputs, and the named results of `parallel:` branches
/// (not names local to a branch or a fan-out iteration).
fn namespace_names(stmts: &[Stmt], out: &mut Vec<String>) {
    let add = |n: &Name, out: &mut Vec<String>| {
        if !n.text.is_empty() && !out.contains(&n.text) {
            out.push(n.text.clone());
        }
    };
    for s in stmts {
        match &s.kind {
            StmtKind::Input { name: Some(n), .. } => add(n, out),
            StmtKind::Bind { target, value, .. } => {
                match target {
                    Target::Name(n) => add(n, out),
                    Target::Destructure(ns, _) => ns.iter().for_each(|n| add(n, out)),
                }
                namespace_names_in(value, out);
            }
            StmtKind::Output { value, .. } | StmtKind::Expr(value) => {
                namespace_names_in(value, out)
            }
            _ => {}
        }
    }
}

fn namespace_names_in(e: &Expr, out: &mut Vec<String>) {
    match &e.kind {
        ExprKind::Parallel { body, .. } => {
            for s in &body.stmts {
                if let StmtKind::Bind {
                    kind: BindKind::Assign,
                    target: Target::Name(n),
                    ..
                } = &s.kind
                {
                    if !out.contains(&n.text) {
                        out.push(n.text.clone());
                    }
                }
            }
        }
        ExprKind::For(l) if l.parallel.is_some() => {}
        ExprKind::Pipeline(head, stages) => {
            namespace_names_in(head, out);
            for st in stages.iter().filter(|st| st.op.text != "pmap") {
                namespace_names(&st.body.stmts, out);
            }
        }
        _ => walk_expr_bodies_shallow(e, &mut |b| namespace_names(b, out)),
    }
}

/// Calls `f` on each statement list directly inside a compound expression.
fn walk_expr_bodies_shallow(e: &Expr, f: &mut dyn FnMut(&[Stmt])) {
    match &e.kind {
        ExprKind::DoBlock(b) => f(&b.stmts),
        ExprKind::For(l) => f(&l.body.stmts),
        ExprKind::Repeat(l) => f(&l.body.stmts),
        ExprKind::Loop(l) => f(&l.body.stmts),
        ExprKind::Try(t) => {
            f(&t.body.stmts);
            if let Some(c) = &t.catch {
                f(&c.body.stmts);
            }
            if let Some(b) = &t.finally {
                f(&b.stmts);
            }
        }
        ExprKind::If {
            branches,
            else_body,
        } => {
            for (_, b) in branches {
                f(&b.stmts);
            }
            if let Some(b) = else_body {
                f(&b.stmts);
            }
        }
        ExprKind::Choice { options, .. } => {
            for o in options {
                f(&o.body.stmts);
            }
        }
        ExprKind::Arrow(items) => {
            for i in items {
                walk_expr_bodies_shallow(i, f);
            }
        }
        _ => {}
    }
}
