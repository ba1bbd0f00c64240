//! Lowering one module's syntax tree to bytecode.
//!
//! Variables live in registers of the function that owns their namespace: the program body,
//! a block, or a parallel branch (which owns the names `let`-declared inside it). Code in a
//! nested function reaches outer variables through static links (`GetUp`/`SetUp`). Blocks
//! nest in the program body; branches nest in the function that forks them.

use super::func::{FnBuilder, VarLoc};
use crate::ast::*;
use crate::sema::Resolutions;
use crate::source::SourceFile;
use crate::span::Span;
use bytecode_spec as bc;
use bytecode_spec::{
    AgentId, ConstId, FuncId, FuncKind, InputId, KeysId, Loc, Op, OutputId, Pc, ProgId, Reg, StrId,
    TplId,
};
use cranelift_entity::{EntityRef, PrimaryMap};
use rustc_hash::FxHashMap;

/// An imported program as the importer sees it.
pub struct ImportInfo {
    /// Index of its module in the artifact.
    pub module: u32,
    /// Its parameter inputs, in declaration order.
    pub params: Vec<String>,
}

struct BlockInfo<'a> {
    func: FuncId,
    def: &'a BlockDef,
    outputs: Vec<String>,
}

#[derive(Hash, PartialEq, Eq)]
enum ConstKey {
    Null,
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(StrId),
}

/// Lowers one module.
pub struct Lowerer<'a> {
    m: bc::Module,
    src: &'a SourceFile,
    res: &'a Resolutions,
    strs: FxHashMap<String, StrId>,
    consts: FxHashMap<ConstKey, ConstId>,
    agents: FxHashMap<String, (AgentId, &'a AgentDef)>,
    blocks: FxHashMap<String, BlockInfo<'a>>,
    imports: FxHashMap<String, (ProgId, &'a ImportInfo)>,
    inputs: FxHashMap<String, InputId>,
    outputs: FxHashMap<String, OutputId>,
    fns: Vec<FnBuilder>,
    /// The program body's namespace, seen from block functions (one static link out).
    main_scope: Option<FxHashMap<String, Reg>>,
    /// The last offset turned into a location (consecutive instructions share spans).
    last_loc: (u32, Loc),
}

fn word(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Name(n) => Some(n.text.clone()),
        ExprKind::Str(s) => Some(s.raw_text()),
        ExprKind::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn prop_expr<'p>(props: &'p [Property], key: &str) -> Option<&'p Expr> {
    props
        .iter()
        .find(|p| p.key.text == key)
        .and_then(|p| match &p.value {
            PropValue::Expr(e) => Some(e),
            PropValue::Block(_) => None,
        })
}

fn prop<'p>(props: &'p [Property], key: &str) -> Option<&'p Property> {
    props.iter().find(|p| p.key.text == key)
}

impl<'a> Lowerer<'a> {
    /// Lowers `program` into a module named `name`.
    pub fn lower(
        name: &str,
        import_path: &str,
        program: &'a Program,
        src: &'a SourceFile,
        res: &'a Resolutions,
        imports: &'a FxHashMap<String, ImportInfo>,
    ) -> bc::Module {
        let m = bc::Module {
            name: name.to_string(),
            import_path: import_path.to_string(),
            source: src.text.clone(),
            strings: PrimaryMap::new(),
            consts: PrimaryMap::new(),
            templates: PrimaryMap::new(),
            keysets: PrimaryMap::new(),
            agents: PrimaryMap::new(),
            sessions: PrimaryMap::new(),
            choices: PrimaryMap::new(),
            forks: PrimaryMap::new(),
            tables: PrimaryMap::new(),
            inputs: PrimaryMap::new(),
            outputs: PrimaryMap::new(),
            programs: PrimaryMap::new(),
            funcs: PrimaryMap::new(),
            entry: FuncId::new(0),
        };
        let mut lw = Lowerer {
            m,
            src,
            res,
            strs: FxHashMap::default(),
            consts: FxHashMap::default(),
            agents: FxHashMap::default(),
            blocks: FxHashMap::default(),
            imports: FxHashMap::default(),
            inputs: FxHashMap::default(),
            outputs: FxHashMap::default(),
            fns: Vec::new(),
            main_scope: None,
            last_loc: (u32::MAX, Loc::default()),
        };
        lw.strs.reserve(64);
        lw.consts.reserve(16);
        let entry = lw.reserve_func("main", FuncKind::Main);
        lw.m.entry = entry;
        lw.collect(program, imports);
        // The program body.
        lw.fns.push(FnBuilder::new(FuncKind::Main, 0));
        let value = lw.stmts_value(&program.stmts);
        lw.emit(Op::Return { src: value });
        let main = lw.fns.pop().expect("main builder");
        lw.main_scope = Some(main.scopes[0].clone());
        lw.finish_func(entry, main);
        // Blocks, after the body so their static link sees every program variable.
        let mut blocks: Vec<(FuncId, &BlockDef)> =
            lw.blocks.values().map(|b| (b.func, b.def)).collect();
        blocks.sort_by_key(|(f, _)| *f);
        for (func, def) in blocks {
            let mut fb = FnBuilder::new(FuncKind::Block, def.params.len() as u32);
            for (i, p) in def.params.iter().enumerate() {
                fb.bind(&p.text, Reg::new(i));
            }
            fb.scopes.push(FxHashMap::default());
            lw.fns.push(fb);
            lw.set_loc(def.body.span);
            let value = lw.stmts_value(&def.body.stmts);
            lw.emit(Op::Return { src: value });
            let fb = lw.fns.pop().expect("block builder");
            lw.finish_func(func, fb);
        }
        lw.m
    }

    // ------------------------------------------------------------------ tables

    fn s(&mut self, text: &str) -> StrId {
        if let Some(&id) = self.strs.get(text) {
            return id;
        }
        let id = self.m.strings.push(text.to_string());
        self.strs.insert(text.to_string(), id);
        id
    }

    fn konst(&mut self, key: ConstKey, c: bc::Const) -> ConstId {
        if let Some(&id) = self.consts.get(&key) {
            return id;
        }
        let id = self.m.consts.push(c);
        self.consts.insert(key, id);
        id
    }

    fn const_null(&mut self) -> ConstId {
        self.konst(ConstKey::Null, bc::Const::Null)
    }

    fn const_int(&mut self, i: i64) -> ConstId {
        self.konst(ConstKey::Int(i), bc::Const::Int(i))
    }

    fn const_bool(&mut self, b: bool) -> ConstId {
        self.konst(ConstKey::Bool(b), bc::Const::Bool(b))
    }

    fn const_str(&mut self, text: &str) -> ConstId {
        let s = self.s(text);
        self.konst(ConstKey::Str(s), bc::Const::Str(s))
    }

