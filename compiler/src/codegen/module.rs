//! Lowering one module: its tables (strings, constants, templates, agents, inputs,
//! outputs, imports), its functions, and where each variable lives.
//!
//! A variable lives in a register of the function that owns it: the program body, a block,
//! or a parallel branch. Code in a nested function reaches outer variables through static
//! links (`GetUp`/`SetUp`). Blocks nest in the program body; branches nest in the function
//! that forks them. A variable gets its register when code first touches it.

use super::func::{FnBuilder, VarLoc};
use crate::resolved::{self as r, FnId, VarId};
use crate::source::SourceFile;
use crate::span::Span;
use bytecode_spec as bc;
use bytecode_spec::{ConstId, FuncId, FuncKind, KeysId, Loc, Op, Pc, Reg, StrId, TplId};
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::{EntityRef, PrimaryMap, SecondaryMap};
use rustc_hash::FxHashMap;

#[derive(Hash, PartialEq, Eq)]
enum ConstKey {
    Null,
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(StrId),
}

/// Why a function cannot be written (it needs more registers or instructions than the
/// verifier accepts).
fn too_large_message(func: &str, nregs: u32) -> String {
    use bytecode_spec::verify::{MAX_CODE, MAX_REGS};
    if nregs > MAX_REGS {
        format!(
            "`{func}` needs more than {MAX_REGS} registers from here on (values this construct holds at once)"
        )
    } else {
        format!("`{func}` needs more than {MAX_CODE} instructions from here on")
    }
}

/// Lowers one module.
pub struct Lowerer<'a> {
    pub(super) m: bc::Module,
    pub(super) p: &'a r::Program,
    src: &'a SourceFile,
    strs: FxHashMap<String, StrId>,
    consts: FxHashMap<ConstKey, ConstId>,
    /// Each variable's register in its owner's frame, once code touched it.
    regs: SecondaryMap<VarId, PackedOption<Reg>>,
    /// Functions being built, innermost last, each with the frame it builds.
    fns: Vec<(FnId, FnBuilder)>,
    /// Each block's function.
    pub(super) block_funcs: SecondaryMap<r::BlockId, PackedOption<FuncId>>,
    /// The block whose body is being lowered.
    pub(super) block: Option<r::BlockId>,
    /// The last offset turned into a location (consecutive instructions share spans).
    last_loc: (u32, Loc),
    /// Functions that grew larger than a function may be: where, and what.
    pub(super) too_large: Vec<(Span, String)>,
    /// What a session without `context:` inherits here: the previous step's result.
    pub(super) inherited: Option<Inherited>,
}

/// The result of the previous step of a sequence, which a session without `context:`
/// receives as its context.
#[derive(Clone, Copy)]
pub(super) struct Inherited {
    /// The frame whose register holds it (a nested function cannot read it).
    frame: FnId,
    /// The register.
    reg: Reg,
    /// Its label: the name it was bound to, or `previous`.
    label: StrId,
}