    fn keys(&mut self, names: &[String]) -> KeysId {
        let ids: Vec<StrId> = names.iter().map(|n| self.s(n)).collect();
        self.m.keysets.push(ids)
    }

    fn reserve_func(&mut self, name: &str, kind: FuncKind) -> FuncId {
        let name = self.s(name);
        self.m.funcs.push(bc::Function {
            name,
            kind,
            params: 0,
            nregs: 0,
            code: Vec::new(),
            locs: Vec::new(),
            vars: Vec::new(),
        })
    }

    fn finish_func(&mut self, id: FuncId, mut fb: FnBuilder) {
        fb.names.sort();
        fb.names.dedup();
        let f = &mut self.m.funcs[id];
        f.kind = fb.kind;
        f.params = match fb.kind {
            FuncKind::Main => 0,
            _ => f.params,
        };
        f.nregs = fb.nregs.max(1);
        f.code = fb.code;
        f.locs = fb.locs;
        for (name, reg) in fb.names {
            let s = self.s(&name);
            self.m.funcs[id].vars.push((reg, s));
        }
        self.m.funcs[id].vars.sort_by_key(|(r, _)| *r);
    }

    /// A template for `lit`, resolving `{name}` groups against the variables visible here.
    /// `late` groups (agent prompts) interpolate whenever the name is visible; others only
    /// where analysis decided they do.
    fn template(&mut self, lit: &StrLit, late: bool) -> TplId {
        let parts = self.template_parts(lit, late);
        self.m.templates.push(bc::Template { parts })
    }

    fn template_parts(&mut self, lit: &StrLit, late: bool) -> Vec<bc::TplPart> {
        let mut parts = Vec::new();
        for p in &lit.parts {
            match p {
                StrPart::Text(t) => {
                    let s = self.s(t);
                    parts.push(bc::TplPart::Text(s));
                }
                StrPart::Interp(i) => {
                    let wanted = late || self.res.interpolations.contains(&i.span.start);
                    match self.lookup(&i.root).filter(|_| wanted) {
                        Some(loc) => {
                            let path = i
                                .path
                                .iter()
                                .map(|seg| match seg {
                                    PathSeg::Field(f) => bc::PathStep::Field(self.s(f)),
                                    PathSeg::Index(n) => bc::PathStep::Index(*n),
                                })
                                .collect();
                            let name = self.s(&i.root);
                            parts.push(bc::TplPart::Var {
                                depth: loc.depth,
                                reg: loc.reg,
                                path,
                                name,
                            });
                        }
                        None => {
                            let s = self.s(&i.raw);
                            parts.push(bc::TplPart::Text(s));
                        }
                    }
                }
            }
        }
        parts
    }

    fn text_template(&mut self, text: &str) -> TplId {
        let s = self.s(text);
        self.m.templates.push(bc::Template {
            parts: vec![bc::TplPart::Text(s)],
        })
    }

    // ------------------------------------------------------------------ collection

    fn collect(&mut self, program: &'a Program, imports: &'a FxHashMap<String, ImportInfo>) {
        let mut executable_seen = false;
        for s in &program.stmts {
            match &s.kind {
                StmtKind::Use { path, alias } => {
                    let text = path.raw_text();
                    if let Some(info) = imports.get(&text) {
                        let name = alias
                            .as_ref()
                            .map(|a| a.text.clone())
                            .unwrap_or_else(|| crate::sema::default_import_name(&text));
                        let alias_id = self.s(&name);
                        let prog = self.m.programs.push(bc::ProgramRef {
                            alias: alias_id,
                            module: info.module,
                        });
                        self.imports.insert(name, (prog, info));
                    }
                }
                StmtKind::Input { name: Some(n), .. } if !executable_seen && !n.text.is_empty() => {
                    self.input(n, s, true);
                }
                _ => {}
            }
            executable_seen |= s.is_executable();
        }
        let mut agents = Vec::new();
        let mut blocks = Vec::new();
        let mut inputs = Vec::new();
        let mut outputs = Vec::new();
        let mut anonymous_output = false;
        walk_stmts(&program.stmts, &mut |s| match &s.kind {
            StmtKind::Agent(a) => agents.push(&**a),
            StmtKind::BlockDef(b) => blocks.push(&**b),
            StmtKind::Input { name: Some(n), .. } => inputs.push((n, s)),
            StmtKind::Output { name: Some(n), .. } if !n.text.is_empty() => {
                outputs.push(n.text.clone())
            }
            StmtKind::Output { name: None, .. } => anonymous_output = true,
            _ => {}
        });
        let mut i = 0;
        while i < blocks.len() {
            let b = blocks[i];
            walk_stmts(&b.body.stmts, &mut |s| match &s.kind {
                StmtKind::Agent(a) => agents.push(&**a),
                StmtKind::BlockDef(b) => blocks.push(&**b),
                StmtKind::Input { name: Some(n), .. } => inputs.push((n, s)),
                _ => {}
            });
            i += 1;
        }
        for (n, s) in inputs {
            if !self.inputs.contains_key(&n.text) && !n.text.is_empty() {
                self.input(n, s, false);
            }
        }
        for o in outputs {
            if !self.outputs.contains_key(&o) {
                let name = self.s(&o);
                let id = self.m.outputs.push(bc::OutputDesc { name });
                self.outputs.insert(o, id);
            }
        }
        if anonymous_output && !self.outputs.contains_key("result") {
            let name = self.s("result");
            let id = self.m.outputs.push(bc::OutputDesc { name });
            self.outputs.insert("result".into(), id);
        }
        for a in agents {
            if self.agents.contains_key(&a.name.text) {
                continue;
            }
            let tpl = self.agent_template(a);
            let id = self.m.agents.push(tpl);
            self.agents.insert(a.name.text.clone(), (id, a));
        }
        for b in blocks {
            let Some(name) = &b.name else { continue };
            if self.blocks.contains_key(&name.text) {
                continue;
            }
            let func = self.reserve_func(&name.text, FuncKind::Block);
            self.m.funcs[func].params = b.params.len() as u32;
            let mut outs = Vec::new();
            walk_stmts(&b.body.stmts, &mut |s| {
                if let StmtKind::Output { name: Some(n), .. } = &s.kind {
                    if !n.text.is_empty() && !outs.contains(&n.text) {
                        outs.push(n.text.clone());
                    }
                }
            });
            self.blocks.insert(
                name.text.clone(),
                BlockInfo {
                    func,
                    def: b,
                    outputs: outs,
                },
            );
        }
    }