impl<'a> Lowerer<'a> {
    /// Lowers `program` into a module named `name`; `modules` gives the artifact module of
    /// each of its imports. Also returns the functions that grew too large to run, located.
    pub fn lower(
        name: &str,
        import_path: &str,
        program: &'a r::Program,
        src: &'a SourceFile,
        modules: &[u32],
    ) -> (bc::Module, Vec<(Span, String)>) {
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
            skills: Vec::new(),
            funcs: PrimaryMap::new(),
            entry: FuncId::new(0),
        };
        let mut lw = Lowerer {
            m,
            p: program,
            src,
            strs: FxHashMap::default(),
            consts: FxHashMap::default(),
            regs: SecondaryMap::new(),
            fns: Vec::new(),
            block_funcs: SecondaryMap::new(),
            block: None,
            last_loc: (u32::MAX, Loc::default()),
            too_large: Vec::new(),
            inherited: None,
        };
        lw.strs.reserve(64);
        lw.consts.reserve(16);
        let entry = lw.reserve_func("main", FuncKind::Main);
        lw.m.entry = entry;
        lw.tables(modules);
        // The program body.
        lw.fns
            .push((program.main, FnBuilder::new(FuncKind::Main, 0)));
        let value = lw.stmts_value(&program.body);
        lw.emit(Op::Return { src: value });
        let (_, main) = lw.fns.pop().expect("main builder");
        lw.finish_func(entry, main);
        for (id, block) in program.blocks.iter() {
            lw.block_body(id, block);
        }
        let main = &lw.m.funcs[entry];
        if main.nregs > bytecode_spec::verify::MAX_REGS && lw.too_large.is_empty() {
            lw.too_large
                .push((Span::default(), too_large_message("main", main.nregs)));
        }
        (lw.m, lw.too_large)
    }

    fn block_body(&mut self, id: r::BlockId, block: &'a r::Block) {
        let Some(func) = self.block_funcs[id].expand() else {
            return;
        };
        let mut fb = FnBuilder::new(FuncKind::Block, block.params.len() as u32);
        for (i, &param) in block.params.iter().enumerate() {
            let reg = Reg::new(i);
            self.regs[param] = reg.into();
            let var = &self.p.vars[param];
            if let Some(name) = &var.name {
                fb.names.push((name.clone(), reg, var.kind));
            }
        }
        self.fns.push((block.func, fb));
        self.block = Some(id);
        self.set_loc(block.span);
        let value = self.stmts_value(&block.body);
        self.block_exports();
        self.emit(Op::Return { src: value });
        self.block = None;
        let (_, fb) = self.fns.pop().expect("block builder");
        self.finish_func(func, fb);
    }

    /// Hands the block's variables its callers read to them, as the block returns.
    pub(super) fn block_exports(&mut self) {
        let Some(block) = self.block else {
            return;
        };
        for (name, var) in &self.p.blocks[block].exports {
            let loc = self.slot(*var);
            let name = self.s(name);
            self.emit(Op::SetBlockOutput { name, src: loc.reg });
        }
    }

    // ------------------------------------------------------------------ tables

    pub(super) fn s(&mut self, text: &str) -> StrId {
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

    pub(super) fn const_null(&mut self) -> ConstId {
        self.konst(ConstKey::Null, bc::Const::Null)
    }

    pub(super) fn const_int(&mut self, i: i64) -> ConstId {
        self.konst(ConstKey::Int(i), bc::Const::Int(i))
    }

    pub(super) fn const_bool(&mut self, b: bool) -> ConstId {
        self.konst(ConstKey::Bool(b), bc::Const::Bool(b))
    }

    pub(super) fn const_float(&mut self, f: f64) -> ConstId {
        self.konst(ConstKey::Float(f.to_bits()), bc::Const::Float(f))
    }

    pub(super) fn const_str(&mut self, text: &str) -> ConstId {
        let s = self.s(text);
        self.konst(ConstKey::Str(s), bc::Const::Str(s))
    }

    pub(super) fn literal(&mut self, value: &r::Literal) -> ConstId {
        match value {
            r::Literal::Null => self.const_null(),
            r::Literal::Bool(b) => self.const_bool(*b),
            r::Literal::Int(i) => self.const_int(*i),
            r::Literal::Float(f) => self.const_float(*f),
            r::Literal::Str(s) => self.const_str(s),
        }
    }

    pub(super) fn keys(&mut self, names: &[&str]) -> KeysId {
        let ids: Vec<StrId> = names.iter().map(|n| self.s(n)).collect();
        self.m.keysets.push(ids)
    }

    pub(super) fn reserve_func(&mut self, name: &str, kind: FuncKind) -> FuncId {
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
        if let Some(span) = fb.too_large {
            let name = self.m.strings[self.m.funcs[id].name].clone();
            self.too_large
                .push((span, too_large_message(&name, fb.nregs)));
        }
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
        for (name, reg, kind) in fb.names {
            let s = self.s(&name);
            self.m.funcs[id].vars.push((reg, s, kind));
        }
        self.m.funcs[id].vars.sort_by_key(|(r, _, _)| *r);
    }

    /// A template: literal text and the variables it interpolates.
    pub(super) fn template(&mut self, t: &r::Template) -> TplId {
        let parts = t
            .parts
            .iter()
            .map(|p| match p {
                r::TplPart::Text(text) => bc::TplPart::Text(self.s(text)),
                r::TplPart::Var { var, path, name } => {
                    let loc = self.slot(*var);
                    let path = path
                        .iter()
                        .map(|seg| match seg {
                            r::PathSeg::Field(f) => bc::PathStep::Field(self.s(f)),
                            r::PathSeg::Index(n) => bc::PathStep::Index(*n),
                        })
                        .collect();
                    bc::TplPart::Var {
                        depth: loc.depth,
                        reg: loc.reg,
                        path,
                        name: self.s(name),
                    }
                }
            })
            .collect();
        self.m.templates.push(bc::Template { parts })
    }

    pub(super) fn text_template(&mut self, text: &str) -> TplId {
        let s = self.s(text);
        self.m.templates.push(bc::Template {
            parts: vec![bc::TplPart::Text(s)],
        })
    }

    /// Fills the tables the program declares up front: imports, inputs, outputs, agents,
    /// and a function for each block.
    fn tables(&mut self, modules: &[u32]) {
        let p = self.p;
        for (id, import) in p.imports.iter() {
            let alias = self.s(&import.alias);
            self.m.programs.push(bc::ProgramRef {
                alias,
                module: modules[id.index()],
            });
        }
        for input in p.inputs.values() {
            let description = input.description.as_deref().map(|d| self.text_template(d));
            let name = self.s(&input.name);
            self.m.inputs.push(bc::InputDesc {
                name,
                description,
                parameter: input.parameter,
            });
        }
        for output in p.outputs.values() {
            let name = self.s(output);
            self.m.outputs.push(bc::OutputDesc { name });
        }
        for agent in p.agents.values() {
            let entry = self.agent_template(agent);
            self.m.agents.push(entry);
        }
        for (id, block) in p.blocks.iter() {
            let func = self.reserve_func(&block.name, FuncKind::Block);
            self.m.funcs[func].params = block.params.len() as u32;
            self.block_funcs[id] = func.into();
        }
    }

    // ------------------------------------------------------------------ builders

    pub(super) fn fb(&mut self) -> &mut FnBuilder {
        &mut self.fns.last_mut().expect("a function is being built").1
    }

    /// Makes the value in `reg`, labelled `label`, what the next session without
    /// `context:` in the function being built inherits.
    pub(super) fn pass_on(&mut self, reg: Reg, label: &str) {
        self.inherited = Some(Inherited {
            frame: self.current(),
            reg,
            label: self.s(label),
        });
    }

    /// What a session without `context:` lowered now inherits: its register and label.
    pub(super) fn inherited_here(&self) -> Option<(Reg, StrId)> {
        self.inherited
            .filter(|i| i.frame == self.current())
            .map(|i| (i.reg, i.label))
    }

    /// The frame of the function being built.
    fn current(&self) -> FnId {
        self.fns.last().expect("a function is being built").0
    }

    pub(super) fn emit(&mut self, op: Op) -> Pc {
        self.fb().emit(op)
    }

    pub(super) fn set_loc(&mut self, span: Span) {
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
        let fb = self.fb();
        fb.loc = loc;
        fb.span = span;
    }

    /// The source line of a span, for descriptors.
    pub(super) fn line(&self, span: Span) -> u32 {
        self.src.line_col(span.start as usize).line
    }

    pub(super) fn temp(&mut self) -> Reg {
        self.fb().temp()
    }

    /// Where variable `v` lives, seen from the function being built; gives it a register
    /// in its owner's frame if code has not touched it yet.
    pub(super) fn slot(&mut self, v: VarId) -> VarLoc {
        let var = &self.p.vars[v];
        let depth = self
            .p
            .depth(self.current(), var.owner)
            .expect("analysis binds names only to variables of enclosing frames");
        let reg = match self.regs[v].expand() {
            Some(reg) => reg,
            None => {
                let reg = match self.fns.iter_mut().rev().find(|(f, _)| *f == var.owner) {
                    Some((_, builder)) => {
                        let reg = builder.var_reg();
                        if let Some(name) = &var.name {
                            builder.names.push((name.clone(), reg, var.kind));
                        }
                        reg
                    }
                    // A program variable that the body's code never touched, seen from a
                    // block: the body's frame grows by one register (it holds null).
                    None => {
                        let main = &mut self.m.funcs[self.m.entry];
                        let reg = Reg::new(main.nregs as usize);
                        main.nregs += 1;
                        if let Some(name) = &var.name {
                            let (name, kind) = (self.s(name), var.kind);
                            self.m.funcs[self.m.entry].vars.push((reg, name, kind));
                        }
                        reg
                    }
                };
                self.regs[v] = reg.into();
                reg
            }
        };
        VarLoc { depth, reg }
    }

    /// Makes `reg` the register of variable `v` (a parameter, a caught error).
    pub(super) fn bind(&mut self, v: VarId, reg: Reg) {
        self.regs[v] = reg.into();
        let var = &self.p.vars[v];
        if let Some(name) = &var.name {
            let entry = (name.clone(), reg, var.kind);
            self.fb().names.push(entry);
        }
    }

    pub(super) fn load_const(&mut self, c: ConstId) -> Reg {
        let r = self.temp();
        self.emit(Op::LoadConst { dst: r, c });
        r
    }

    pub(super) fn null(&mut self) -> Reg {
        let c = self.const_null();
        self.load_const(c)
    }

    /// The value of a variable, in a register of the current frame.
    pub(super) fn read(&mut self, v: VarId) -> Reg {
        let loc = self.slot(v);
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

    pub(super) fn write(&mut self, v: VarId, src: Reg) {
        let loc = self.slot(v);
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
        self.update_output(v, src);
    }

    /// Binds the program output variable `v` holds (if any) to `src`, its new value.
    pub(super) fn update_output(&mut self, v: VarId, src: Reg) {
        if let Some(id) = self.p.vars[v].output {
            let output = bc::OutputId::new(id.index());
            self.emit(Op::SetOutput { output, src });
        }
    }

    /// Lowers `f` as the function of branch frame `frame`, nested in the current one, with
    /// parameters `params` (a variable, or a debug name for a slot the program cannot name).
    pub(super) fn branch_fn(
        &mut self,
        name: &str,
        frame: FnId,
        params: &[(Option<VarId>, &str)],
        f: impl FnOnce(&mut Self) -> Reg,
    ) -> FuncId {
        let id = self.reserve_func(name, FuncKind::Branch);
        self.m.funcs[id].params = params.len() as u32;
        let loc = self.fb().loc;
        let mut fb = FnBuilder::new(FuncKind::Branch, params.len() as u32);
        fb.loc = loc;
        self.fns.push((frame, fb));
        for (i, (var, name)) in params.iter().enumerate() {
            let reg = Reg::new(i);
            match var {
                Some(v) => self.bind(*v, reg),
                None => {
                    let entry = (name.to_string(), reg, bc::BindingKind::Let);
                    self.fb().names.push(entry);
                }
            }
        }
        let value = f(self);
        self.emit(Op::Return { src: value });
        let (_, fb) = self.fns.pop().expect("branch builder");
        self.finish_func(id, fb);
        id
    }

    pub(super) fn fork_desc(
        &mut self,
        join: r::Join,
        branches: Vec<FuncId>,
        names: Vec<Option<StrId>>,
    ) -> bc::ForkId {
        self.m.forks.push(bc::ForkDesc {
            strategy: join.strategy,
            count: join.count,
            on_fail: join.on_fail,
            branches,
            names,
        })
    }
}