    fn input(&mut self, n: &Name, s: &Stmt, parameter: bool) {
        let description = match &s.kind {
            StmtKind::Input {
                description: Some(d),
                ..
            } => match &d.kind {
                ExprKind::Str(l) | ExprKind::Discretion(l) => {
                    Some(self.text_template(&l.raw_text()))
                }
                _ => None,
            },
            _ => None,
        };
        let name = self.s(&n.text);
        let id = self.m.inputs.push(bc::InputDesc {
            name,
            description,
            parameter,
        });
        self.inputs.insert(n.text.clone(), id);
    }

    fn persist(&mut self, e: Option<&Expr>) -> bc::Persist {
        match e.map(|e| &e.kind) {
            Some(ExprKind::Bool(true)) => bc::Persist::Run,
            Some(ExprKind::Name(n)) if n.text == "project" => bc::Persist::Project,
            Some(ExprKind::Name(n)) if n.text == "user" => bc::Persist::User,
            Some(ExprKind::Str(s)) => bc::Persist::Path(self.s(&s.raw_text())),
            _ => bc::Persist::None,
        }
    }

    /// Permission rules. `scope`: `None` for the agent table (rendered outside any frame, so
    /// kept as written); `Some(late)` resolved in the current scope, where `late` (an
    /// agent's rules used by a session) interpolates every visible name.
    fn permissions(&mut self, p: Option<&Property>, scope: Option<bool>) -> Vec<bc::Permission> {
        let Some(Property {
            value: PropValue::Block(entries),
            ..
        }) = p
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in entries {
            let PropValue::Expr(v) = &e.value else {
                continue;
            };
            let kind = self.s(&e.key.text);
            let value = match &v.kind {
                ExprKind::Array(items) => {
                    let mut pats = Vec::new();
                    for item in items {
                        match &item.kind {
                            ExprKind::Str(l) if scope.is_some() => {
                                pats.push(self.template(l, scope == Some(true)))
                            }
                            ExprKind::Str(l) => pats.push(self.text_template(&l.raw_text())),
                            ExprKind::Name(n) if scope.is_none() => {
                                pats.push(self.text_template(&format!("{{{}}}", n.text)))
                            }
                            ExprKind::Name(n) => {
                                let lit = StrLit {
                                    parts: vec![StrPart::Interp(Box::new(Interp {
                                        root: n.text.clone(),
                                        path: Vec::new(),
                                        span: n.span,
                                        raw: format!("{{{}}}", n.text),
                                    }))],
                                    triple: false,
                                    span: n.span,
                                };
                                pats.push(self.template(&lit, true));
                            }
                            _ => {}
                        }
                    }
                    bc::PermissionValue::Patterns(pats)
                }
                _ => match word(v) {
                    Some(w) => bc::PermissionValue::Word(self.s(&w)),
                    None => continue,
                },
            };
            out.push(bc::Permission { kind, value });
        }
        out
    }

    fn skills(&mut self, e: Option<&Expr>) -> Vec<StrId> {
        match e.map(|e| &e.kind) {
            Some(ExprKind::Array(items)) => items
                .iter()
                .filter_map(|i| match &i.kind {
                    ExprKind::Str(s) => Some(s.raw_text()),
                    _ => None,
                })
                .map(|s| self.s(&s))
                .collect(),
            _ => Vec::new(),
        }
    }

    fn agent_template(&mut self, a: &AgentDef) -> bc::AgentTemplate {
        let name = self.s(&a.name.text);
        let model = prop_expr(&a.props, "model")
            .and_then(word)
            .map(|w| self.s(&w));
        let prompt = match prop_expr(&a.props, "prompt").map(|e| &e.kind) {
            Some(ExprKind::Str(s)) => Some(self.s(&s.raw_text())),
            _ => None,
        };
        let persist = self.persist(prop_expr(&a.props, "persist"));
        let skills = self.skills(prop_expr(&a.props, "skills"));
        let permissions = self.permissions(prop(&a.props, "permissions"), None);
        let mut extra = Vec::new();
        for p in &a.props {
            if matches!(
                p.key.text.as_str(),
                "model"
                    | "prompt"
                    | "persist"
                    | "skills"
                    | "permissions"
                    | "context"
                    | "retry"
                    | "backoff"
            ) {
                continue;
            }
            if let PropValue::Expr(e) = &p.value {
                let c = match &e.kind {
                    ExprKind::Int(i) => Some(self.const_int(*i)),
                    ExprKind::Bool(b) => Some(self.const_bool(*b)),
                    _ => word(e).map(|w| self.const_str(&w)),
                };
                if let Some(c) = c {
                    let k = self.s(&p.key.text);
                    extra.push((k, c));
                }
            }
        }
        bc::AgentTemplate {
            name,
            model,
            prompt,
            persist,
            skills,
            permissions,
            extra,
        }
    }

    // ------------------------------------------------------------------ builders

    fn fb(&mut self) -> &mut FnBuilder {
        self.fns.last_mut().expect("a function is being built")
    }

    fn emit(&mut self, op: Op) -> Pc {
        self.fb().emit(op)
    }

    fn set_loc(&mut self, span: Span) {
        if self.last_loc.0 != span.start {
            let lc = self.src.line_col(span.start as usize);
            self.last_loc = (
                span.start,
                Loc {
                    line: lc.line,
                    col: lc.column,
                },
            );
        }
        let loc = self.last_loc.1;
        self.fb().loc = loc;
    }

    fn temp(&mut self) -> Reg {
        self.fb().temp()
    }

    fn lookup(&self, name: &str) -> Option<VarLoc> {
        for (depth, fb) in self.fns.iter().rev().enumerate() {
            if let Some(reg) = fb.find(name) {
                return Some(VarLoc {
                    depth: depth as u8,
                    reg,
                });
            }
        }
        let reg = *self.main_scope.as_ref()?.get(name)?;
        Some(VarLoc {
            depth: self.fns.len() as u8,
            reg,
        })
    }

    fn load_const(&mut self, c: ConstId) -> Reg {
        let r = self.temp();
        self.emit(Op::LoadConst { dst: r, c });
        r
    }

    fn null(&mut self) -> Reg {
        let c = self.const_null();
        self.load_const(c)
    }

    /// The value of a variable, in a register of the current frame.
    fn read(&mut self, loc: VarLoc) -> Reg {
        if loc.depth == 0 {
            return loc.reg;
        }
        let r = self.temp();
        self.emit(Op::GetUp {
            dst: r,
            depth: loc.depth,
            reg: loc.reg,
        });
        r
    }

    fn write(&mut self, loc: VarLoc, src: Reg) {
        if loc.depth == 0 {
            if loc.reg != src {
                self.emit(Op::Move { dst: loc.reg, src });
            }
        } else {
            self.emit(Op::SetUp {
                depth: loc.depth,
                reg: loc.reg,
                src,
            });
        }
    }

    /// The variable `name` for writing: an existing one, or a new one in this function.
    fn var_for_write(&mut self, name: &str) -> VarLoc {
        match self.lookup(name) {
            Some(loc) => loc,
            None => VarLoc {
                depth: 0,
                reg: self.fb().declare_flat(name),
            },
        }
    }

    /// Lowers `f` as a branch function nested in the current one, with parameters `params`.
    fn branch_fn(
        &mut self,
        name: &str,
        params: &[&str],
        f: impl FnOnce(&mut Self) -> Reg,
    ) -> FuncId {
        let id = self.reserve_func(name, FuncKind::Branch);
        self.m.funcs[id].params = params.len() as u32;
        let loc = self.fb().loc;
        let mut fb = FnBuilder::new(FuncKind::Branch, params.len() as u32);
        fb.loc = loc;
        for (i, p) in params.iter().enumerate() {
            fb.bind(p, Reg::new(i));
        }
        self.fns.push(fb);
        let value = f(self);
        self.emit(Op::Return { src: value });
        let fb = self.fns.pop().expect("branch builder");
        self.finish_func(id, fb);
        id
    }

    // ------------------------------------------------------------------ statements

    /// Lowers statements; returns the register holding the last statement's value.
    fn stmts_value(&mut self, stmts: &'a [Stmt]) -> Reg {
        let result = self.fb().var_reg();
        let c = self.const_null();
        self.emit(Op::LoadConst { dst: result, c });
        for (i, s) in stmts.iter().enumerate() {
            let mark = self.fb().temp_mark();
            let v = self.stmt(s);
            if let Some(v) = v.filter(|&v| v != result && i + 1 == stmts.len()) {
                self.emit(Op::Move {
                    dst: result,
                    src: v,
                });
            }
            self.fb().release_to(mark);
        }
        result
    }

    /// Lowers a loop body, whose value nobody reads (keeping it would hold a second
    /// reference to a list the body appends to, forcing a copy per append).
    fn stmts(&mut self, stmts: &'a [Stmt]) {
        for s in stmts {
            let mark = self.fb().temp_mark();
            self.stmt(s);
            self.fb().release_to(mark);
        }
    }

    fn stmt(&mut self, s: &'a Stmt) -> Option<Reg> {
        self.set_loc(s.span);
        match &s.kind {
            StmtKind::Use { .. }
            | StmtKind::Import { .. }
            | StmtKind::Agent(_)
            | StmtKind::BlockDef(_)
            | StmtKind::Error => None,
            StmtKind::Input { name: Some(n), .. } => {
                let id = *self.inputs.get(&n.text)?;
                let loc = self.var_for_write(&n.text);
                let r = self.temp();
                if self.m.inputs[id].parameter
                    && self.fns.len() == 1
                    && self.fns[0].kind == FuncKind::Main
                {
                    self.emit(Op::LoadInput { dst: r, input: id });
                } else {
                    // A mid-program question may interpolate the variables in scope here.
                    if let StmtKind::Input {
                        description: Some(d),
                        ..
                    } = &s.kind
                    {
                        if let ExprKind::Str(lit) | ExprKind::Discretion(lit) = &d.kind {
                            let t = self.template(lit, false);
                            self.m.inputs[id].description = Some(t);
                        }
                    }
                    self.emit(Op::Ask { dst: r, input: id });
                }
                self.write(loc, r);
                Some(r)
            }
            StmtKind::Input { name: None, .. } => None,
            StmtKind::Output { name, value } => Some(self.output(name.as_ref(), value)),
            StmtKind::Bind {
                kind: _,
                target,
                value,
            } => {
                if let Some(v) = self.append_in_place(target, value) {
                    return Some(v);
                }
                let v = self.expr(value);
                match target {
                    Target::Name(n) => {
                        let loc = self.var_for_write(&n.text);
                        self.write(loc, v);
                    }
                    Target::Destructure(names, _) => {
                        for n in names {
                            let key = self.s(&n.text);
                            let t = self.temp();
                            self.emit(Op::GetField {
                                dst: t,
                                src: v,
                                name: key,
                            });
                            let loc = self.var_for_write(&n.text);
                            self.write(loc, t);
                        }
                    }
                }
                Some(v)
            }
            StmtKind::Throw(None) => {
                let err = self.innermost_catch_err();
                match err {
                    Some(loc) => {
                        let r = self.read(loc);
                        self.emit(Op::Rethrow { err: r });
                    }
                    None => {
                        let r = self.null();
                        self.emit(Op::Throw { msg: r });
                    }
                }
                None
            }
            StmtKind::Throw(Some(e)) => {
                let r = self.expr(e);
                self.emit(Op::Throw { msg: r });
                None
            }
            StmtKind::Assert { cond, message } => {
                let c = self.cond(cond);
                let msg = message.as_ref().map(|m| self.expr(m));
                self.emit(Op::Assert { cond: c, msg });
                None
            }
            StmtKind::Expr(e) => Some(self.expr(e)),
        }
    }

    /// `x = x + e` with `x` a variable of this frame: one `binary x, x + e`, so the VM can
    /// extend a list in place (appending in a loop stays linear).
    fn append_in_place(&mut self, target: &Target, value: &'a Expr) -> Option<Reg> {
        let (Target::Name(n), ExprKind::Binary(BinOp::Add, l, r)) = (target, &value.kind) else {
            return None;
        };
        let ExprKind::Name(lhs) = &l.kind else {
            return None;
        };
        let loc = self.lookup(&n.text).filter(|loc| loc.depth == 0)?;
        if lhs.text != n.text {
            return None;
        }
        let b = self.expr(r);
        self.set_loc(value.span);
        self.emit(Op::Binary {
            op: bc::BinOp::Add,
            dst: loc.reg,
            a: loc.reg,
            b,
        });
        Some(loc.reg)
    }

    fn innermost_catch_err(&self) -> Option<VarLoc> {
        for (depth, fb) in self.fns.iter().rev().enumerate() {
            if let Some(&reg) = fb.catch_errs.last() {
                return Some(VarLoc {
                    depth: depth as u8,
                    reg,
                });
            }
        }
        None
    }

    /// Whether the namespace being lowered belongs to a block (not the program body).
    fn in_block(&self) -> bool {
        self.fns.first().is_some_and(|f| f.kind == FuncKind::Block)
    }

    fn output(&mut self, name: Option<&Name>, value: &'a Expr) -> Reg {
        let v = self.expr(value);
        let named = name.filter(|n| !n.text.is_empty());
        if let Some(n) = named {
            let loc = self.var_for_write(&n.text);
            self.write(loc, v);
        }
        if self.in_block() {
            if let Some(n) = named {
                let s = self.s(&n.text);
                self.emit(Op::SetBlockOutput { name: s, src: v });
            }
            if self.fns.len() == 1 {
                // `output` inside a block returns from it.
                self.emit(Op::Return { src: v });
            }
        } else {
            let key = named.map(|n| n.text.as_str()).unwrap_or("result");
            if let Some(&id) = self.outputs.get(key) {
                self.emit(Op::SetOutput { output: id, src: v });
            }
        }
        v
    }

    // ------------------------------------------------------------------ expressions

    /// Lowers an expression to a boolean (asking the model for discretion text).
    fn cond(&mut self, e: &'a Expr) -> Reg {
        match &e.kind {
            ExprKind::Discretion(lit) => {
                self.set_loc(e.span);
                let tpl = self.template(lit, false);
                let r = self.temp();
                self.emit(Op::Evaluate { dst: r, cond: tpl });
                r
            }
            ExprKind::Binary(BinOp::And | BinOp::Or, ..)
            | ExprKind::Unary(UnOp::Not, _)
            | ExprKind::Bool(_) => self.expr(e),
            ExprKind::Binary(
                BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge,
                ..,
            ) => self.expr(e),
            _ => {
                let v = self.expr(e);
                let r = self.temp();
                self.emit(Op::Convert {
                    dst: r,
                    src: v,
                    shape: bc::Shape::Bool,
                });
                r
            }
        }
    }

    fn convert(&mut self, v: Reg, shape: bc::Shape) -> Reg {
        let r = self.temp();
        self.emit(Op::Convert {
            dst: r,
            src: v,
            shape,
        });
        r
    }

    fn make_list(&mut self, items: &[Reg]) -> Reg {
        let first = if items.is_empty() {
            Reg::new(0)
        } else {
            let first = self.fb().temp_block(items.len() as u32);
            for (i, &v) in items.iter().enumerate() {
                self.emit(Op::Move {
                    dst: Reg::new(first.index() + i),
                    src: v,
                });
            }
            first
        };
        let dst = self.temp();
        self.emit(Op::MakeList {
            dst,
            first,
            len: items.len() as u32,
        });
        dst
    }

    fn expr(&mut self, e: &'a Expr) -> Reg {
        self.set_loc(e.span);
        match &e.kind {
            ExprKind::Name(n) => match self.lookup(&n.text) {
                Some(loc) => self.read(loc),
                None => self.null(),
            },
            ExprKind::Int(i) => {
                let c = self.const_int(*i);
                self.load_const(c)
            }
            ExprKind::Float(f) => {
                let c = self.konst(ConstKey::Float(f.to_bits()), bc::Const::Float(*f));
                self.load_const(c)
            }
            ExprKind::Bool(b) => {
                let c = self.const_bool(*b);
                self.load_const(c)
            }
            ExprKind::Null | ExprKind::Error => self.null(),
            ExprKind::Str(lit) => self.string(lit),
            ExprKind::Discretion(_) => self.cond(e),
            ExprKind::Array(items) => {
                let regs: Vec<Reg> = items.iter().map(|i| self.expr(i)).collect();
                self.make_list(&regs)
            }
            ExprKind::Object(entries) => {
                let names: Vec<String> = entries.iter().map(|en| en.key.text.clone()).collect();
                let regs: Vec<Reg> = entries.iter().map(|en| self.expr(&en.value)).collect();
                let keys = self.keys(&names);
                let first = if regs.is_empty() {
                    Reg::new(0)
                } else {
                    let first = self.fb().temp_block(regs.len() as u32);
                    for (i, &v) in regs.iter().enumerate() {
                        self.emit(Op::Move {
                            dst: Reg::new(first.index() + i),
                            src: v,
                        });
                    }
                    first
                };
                let dst = self.temp();
                self.emit(Op::MakeRecord { dst, first, keys });
                dst
            }
            ExprKind::Member(base, field) => {
                let b = self.expr(base);
                let rec = self.convert(b, bc::Shape::Record);
                let name = self.s(&field.text);
                let dst = self.temp();
                self.emit(Op::GetField {
                    dst,
                    src: rec,
                    name,
                });
                dst
            }
            ExprKind::Index(base, index) => {
                let b = self.expr(base);
                let i = self.expr(index);
                let src = if matches!(index.kind, ExprKind::Int(_)) {
                    self.convert(b, bc::Shape::List)
                } else {
                    b
                };
                let dst = self.temp();
                self.emit(Op::GetIndex { dst, src, index: i });
                dst
            }
            ExprKind::Call(callee, args) => self.invoke(callee, args),
            ExprKind::Unary(UnOp::Not, x) => {
                let c = self.cond(x);
                let dst = self.temp();
                self.emit(Op::Not { dst, src: c });
                dst
            }
            ExprKind::Unary(UnOp::Neg, x) => {
                let v = self.expr(x);
                let dst = self.temp();
                self.emit(Op::Neg { dst, src: v });
                dst
            }
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or), l, r) => {
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
                let b = self.cond(r);
                self.emit(Op::Move { dst, src: b });
                let here = self.fb().here();
                self.fb().patch(jump, here);
                dst
            }
            ExprKind::Binary(op, l, r) => {
                let mut a = self.expr(l);
                let mut b = self.expr(r);
                // Text compared with or subtracted from a number must become a number.
                if matches!(
                    op,
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Sub
                ) {
                    let literal =
                        |e: &Expr| matches!(e.kind, ExprKind::Int(_) | ExprKind::Float(_));
                    if literal(r) && !literal(l) {
                        a = self.convert(a, bc::Shape::Int);
                    } else if literal(l) && !literal(r) {
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
                    // `and`/`or` short-circuit in the arm above.
                    BinOp::Ge | BinOp::And | BinOp::Or => bc::BinOp::Ge,
                };
                let dst = self.temp();
                self.emit(Op::Binary { op, dst, a, b });
                dst
            }
            ExprKind::Session(s) => self.session(s, e.span),
            ExprKind::DoCall { name, args } => self.call(name, args.as_deref().unwrap_or(&[])),
            ExprKind::DoBlock(body) => self.stmts_value(&body.stmts),
            ExprKind::Arrow(items) => {
                let mut last = None;
                for i in items {
                    last = Some(self.expr(i));
                }
                match last {
                    Some(r) => r,
                    None => self.null(),
                }
            }
            ExprKind::Pipeline(head, stages) => {
                let mut v = self.expr(head);
                for st in stages {
                    v = self.stage(v, st);
                }
                v
            }
            ExprKind::Parallel { mods, body } => self.parallel(mods, body),
            ExprKind::For(l) => self.for_loop(l),
            ExprKind::Repeat(l) => self.repeat(l),
            ExprKind::Loop(l) => self.unbounded(l),
            ExprKind::Try(t) => self.try_block(t),
            ExprKind::If {
                branches,
                else_body,
            } => self.if_expr(branches, else_body.as_ref()),
            ExprKind::Choice { criteria, options } => self.choice(criteria, options),
        }
    }

    fn string(&mut self, lit: &StrLit) -> Reg {
        let parts = self.template_parts(lit, false);
        if parts.iter().all(|p| matches!(p, bc::TplPart::Text(_))) {
            let c = self.const_str(&lit.raw_text());
            return self.load_const(c);
        }
        let tpl = self.m.templates.push(bc::Template { parts });
        let dst = self.temp();
        self.emit(Op::Format { dst, tpl });
        dst
    }

    fn invoke(&mut self, callee: &'a Expr, args: &'a [Arg]) -> Reg {
        let name = match &callee.kind {
            ExprKind::Name(n) => n.text.clone(),
            _ => return self.null(),
        };
        let Some(&(prog, info)) = self.imports.get(&name) else {
            return self.null();
        };
        let values: Vec<Reg> = info
            .params
            .iter()
            .map(|p| {
                match args
                    .iter()
                    .find(|a| a.name.as_ref().is_some_and(|n| &n.text == p))
                {
                    Some(a) => self.expr(&a.value),
                    None => self.null(),
                }
            })
            .collect();
        let first = if values.is_empty() {
            Reg::new(0)
        } else {
            let first = self.fb().temp_block(values.len() as u32);
            for (i, &v) in values.iter().enumerate() {
                self.emit(Op::Move {
                    dst: Reg::new(first.index() + i),
                    src: v,
                });
            }
            first
        };
        self.set_loc(callee.span);
        let dst = self.temp();
        self.emit(Op::Invoke {
            prog,
            args: first,
            dst,
        });
        dst
    }

    fn call(&mut self, name: &Name, args: &'a [Arg]) -> Reg {
        let Some(info) = self.blocks.get(&name.text) else {
            return self.null();
        };
        let (func, params, outputs) = (info.func, info.def.params.len(), info.outputs.clone());
        let values: Vec<Reg> = (0..params)
            .map(|i| match args.get(i) {
                Some(a) => self.expr(&a.value),
                None => self.null(),
            })
            .collect();
        let first = if params == 0 {
            Reg::new(0)
        } else {
            let first = self.fb().temp_block(params as u32);
            for (i, &v) in values.iter().enumerate() {
                self.emit(Op::Move {
                    dst: Reg::new(first.index() + i),
                    src: v,
                });
            }
            first
        };
        self.set_loc(name.span);
        let dst = self.fb().temp_block(2);
        self.emit(Op::Call {
            func,
            args: first,
            argc: params as u32,
            dst,
        });
        let named = Reg::new(dst.index() + 1);
        for o in outputs {
            let key = self.s(&o);
            let t = self.temp();
            self.emit(Op::GetField {
                dst: t,
                src: named,
                name: key,
            });
            let loc = self.var_for_write(&o);
            self.write(loc, t);
        }
        dst
    }

    fn session(&mut self, s: &'a SessionExpr, span: Span) -> Reg {
        // Context values first (they are read before the session starts).
        let mut labels = Vec::new();
        let mut values = Vec::new();
        if let Some(p) = prop(&s.props, "context") {
            match &p.value {
                PropValue::Expr(e) => self.context_value(e, true, &mut labels, &mut values),
                PropValue::Block(entries) => {
                    for en in entries {
                        if let PropValue::Expr(v) = &en.value {
                            labels.push(en.key.text.clone());
                            let r = self.expr(v);
                            values.push(r);
                        }
                    }
                }
            }
        }
        let ctx = self.make_list(&values);
        self.set_loc(span);
        let agent = s
            .agent
            .as_ref()
            .and_then(|a| self.agents.get(&a.text).copied());
        let prompt_prop = prop_expr(&s.props, "prompt");
        let (label, prompt) = match (&s.text, prompt_prop) {
            (Some(text), Some(p)) => (
                Some(self.s(&text.raw_text())),
                Some(self.prompt_template(p)),
            ),
            (Some(text), None) => (None, Some(self.template(text, false))),
            (None, Some(p)) => (None, Some(self.prompt_template(p))),
            (None, None) => (None, None),
        };
        let label = label.or_else(|| s.name.as_ref().map(|n| n.text.clone()).map(|n| self.s(&n)));
        let system =
            agent.and_then(
                |(_, def)| match prop_expr(&def.props, "prompt").map(|e| &e.kind) {
                    Some(ExprKind::Str(lit)) => Some(lit),
                    _ => None,
                },
            );
        let system = system.map(|lit| self.template(lit, true));
        let model = prop_expr(&s.props, "model")
            .and_then(word)
            .map(|w| self.s(&w))
            .or_else(|| agent.and_then(|(id, _)| self.m.agents[id].model));
        // The agent's permission lists may name variables: resolve them in this session's scope.
        let mut permissions = match agent {
            Some((_, def)) => self.permissions(prop(&def.props, "permissions"), Some(true)),
            None => Vec::new(),
        };
        for p in self.permissions(prop(&s.props, "permissions"), Some(false)) {
            permissions.retain(|q| q.kind != p.kind);
            permissions.push(p);
        }
        let skills = match prop_expr(&s.props, "skills") {
            Some(e) => self.skills(Some(e)),
            None => agent
                .map(|(id, _)| self.m.agents[id].skills.clone())
                .unwrap_or_default(),
        };
        let retry = match prop_expr(&s.props, "retry").map(|e| &e.kind) {
            Some(ExprKind::Int(n)) if *n > 0 => *n as u32,
            _ => 0,
        };
        let backoff = match prop_expr(&s.props, "backoff").and_then(word).as_deref() {
            Some("linear") => bc::Backoff::Linear,
            Some("exponential") => bc::Backoff::Exponential,
            _ => bc::Backoff::None,
        };
        let context_labels = labels.iter().map(|l| self.s(l)).collect();
        let line = self.src.line_col(span.start as usize).line;
        let desc = self.m.sessions.push(bc::SessionDesc {
            kind: match s.kind {
                SessionKind::Session => bc::SessionKind::Fresh,
                SessionKind::Resume => bc::SessionKind::Resume,
            },
            agent: agent.map(|(id, _)| id),
            label,
            prompt,
            system,
            model,
            context_labels,
            permissions,
            skills,
            retry,
            backoff,
            line,
        });
        let dst = self.temp();
        self.emit(Op::Session { dst, desc, ctx });
        dst
    }

    fn prompt_template(&mut self, e: &'a Expr) -> TplId {
        match &e.kind {
            ExprKind::Str(lit) => self.template(lit, false),
            _ => {
                // A prompt given as a value: interpolate the whole value.
                let name = match &e.kind {
                    ExprKind::Name(n) => n.text.clone(),
                    _ => String::new(),
                };
                match self.lookup(&name) {
                    Some(loc) => {
                        let n = self.s(&name);
                        self.m.templates.push(bc::Template {
                            parts: vec![bc::TplPart::Var {
                                depth: loc.depth,
                                reg: loc.reg,
                                path: Vec::new(),
                                name: n,
                            }],
                        })
                    }
                    None => self.text_template(""),
                }
            }
        }
    }

    fn context_value(
        &mut self,
        e: &'a Expr,
        top: bool,
        labels: &mut Vec<String>,
        values: &mut Vec<Reg>,
    ) {
        match &e.kind {
            ExprKind::Name(n)
                if self.lookup(&n.text).is_none() && self.agents.contains_key(&n.text) =>
            {
                // An agent named as context: pass its description.
                let (id, _) = self.agents[&n.text];
                let text = self.m.agents[id]
                    .prompt
                    .map(|s| self.m.strings[s].clone())
                    .unwrap_or_default();
                let c = self.const_str(&text);
                labels.push(n.text.clone());
                let r = self.load_const(c);
                values.push(r);
            }
            ExprKind::Array(items) if top => {
                for i in items {
                    self.context_value(i, false, labels, values);
                }
            }
            ExprKind::Object(entries) if top => {
                for en in entries {
                    labels.push(en.key.text.clone());
                    let r = self.expr(&en.value);
                    values.push(r);
                }
            }
            _ => {
                let label = match &e.kind {
                    ExprKind::Name(n) => n.text.clone(),
                    ExprKind::Member(_, f) => f.text.clone(),
                    ExprKind::Str(_) => "note".to_string(),
                    _ => "context".to_string(),
                };
                labels.push(label);
                let r = self.expr(e);
                values.push(r);
            }
        }
    }

    // ------------------------------------------------------------------ compound constructs

    fn fork_desc(
        &mut self,
        mods: &[Arg],
        branches: Vec<FuncId>,
        names: Vec<Option<StrId>>,
    ) -> bc::ForkId {
        let mut strategy = bc::Strategy::All;
        let mut count = 1;
        let mut on_fail = bc::OnFail::FailFast;
        for m in mods {
            match (&m.name, word(&m.value).as_deref()) {
                (None, Some("first")) => strategy = bc::Strategy::First,
                (None, Some("any")) => strategy = bc::Strategy::Any,
                (Some(n), Some(w)) if n.text == "on-fail" => {
                    on_fail = match w {
                        "continue" => bc::OnFail::Continue,
                        "ignore" => bc::OnFail::Ignore,
                        _ => bc::OnFail::FailFast,
                    }
                }
                (Some(n), _) if n.text == "count" => {
                    if let ExprKind::Int(c) = m.value.kind {
                        count = c.max(1) as u32;
                    }
                }
                _ => {}
            }
        }
        self.m.forks.push(bc::ForkDesc {
            strategy,
            count,
            on_fail,
            branches,
            names,
        })
    }

    fn parallel(&mut self, mods: &[Arg], body: &'a Body) -> Reg {
        // A branch's named result (`a = session ...` with `a` new) lives in the forking frame.
        let mut names = Vec::new();
        for s in &body.stmts {
            let mut name = None;
            if let StmtKind::Bind {
                kind: BindKind::Assign,
                target: Target::Name(n),
                ..
            } = &s.kind
            {
                if self.lookup(&n.text).is_none() {
                    self.fb().declare_flat(&n.text);
                }
                name = Some(self.s(&n.text));
            }
            names.push(name);
        }
        let mut branches = Vec::new();
        for (i, s) in body.stmts.iter().enumerate() {
            let f = self.branch_fn(&format!("parallel-branch-{i}"), &[], |lw| {
                lw.set_loc(s.span);
                lw.stmts_value(std::slice::from_ref(s))
            });
            branches.push(f);
        }
        let fork = self.fork_desc(mods, branches, names);
        let handle = self.temp();
        self.emit(Op::Fork { fork, handle });
        let dst = self.temp();
        self.emit(Op::Join { handle, dst });
        dst
    }

    fn for_loop(&mut self, l: &'a ForLoop) -> Reg {
        let src = self.expr(&l.iter);
        let list = self.convert(src, bc::Shape::List);
        if let Some(mods) = &l.parallel {
            let index = l
                .index
                .as_ref()
                .map(|i| i.text.as_str())
                .unwrap_or("$index");
            let f = self.branch_fn("parallel-for-body", &[&l.item.text, index], |lw| {
                lw.stmts_value(&l.body.stmts)
            });
            let fork = self.fork_desc(mods, vec![f], vec![None]);
            let handle = self.temp();
            self.emit(Op::ForkEach { fork, list, handle });
            let dst = self.temp();
            self.emit(Op::Join { handle, dst });
            return dst;
        }
        let counter = self.temp();
        let zero = self.const_int(0);
        self.emit(Op::LoadConst {
            dst: counter,
            c: zero,
        });
        self.fb().scopes.push(FxHashMap::default());
        let item = self.fb().declare(&l.item.text);
        let index = l.index.as_ref().map(|i| self.fb().declare(&i.text));
        let head = self.emit(Op::ForNext {
            list,
            counter,
            item,
            index,
            exit: 0,
        });
        self.stmts(&l.body.stmts);
        self.emit(Op::Jump { target: head });
        let exit = self.fb().here();
        self.fb().patch(head, exit);
        self.fb().scopes.pop();
        self.null()
    }

    fn repeat(&mut self, l: &'a RepeatLoop) -> Reg {
        let n = self.expr(&l.count);
        let count = self.convert(n, bc::Shape::Int);
        let counter = self.temp();
        let zero = self.const_int(0);
        self.emit(Op::LoadConst {
            dst: counter,
            c: zero,
        });
        self.fb().scopes.push(FxHashMap::default());
        let index = l.index.as_ref().map(|i| self.fb().declare(&i.text));
        let head = self.emit(Op::RepeatNext {
            count,
            counter,
            index,
            exit: 0,
        });
        self.stmts(&l.body.stmts);
        self.emit(Op::Jump { target: head });
        let exit = self.fb().here();
        self.fb().patch(head, exit);
        self.fb().scopes.pop();
        self.null()
    }

    fn unbounded(&mut self, l: &'a UnboundedLoop) -> Reg {
        let max = l
            .mods
            .iter()
            .find(|m| m.name.as_ref().is_some_and(|n| n.text == "max"))
            .map(|m| {
                let v = self.expr(&m.value);
                self.convert(v, bc::Shape::Int)
            });
        let counter = self.temp();
        let zero = self.const_int(0);
        self.emit(Op::LoadConst {
            dst: counter,
            c: zero,
        });
        self.fb().scopes.push(FxHashMap::default());
        let index = l.index.as_ref().map(|i| self.fb().declare(&i.text));
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
        self.stmts(&l.body.stmts);
        self.emit(Op::Jump { target: head });
        let exit = self.fb().here();
        for j in exits {
            self.fb().patch(j, exit);
        }
        self.fb().scopes.pop();
        self.null()
    }

    fn try_block(&mut self, t: &'a TryBlock) -> Reg {
        let res = self.fb().var_reg();
        let err = self.fb().var_reg();
        let pending = self.fb().var_reg();
        let enter = self.emit(Op::TryEnter {
            catch: None,
            finally: None,
            err,
            pending,
        });
        let v = self.stmts_value(&t.body.stmts);
        self.emit(Op::Move { dst: res, src: v });
        self.emit(Op::TryExit);
        let after_body = self.emit(Op::Jump { target: 0 });
        let mut to_end = Vec::new();
        let mut catch_pc = None;
        if let Some(c) = &t.catch {
            catch_pc = Some(self.fb().here());
            self.fb().scopes.push(FxHashMap::default());
            if let Some(n) = &c.name {
                self.fb().bind(&n.text, err);
            }
            self.fb().catch_errs.push(err);
            let v = self.stmts_value(&c.body.stmts);
            self.emit(Op::Move { dst: res, src: v });
            self.fb().catch_errs.pop();
            self.fb().scopes.pop();
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
            self.stmts_value(&f.stmts);
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

    fn if_expr(&mut self, branches: &'a [(Expr, Body)], else_body: Option<&'a Body>) -> Reg {
        let res = self.fb().var_reg();
        let c = self.const_null();
        self.emit(Op::LoadConst { dst: res, c });
        let mut to_end = Vec::new();
        for (cond, body) in branches {
            let mark = self.fb().temp_mark();
            let c = self.cond(cond);
            let skip = self.emit(Op::JumpIfNot { cond: c, target: 0 });
            self.fb().release_to(mark);
            let v = self.stmts_value(&body.stmts);
            self.emit(Op::Move { dst: res, src: v });
            to_end.push(self.emit(Op::Jump { target: 0 }));
            let here = self.fb().here();
            self.fb().patch(skip, here);
        }
        if let Some(body) = else_body {
            let v = self.stmts_value(&body.stmts);
            self.emit(Op::Move { dst: res, src: v });
        }
        let end = self.fb().here();
        for j in to_end {
            self.fb().patch(j, end);
        }
        res
    }

    fn choice(&mut self, criteria: &'a Expr, options: &'a [ChoiceOption]) -> Reg {
        let res = self.fb().var_reg();
        let c = self.const_null();
        self.emit(Op::LoadConst { dst: res, c });
        if options.is_empty() {
            return res;
        }
        let crit = match &criteria.kind {
            ExprKind::Str(l) | ExprKind::Discretion(l) => self.template(l, false),
            _ => self.text_template(""),
        };
        let opts = options
            .iter()
            .map(|o| self.template(&o.label, false))
            .collect();
        let choice = self.m.choices.push(bc::ChoiceDesc {
            criteria: crit,
            options: opts,
        });
        let idx = self.temp();
        self.emit(Op::Choose { dst: idx, choice });
        let table = self.m.tables.push(Vec::new());
        self.emit(Op::Switch { index: idx, table });
        let mut targets = Vec::new();
        let mut to_end = Vec::new();
        for o in options {
            targets.push(self.fb().here());
            let v = self.stmts_value(&o.body.stmts);
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

    fn stage(&mut self, input: Reg, st: &'a PipeStage) -> Reg {
        self.set_loc(st.span);
        let list = self.convert(input, bc::Shape::List);
        let op = st.op.text.as_str();
        if op == "pmap" {
            let f = self.branch_fn("pmap-body", &["item", "$index"], |lw| {
                lw.stmts_value(&st.body.stmts)
            });
            let fork = self.fork_desc(&[], vec![f], vec![None]);
            let handle = self.temp();
            self.emit(Op::ForkEach { fork, list, handle });
            let dst = self.temp();
            self.emit(Op::Join { handle, dst });
            return dst;
        }
        let out = self.fb().var_reg();
        let counter = self.temp();
        let zero = self.const_int(0);
        self.emit(Op::LoadConst {
            dst: counter,
            c: zero,
        });
        self.fb().scopes.push(FxHashMap::default());
        let reduce = op == "reduce";
        let (item_name, acc_name) = match (&st.params, reduce) {
            (Some(ps), true) if ps.len() == 2 => (ps[1].text.clone(), Some(ps[0].text.clone())),
            _ => ("item".to_string(), None),
        };
        let item = self.fb().declare(&item_name);
        let first = if reduce {
            let acc = self.fb().declare(acc_name.as_deref().unwrap_or("acc"));
            let c = self.const_null();
            self.emit(Op::LoadConst { dst: acc, c });
            let first = self.fb().var_reg();
            let t = self.const_bool(true);
            self.emit(Op::LoadConst { dst: first, c: t });
            Some((acc, first))
        } else {
            let empty = self.make_list(&[]);
            self.emit(Op::Move {
                dst: out,
                src: empty,
            });
            None
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
            let v = self.stmts_value(&st.body.stmts);
            self.emit(Op::Move { dst: acc, src: v });
            self.emit(Op::Move { dst: out, src: acc });
        } else {
            let v = self.stmts_value(&st.body.stmts);
            let mark = self.fb().temp_mark();
            if op == "filter" {
                let keep = self.convert(v, bc::Shape::Bool);
                self.emit(Op::JumpIfNot {
                    cond: keep,
                    target: head,
                });
                let one = self.make_list(&[item]);
                self.emit(Op::Binary {
                    op: bc::BinOp::Add,
                    dst: out,
                    a: out,
                    b: one,
                });
            } else {
                let one = self.make_list(&[v]);
                self.emit(Op::Binary {
                    op: bc::BinOp::Add,
                    dst: out,
                    a: out,
                    b: one,
                });
            }
            self.fb().release_to(mark);
        }
        self.emit(Op::Jump { target: head });
        let exit = self.fb().here();
        self.fb().patch(head, exit);
        self.fb().scopes.pop();
        if reduce {
            // `out` holds the accumulator (null for an empty list).
            let c = self.const_null();
            let has = first.map(|(_, f)| f);
            if let Some(f) = has {
                let skip = self.emit(Op::JumpIfNot { cond: f, target: 0 });
                self.emit(Op::LoadConst { dst: out, c });
                let here = self.fb().here();
                self.fb().patch(skip, here);
            }
        }
        out
    }
}
