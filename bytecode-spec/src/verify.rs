//! The verifier: an artifact may come from anywhere, so before it runs every table index,
//! register, jump target and operand count is checked, and a dataflow pass checks that
//! protected (`try`) and fork regions are properly nested on every path. The VM then runs
//! verified code without re-checking these facts.
//!
//! Verification takes time and memory roughly linear in the artifact's size, so a small
//! hostile file cannot stall or exhaust the loader: facts about table entries are computed
//! once per module rather than at every use, region stacks are interned, and no walk
//! recurses on the artifact's structure.

use crate::bundle::BundledSkill;
use crate::ids::*;
use crate::module::*;
use crate::op::*;
use cranelift_entity::EntityRef;
use std::collections::{HashMap, HashSet};

/// Most registers a function may declare.
pub const MAX_REGS: u32 = 1 << 16;
/// Most instructions a function may hold.
pub const MAX_CODE: usize = 1 << 24;

/// An artifact the verifier accepted: the only form the VM runs. Only [`Verified::check`]
/// (which [`crate::artifact::load`] calls) makes one, so holding one proves the checks ran.
#[derive(Debug, PartialEq)]
pub struct Verified(Artifact);

impl Verified {
    /// Verifies `artifact`.
    pub fn check(artifact: Artifact) -> Result<Verified, VerifyError> {
        verify(&artifact)?;
        Ok(Verified(artifact))
    }

    /// The artifact, giving up the proof.
    pub fn into_inner(self) -> Artifact {
        self.0
    }

    /// The skills the artifact carries, each with its files, their bytes and hashes checked.
    pub fn skills(&self) -> &[BundledSkill] {
        &self.0.skills
    }

    /// The skill that module `module` imports as `name`, if it imports one by that name
    /// (a name in `skills:` that no `import` gives is looked up where the program runs).
    pub fn skill(&self, module: usize, name: &str) -> Option<&BundledSkill> {
        let m = self.0.modules.get(module)?;
        m.skills
            .iter()
            .find(|i| m.strings[i.name] == name)
            .map(|i| &self.0.skills[i.skill as usize])
    }
}

impl std::ops::Deref for Verified {
    type Target = Artifact;

    fn deref(&self) -> &Artifact {
        &self.0
    }
}

/// Why an artifact is rejected, with where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// Index of the module.
    pub module: usize,
    /// The function, if the problem is inside one.
    pub func: Option<u32>,
    /// The instruction, if the problem is at one.
    pub pc: Option<u32>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "module {}", self.module)?;
        if let Some(func) = self.func {
            write!(f, ", function f{func}")?;
        }
        if let Some(pc) = self.pc {
            write!(f, ", pc {pc}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for VerifyError {}

type R<T = ()> = Result<T, VerifyError>;

struct Cx<'a> {
    artifact: &'a Artifact,
    /// Per module, how many parameters (inputs the caller provides) it declares.
    parameters: &'a [u32],
    m: &'a Module,
    mi: usize,
    func: Option<u32>,
    pc: Option<u32>,
}

impl Cx<'_> {
    fn err<T>(&self, message: impl Into<String>) -> R<T> {
        Err(VerifyError {
            module: self.mi,
            func: self.func,
            pc: self.pc,
            message: message.into(),
        })
    }

    fn in_range<K: EntityRef, V>(
        &self,
        map: &cranelift_entity::PrimaryMap<K, V>,
        k: K,
        what: &str,
    ) -> R {
        if k.index() < map.len() {
            Ok(())
        } else {
            self.err(format!(
                "{what} index {} out of range ({} defined)",
                k.index(),
                map.len()
            ))
        }
    }

    fn s(&self, id: StrId) -> R {
        self.in_range(&self.m.strings, id, "string")
    }

    fn t(&self, id: TplId) -> R {
        self.in_range(&self.m.templates, id, "template")
    }

    /// The table references inside a template (its registers are checked where it is used).
    fn template(&self, tpl: &Template) -> R {
        for part in &tpl.parts {
            match part {
                TplPart::Text(s) => self.s(*s)?,
                TplPart::Var { name, path, .. } => {
                    self.s(*name)?;
                    for step in path {
                        if let PathStep::Field(s) = step {
                            self.s(*s)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn permissions(&self, ps: &[Permission]) -> R {
        for p in ps {
            self.s(p.kind)?;
            match &p.value {
                PermissionValue::Word(w) => self.s(*w)?,
                PermissionValue::Patterns(ts) => {
                    for t in ts {
                        self.t(*t)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The static nesting of functions: `parent[f]` is the function whose frame `f`'s static
/// link points to (blocks: the program body; branches: the function that forks them).
fn static_parents(cx: &mut Cx) -> R<Vec<Option<FuncId>>> {
    let m = cx.m;
    let mut parent: Vec<Option<FuncId>> = vec![None; m.funcs.len()];
    for (fid, f) in m.funcs.iter() {
        if f.kind == FuncKind::Block {
            parent[fid.index()] = Some(m.entry);
        }
    }
    // The function each fork descriptor was found in, so that its branches are linked once
    // however often it is started there.
    let mut forked_in: Vec<Option<FuncId>> = vec![None; m.forks.len()];
    for (fid, f) in m.funcs.iter() {
        cx.func = Some(fid.as_u32());
        for (pc, op) in f.code.iter().enumerate() {
            cx.pc = Some(pc as u32);
            let fork = match op {
                Op::Fork { fork, .. } | Op::ForkEach { fork, .. } => *fork,
                _ => continue,
            };
            cx.in_range(&m.forks, fork, "fork")?;
            if forked_in[fork.index()] == Some(fid) {
                continue;
            }
            forked_in[fork.index()] = Some(fid);
            for &b in &m.forks[fork].branches {
                if m.funcs[b].kind != FuncKind::Branch {
                    return cx.err(format!(
                        "fork {fork} starts f{}, which is not a branch function",
                        b.index()
                    ));
                }
                match parent[b.index()] {
                    Some(p) if p != fid => {
                        return cx.err(format!(
                            "branch function f{} is forked from two functions",
                            b.index()
                        ))
                    }
                    _ => parent[b.index()] = Some(fid),
                }
            }
        }
    }
    cx.pc = None;
    // Every chain of static links must end (at the program body, or at a function nothing
    // nests in) rather than loop. Each function is walked once: marked 1 while on the current
    // walk, 2 once its chain is known to end.
    let mut mark = vec![0u8; m.funcs.len()];
    let mut walk = Vec::new();
    for (fid, _) in m.funcs.iter() {
        cx.func = Some(fid.as_u32());
        let mut cur = Some(fid);
        while let Some(c) = cur {
            match mark[c.index()] {
                0 => {
                    mark[c.index()] = 1;
                    walk.push(c);
                    cur = parent[c.index()];
                }
                1 => return cx.err("functions are nested in a cycle"),
                _ => break,
            }
        }
        for c in walk.drain(..) {
            mark[c.index()] = 2;
        }
    }
    cx.func = None;
    Ok(parent)
}

/// The function `depth` static links out from `f`.
fn ancestor(parent: &[Option<FuncId>], f: FuncId, depth: u8) -> Option<FuncId> {
    let mut cur = f;
    for _ in 0..depth {
        cur = parent[cur.index()]?;
    }
    Some(cur)
}

/// Verifies a whole artifact.
pub fn verify(a: &Artifact) -> Result<(), VerifyError> {
    if a.modules.is_empty() {
        return Err(VerifyError {
            module: 0,
            func: None,
            pc: None,
            message: "the artifact holds no module".into(),
        });
    }
    let parameters: Vec<u32> = a
        .modules
        .iter()
        .map(|m| m.inputs.values().filter(|i| i.parameter).count() as u32)
        .collect();
    for (mi, m) in a.modules.iter().enumerate() {
        let mut cx = Cx {
            artifact: a,
            parameters: &parameters,
            m,
            mi,
            func: None,
            pc: None,
        };
        module(&mut cx)?;
    }
    // Imports must not form a cycle (a program cannot run itself forever).
    if let Some(mi) = import_cycle(a) {
        return Err(VerifyError {
            module: mi,
            func: None,
            pc: None,
            message: "imported programs form a cycle".into(),
        });
    }
    bundle(a)
}

/// The bundled skills: each well formed ([`BundledSkill::check`]), each imported by some
/// module, and each module's imports naming distinct skills that exist under that name.
fn bundle(a: &Artifact) -> R {
    let at = |module: usize, message: String| VerifyError {
        module,
        func: None,
        pc: None,
        message,
    };
    let mut used = vec![false; a.skills.len()];
    for (mi, m) in a.modules.iter().enumerate() {
        let mut names = HashSet::new();
        for import in &m.skills {
            let Some(name) = m.strings.get(import.name) else {
                return Err(at(
                    mi,
                    format!(
                        "skill import names string {}, out of range",
                        import.name.index()
                    ),
                ));
            };
            let Some(skill) = a.skills.get(import.skill as usize) else {
                return Err(at(
                    mi,
                    format!(
                        "skill `{name}` points at bundled skill {}, but the artifact carries {}",
                        import.skill,
                        a.skills.len()
                    ),
                ));
            };
            if skill.name != *name {
                return Err(at(
                    mi,
                    format!(
                        "skill `{name}` points at a bundled skill named `{}`",
                        skill.name
                    ),
                ));
            }
            if !names.insert(name.as_str()) {
                return Err(at(mi, format!("skill `{name}` is imported twice")));
            }
            used[import.skill as usize] = true;
        }
    }
    for (i, skill) in a.skills.iter().enumerate() {
        skill.check().map_err(|m| at(0, m))?;
        if !used[i] {
            return Err(at(
                0,
                format!(
                    "bundled skill `{}` is not imported by any module",
                    skill.name
                ),
            ));
        }
    }
    Ok(())
}

/// A module on a cycle of imports, if there is one. A depth-first search with an explicit
/// stack: an artifact may chain any number of modules.
fn import_cycle(a: &Artifact) -> Option<usize> {
    // 0: not visited; 1: on the current path; 2: no cycle through it.
    let mut state = vec![0u8; a.modules.len()];
    let mut path: Vec<(usize, usize)> = Vec::new();
    for root in 0..a.modules.len() {
        if state[root] != 0 {
            continue;
        }
        state[root] = 1;
        path.push((root, 0));
        while let Some((mi, next)) = path.last_mut() {
            let Some(p) = a.modules[*mi].programs.get(ProgId::new(*next)) else {
                state[*mi] = 2;
                path.pop();
                continue;
            };
            *next += 1;
            let callee = p.module as usize;
            match state[callee] {
                0 => {
                    state[callee] = 1;
                    path.push((callee, 0));
                }
                1 => return Some(callee),
                _ => {}
            }
        }
    }
    None
}

fn module(cx: &mut Cx) -> R {
    let m = cx.m;
    cx.in_range(&m.funcs, m.entry, "entry function")?;
    if m.funcs[m.entry].kind != FuncKind::Main || m.funcs[m.entry].params != 0 {
        return cx.err("the entry function must be a main function without parameters");
    }
    if m.funcs
        .iter()
        .any(|(f, func)| func.kind == FuncKind::Main && f != m.entry)
    {
        return cx.err("only the entry function may be a main function");
    }
    // Templates rendered outside any frame may not read variables.
    let frameless = |t: TplId| -> R {
        cx.t(t)?;
        if m.templates[t]
            .parts
            .iter()
            .any(|p| matches!(p, TplPart::Var { .. }))
        {
            return cx.err(format!(
                "template {t} is rendered outside a frame but reads a variable"
            ));
        }
        Ok(())
    };
    for ag in m.agents.values() {
        for p in &ag.permissions {
            if let PermissionValue::Patterns(ts) = &p.value {
                for t in ts {
                    frameless(*t)?;
                }
            }
        }
    }
    for inp in m.inputs.values().filter(|i| i.parameter) {
        if let Some(d) = inp.description {
            frameless(d)?;
        }
    }
    for c in m.consts.values() {
        if let Const::Str(s) = c {
            cx.s(*s)?;
        }
    }
    for tpl in m.templates.values() {
        cx.template(tpl)?;
    }
    for keys in m.keysets.values() {
        for k in keys {
            cx.s(*k)?;
        }
    }
    for ag in m.agents.values() {
        cx.s(ag.name)?;
        for s in ag
            .model
            .iter()
            .chain(ag.prompt.iter())
            .chain(ag.skills.iter())
        {
            cx.s(*s)?;
        }
        if let Persist::Path(p) = ag.persist {
            cx.s(p)?;
        }
        cx.permissions(&ag.permissions)?;
        for (k, c) in &ag.extra {
            cx.s(*k)?;
            cx.in_range(&m.consts, *c, "constant")?;
        }
    }
    for sd in m.sessions.values() {
        if let Some(ag) = sd.agent {
            cx.in_range(&m.agents, ag, "agent")?;
        } else if sd.kind == SessionKind::Resume {
            return cx.err("a resume session names no agent");
        }
        for s in sd
            .model
            .iter()
            .chain(sd.context_labels.iter())
            .chain(sd.skills.iter())
        {
            cx.s(*s)?;
        }
        for t in sd.label.iter().chain(&sd.prompt).chain(&sd.system) {
            cx.t(*t)?;
        }
        cx.permissions(&sd.permissions)?;
    }
    for ch in m.choices.values() {
        cx.t(ch.criteria)?;
        if ch.options.is_empty() {
            return cx.err("a choice has no options");
        }
        for o in &ch.options {
            cx.t(*o)?;
        }
    }
    for fk in m.forks.values() {
        if fk.names.len() != fk.branches.len() {
            return cx.err("a fork's branch names do not match its branches");
        }
        if fk.count == 0 {
            return cx.err("a fork's count is zero");
        }
        for n in fk.names.iter().flatten() {
            cx.s(*n)?;
        }
        for b in &fk.branches {
            cx.in_range(&m.funcs, *b, "function")?;
        }
    }
    for inp in m.inputs.values() {
        cx.s(inp.name)?;
        if let Some(d) = inp.description {
            cx.t(d)?;
        }
    }
    for out in m.outputs.values() {
        cx.s(out.name)?;
    }
    for p in m.programs.values() {
        cx.s(p.alias)?;
        if p.module as usize >= cx.artifact.modules.len() {
            return cx.err(format!(
                "imported program refers to module {}, which does not exist",
                p.module
            ));
        }
    }
    names(cx)?;
    let parents = static_parents(cx)?;
    let facts = Facts::new(m);
    for (fid, f) in m.funcs.iter() {
        cx.func = Some(fid.as_u32());
        cx.pc = None;
        function(cx, &facts, &parents, fid, f)?;
    }
    cx.func = None;
    Ok(())
}

/// Names that can become paths in a run directory (binding files, agent directories,
/// imported programs' directories, persist paths) must be identifiers or plain file names,
/// so that a crafted artifact cannot make the VM write outside the run. Runs after the
/// module-level checks: every string index is in range.
fn names(cx: &mut Cx) -> R {
    use crate::names::{is_file_name, is_identifier, is_variable, relative_components};
    let m = cx.m;
    let s = |id: StrId| m.strings[id].as_str();
    let bad = |cx: &Cx, what: &str, name: &str| {
        let shown: String = name.chars().take(64).collect();
        cx.err(format!("{what} {shown:?} is not an identifier"))
    };
    if !is_file_name(&m.name) || m.name.len() > crate::names::MAX_IDENTIFIER {
        return bad(cx, "the program name", &m.name);
    }
    if let Some(registry) = m.import_path.strip_prefix('@') {
        if !registry.split('/').all(is_file_name) {
            return cx.err(format!(
                "the import path {:?} is not @handle/slug",
                m.import_path
            ));
        }
    }
    for ag in m.agents.values() {
        if !is_identifier(s(ag.name)) {
            return bad(cx, "agent name", s(ag.name));
        }
        if let Persist::Path(p) = ag.persist {
            if relative_components(s(p)).is_none() {
                return cx.err(format!(
                    "agent {}: persist path {:?} must be relative and may not contain `..`",
                    s(ag.name),
                    s(p)
                ));
            }
        }
    }
    for inp in m.inputs.values() {
        if !is_identifier(s(inp.name)) {
            return bad(cx, "input name", s(inp.name));
        }
    }
    for out in m.outputs.values() {
        if !is_identifier(s(out.name)) {
            return bad(cx, "output name", s(out.name));
        }
    }
    for p in m.programs.values() {
        if !is_identifier(s(p.alias)) {
            return bad(cx, "imported program name", s(p.alias));
        }
    }
    for fk in m.forks.values() {
        for n in fk.names.iter().flatten() {
            if !is_variable(s(*n)) {
                return bad(cx, "branch name", s(*n));
            }
        }
    }
    for (fid, f) in m.funcs.iter() {
        cx.func = Some(fid.as_u32());
        cx.s(f.name)?;
        if f.kind == FuncKind::Block && !is_identifier(s(f.name)) {
            return bad(cx, "block name", s(f.name));
        }
        for (_, v, _) in &f.vars {
            cx.s(*v)?;
            if !is_variable(s(*v)) {
                return bad(cx, "variable name", s(*v));
            }
        }
    }
    cx.func = None;
    Ok(())
}

/// What templates need of the frames they are rendered in: for each static depth they read,
/// one more than the highest register they read there, sorted by depth.
#[derive(Clone, Debug, Default)]
struct Needs(Vec<(u8, u32)>);

impl Needs {
    fn add(&mut self, depth: u8, regs: u32) {
        match self.0.binary_search_by_key(&depth, |&(d, _)| d) {
            Ok(i) => self.0[i].1 = self.0[i].1.max(regs),
            Err(i) => self.0.insert(i, (depth, regs)),
        }
    }

    fn merge(&mut self, other: &Needs) {
        for &(depth, regs) in &other.0 {
            self.add(depth, regs);
        }
    }
}

/// Facts about a module's table entries, computed once so that checking an instruction that
/// uses an entry costs the same however large the entry is and however often it is used.
/// Built after the module-level checks, so every index in the tables is in range.
struct Facts {
    /// Per template.
    tpl: Vec<Needs>,
    /// Per session descriptor: its prompt, system prompt and permission patterns.
    session: Vec<Needs>,
    /// Per choice: its criteria and options.
    choice: Vec<Needs>,
    /// Per input: its description.
    input: Vec<Needs>,
    /// Per jump table: its largest target, if it has any.
    table_max: Vec<Option<Pc>>,
    /// Per jump table: its distinct targets.
    table_targets: Vec<Vec<Pc>>,
    /// Per fork descriptor: whether none of its branches takes parameters.
    fork_nullary: Vec<bool>,
}

impl Facts {
    fn new(m: &Module) -> Facts {
        let tpl: Vec<Needs> = m
            .templates
            .values()
            .map(|t| {
                let mut needs = Needs::default();
                for part in &t.parts {
                    if let TplPart::Var { depth, reg, .. } = part {
                        needs.add(*depth, reg.as_u32().saturating_add(1));
                    }
                }
                needs
            })
            .collect();
        let union = |ts: &mut dyn Iterator<Item = &TplId>| {
            let mut needs = Needs::default();
            for t in ts {
                needs.merge(&tpl[t.index()]);
            }
            needs
        };
        let session = m
            .sessions
            .values()
            .map(|sd| {
                let patterns = sd.permissions.iter().flat_map(|p| match &p.value {
                    PermissionValue::Patterns(ts) => ts.as_slice(),
                    PermissionValue::Word(_) => &[],
                });
                union(
                    &mut sd
                        .label
                        .iter()
                        .chain(&sd.prompt)
                        .chain(&sd.system)
                        .chain(patterns),
                )
            })
            .collect();
        let choice = m
            .choices
            .values()
            .map(|ch| union(&mut std::iter::once(&ch.criteria).chain(ch.options.iter())))
            .collect();
        let input = m
            .inputs
            .values()
            .map(|i| union(&mut i.description.iter()))
            .collect();
        let table_max = m.tables.values().map(|t| t.iter().copied().max()).collect();
        let table_targets = m
            .tables
            .values()
            .map(|t| {
                let mut targets = t.clone();
                targets.sort_unstable();
                targets.dedup();
                targets
            })
            .collect();
        let fork_nullary = m
            .forks
            .values()
            .map(|fk| fk.branches.iter().all(|b| m.funcs[*b].params == 0))
            .collect();
        Facts {
            tpl,
            session,
            choice,
            input,
            table_max,
            table_targets,
            fork_nullary,
        }
    }
}

fn function(
    cx: &mut Cx,
    facts: &Facts,
    parents: &[Option<FuncId>],
    fid: FuncId,
    f: &Function,
) -> R {
    let m = cx.m;
    cx.s(f.name)?;
    if f.nregs > MAX_REGS || f.code.len() > MAX_CODE {
        return cx.err("function is too large");
    }
    if f.params > f.nregs {
        return cx.err("more parameters than registers");
    }
    for (reg, name, _) in &f.vars {
        cx.s(*name)?;
        if reg.as_u32() >= f.nregs {
            return cx.err(format!(
                "debug name for register {reg}, beyond the {} registers",
                f.nregs
            ));
        }
    }
    if f.locs.len() != f.code.len() {
        return cx.err("debug table length differs from the code length");
    }
    match f.code.last() {
        None => return cx.err("function has no code"),
        Some(op) if !op.is_terminator() => {
            return cx.err("control falls off the end of the function");
        }
        _ => {}
    }
    let len = f.code.len() as u32;
    let n = f.nregs;
    for (pc, op) in f.code.iter().enumerate() {
        cx.pc = Some(pc as u32);
        let reg = |r: Reg| -> R {
            if r.as_u32() < n {
                Ok(())
            } else {
                cx.err(format!("register {r} out of range ({n} registers)"))
            }
        };
        let span = |first: Reg, count: u32| -> R {
            if (first.as_u32() as u64) + (count as u64) <= n as u64 {
                Ok(())
            } else {
                cx.err(format!(
                    "registers {first}..+{count} out of range ({n} registers)"
                ))
            }
        };
        let target = |t: Pc| -> R {
            if t < len {
                Ok(())
            } else {
                cx.err(format!("jump target {t} out of range ({len} instructions)"))
            }
        };
        let up = |depth: u8, r: Reg| -> R {
            match ancestor(parents, fid, depth) {
                Some(a) if r.as_u32() < m.funcs[a].nregs => Ok(()),
                Some(_) => cx.err(format!(
                    "register {r} out of range in the frame {depth} link(s) out"
                )),
                None => cx.err(format!("no frame {depth} static link(s) out")),
            }
        };
        // The frames a template reads, walked outwards once for all its depths.
        let needs = |needs: &Needs, what: &dyn std::fmt::Display| -> R {
            let (mut frame, mut at, mut nregs) = (fid, 0u8, n);
            for &(depth, regs) in &needs.0 {
                while at < depth {
                    match parents[frame.index()] {
                        Some(p) => (frame, at, nregs) = (p, at + 1, m.funcs[p].nregs),
                        None => {
                            return cx.err(format!("{what}: no frame {depth} static link(s) out"))
                        }
                    }
                }
                if regs > nregs {
                    let r = regs - 1;
                    return if depth == 0 {
                        cx.err(format!(
                            "{what} reads register r{r}, out of range ({nregs} registers)"
                        ))
                    } else {
                        cx.err(format!("{what} reads register r{r}, out of range in the frame {depth} link(s) out"))
                    };
                }
            }
            Ok(())
        };
        let tpl = |t: TplId| -> R {
            cx.t(t)?;
            needs(&facts.tpl[t.index()], &format_args!("template {t}"))
        };
        match op {
            Op::LoadConst { dst, c } => {
                reg(*dst)?;
                cx.in_range(&m.consts, *c, "constant")?;
            }
            Op::Move { dst, src } | Op::Not { dst, src } | Op::Neg { dst, src } => {
                reg(*dst)?;
                reg(*src)?;
            }
            Op::GetUp { dst, depth, reg: r } => {
                reg(*dst)?;
                if *depth == 0 {
                    return cx.err("get_up needs a depth of at least 1");
                }
                up(*depth, *r)?;
            }
            Op::SetUp { depth, reg: r, src } => {
                reg(*src)?;
                if *depth == 0 {
                    return cx.err("set_up needs a depth of at least 1");
                }
                up(*depth, *r)?;
            }
            Op::Format { dst, tpl: t } => {
                reg(*dst)?;
                tpl(*t)?;
            }
            Op::MakeList { dst, first, len: l } => {
                reg(*dst)?;
                span(*first, *l)?;
            }
            Op::MakeRecord { dst, first, keys } => {
                reg(*dst)?;
                cx.in_range(&m.keysets, *keys, "key list")?;
                span(*first, m.keysets[*keys].len() as u32)?;
            }
            Op::Binary { dst, a, b, .. } => {
                reg(*dst)?;
                reg(*a)?;
                reg(*b)?;
            }
            Op::GetField { dst, src, name } => {
                reg(*dst)?;
                reg(*src)?;
                cx.s(*name)?;
            }
            Op::GetIndex { dst, src, index } => {
                reg(*dst)?;
                reg(*src)?;
                reg(*index)?;
            }
            Op::Convert { dst, src, .. } => {
                reg(*dst)?;
                reg(*src)?;
            }
            Op::Jump { target: t } => target(*t)?,
            Op::JumpIf { cond, target: t } | Op::JumpIfNot { cond, target: t } => {
                reg(*cond)?;
                target(*t)?;
            }
            Op::Switch { index, table } => {
                reg(*index)?;
                cx.in_range(&m.tables, *table, "jump table")?;
                match facts.table_max[table.index()] {
                    None => return cx.err("empty jump table"),
                    Some(max) => target(max)?,
                }
            }
            Op::ForNext {
                list,
                counter,
                item,
                index,
                exit,
            } => {
                reg(*list)?;
                reg(*counter)?;
                reg(*item)?;
                if let Some(i) = index {
                    reg(*i)?;
                }
                target(*exit)?;
            }
            Op::RepeatNext {
                count,
                counter,
                index,
                exit,
            } => {
                reg(*count)?;
                reg(*counter)?;
                if let Some(i) = index {
                    reg(*i)?;
                }
                target(*exit)?;
            }
            Op::LoopNext {
                counter,
                max,
                index,
                exit,
            } => {
                reg(*counter)?;
                for r in max.iter().chain(index.iter()) {
                    reg(*r)?;
                }
                target(*exit)?;
            }
            Op::TryEnter {
                catch,
                finally,
                err,
                pending,
            } => {
                reg(*err)?;
                reg(*pending)?;
                for t in catch.iter().chain(finally.iter()) {
                    target(*t)?;
                }
                if catch.is_none() && finally.is_none() {
                    return cx.err("try_enter without a catch or finally target");
                }
            }
            Op::TryExit => {}
            Op::EndFinally { pending } => reg(*pending)?,
            Op::Throw { msg } => reg(*msg)?,
            Op::Rethrow { err } => reg(*err)?,
            Op::Assert { cond, msg } => {
                reg(*cond)?;
                if let Some(m) = msg {
                    reg(*m)?;
                }
            }
            Op::Call {
                func,
                args,
                argc,
                dst,
            } => {
                cx.in_range(&m.funcs, *func, "function")?;
                let callee = &m.funcs[*func];
                if callee.kind != FuncKind::Block {
                    return cx.err(format!(
                        "call targets f{}, which is not a block",
                        func.index()
                    ));
                }
                if callee.params != *argc {
                    return cx.err(format!(
                        "call passes {argc} argument(s) to f{} which takes {}",
                        func.index(),
                        callee.params
                    ));
                }
                span(*args, *argc)?;
                span(*dst, 2)?;
            }
            Op::Return { src } => reg(*src)?,
            Op::SetBlockOutput { name, src } => {
                cx.s(*name)?;
                reg(*src)?;
            }
            Op::Invoke { prog, args, dst } => {
                cx.in_range(&m.programs, *prog, "program")?;
                span(*args, cx.parameters[m.programs[*prog].module as usize])?;
                reg(*dst)?;
            }
            Op::LoadInput { dst, input } => {
                reg(*dst)?;
                cx.in_range(&m.inputs, *input, "input")?;
            }
            Op::SetOutput { output, src } => {
                cx.in_range(&m.outputs, *output, "output")?;
                reg(*src)?;
            }
            Op::Session { dst, desc, ctx } => {
                reg(*dst)?;
                reg(*ctx)?;
                cx.in_range(&m.sessions, *desc, "session")?;
                needs(
                    &facts.session[desc.index()],
                    &format_args!("session {desc}"),
                )?;
            }
            Op::Evaluate { dst, cond } => {
                reg(*dst)?;
                tpl(*cond)?;
            }
            Op::Choose { dst, choice } => {
                reg(*dst)?;
                cx.in_range(&m.choices, *choice, "choice")?;
                needs(
                    &facts.choice[choice.index()],
                    &format_args!("choice {choice}"),
                )?;
            }
            Op::Ask { dst, input } => {
                reg(*dst)?;
                cx.in_range(&m.inputs, *input, "input")?;
                needs(&facts.input[input.index()], &format_args!("input {input}"))?;
            }
            Op::Fork { fork, handle } => {
                reg(*handle)?;
                if !facts.fork_nullary[fork.index()] {
                    return cx.err("a parallel branch function takes parameters");
                }
            }
            Op::ForkEach { fork, list, handle } => {
                reg(*list)?;
                reg(*handle)?;
                let fk = &m.forks[*fork];
                if fk.branches.len() != 1 || m.funcs[fk.branches[0]].params != 2 {
                    return cx
                        .err("fork_each needs exactly one body function taking (item, index)");
                }
            }
            Op::Join { handle, dst } => {
                reg(*handle)?;
                reg(*dst)?;
            }
        }
    }
    cx.pc = None;
    regions(cx, facts, f)
}

/// An open region on some path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Region {
    Try,
    Fork(Reg),
}

/// Stacks of open regions, interned: equal stacks share one id, so the state at an
/// instruction is one integer and states compare in constant time. Id 0 is the empty stack.
struct Stacks {
    /// Per id: the stack below the top, the top region, and whether the stack holds a fork.
    nodes: Vec<(u32, Region, bool)>,
    ids: HashMap<(u32, Region), u32>,
}

impl Stacks {
    fn new() -> Self {
        Stacks {
            // The entry for the empty stack; only its "holds a fork" flag is ever read.
            nodes: vec![(0, Region::Try, false)],
            ids: HashMap::new(),
        }
    }

    fn push(&mut self, below: u32, top: Region) -> u32 {
        let forks = self.nodes[below as usize].2 || matches!(top, Region::Fork(_));
        let next = self.nodes.len() as u32;
        let nodes = &mut self.nodes;
        *self.ids.entry((below, top)).or_insert_with(|| {
            nodes.push((below, top, forks));
            next
        })
    }

    /// The top region and the stack below it.
    fn pop(&self, stack: u32) -> Option<(Region, u32)> {
        let (below, top, _) = self.nodes[stack as usize];
        (stack != 0).then_some((top, below))
    }

    fn holds_fork(&self, stack: u32) -> bool {
        self.nodes[stack as usize].2
    }
}

/// Checks that `try` and fork regions nest the same way on every path to each instruction.
fn regions(cx: &mut Cx, facts: &Facts, f: &Function) -> R {
    let mut stacks = Stacks::new();
    // The stack each instruction is reached with, set when it is first reached.
    let mut state: Vec<Option<u32>> = vec![None; f.code.len()];
    let mut work: Vec<(Pc, u32)> = vec![(0, 0)];
    state[0] = Some(0);
    // Jump tables whose targets were already reached with a given stack.
    let mut switched: HashSet<(TableId, u32)> = HashSet::new();
    while let Some((pc, stack)) = work.pop() {
        cx.pc = Some(pc);
        let next = pc + 1;
        macro_rules! go {
            ($to:expr, $stack:expr) => {{
                let (to, stack): (Pc, u32) = ($to, $stack);
                match state[to as usize] {
                    None => {
                        state[to as usize] = Some(stack);
                        work.push((to, stack));
                    }
                    Some(seen) if seen == stack => {}
                    Some(_) => {
                        return cx.err(format!(
                            "try or fork regions are unbalanced: paths reach pc {to} with different open regions"
                        ))
                    }
                }
            }};
        }
        match &f.code[pc as usize] {
            Op::Jump { target } => go!(*target, stack),
            Op::JumpIf { target, .. } | Op::JumpIfNot { target, .. } => {
                go!(*target, stack);
                go!(next, stack);
            }
            Op::Switch { table, .. } => {
                if switched.insert((*table, stack)) {
                    for &t in &facts.table_targets[table.index()] {
                        go!(t, stack);
                    }
                }
            }
            Op::ForNext { exit, .. } | Op::RepeatNext { exit, .. } | Op::LoopNext { exit, .. } => {
                go!(*exit, stack);
                go!(next, stack);
            }
            Op::TryEnter { catch, finally, .. } => {
                let inner = stacks.push(stack, Region::Try);
                if let Some(c) = catch {
                    go!(*c, inner);
                }
                if let Some(fin) = finally {
                    go!(*fin, stack);
                }
                go!(next, inner);
            }
            Op::TryExit => match stacks.pop(stack) {
                Some((Region::Try, below)) => go!(next, below),
                _ => return cx.err("try_exit without an open try region"),
            },
            Op::Fork { handle, .. } | Op::ForkEach { handle, .. } => {
                let inner = stacks.push(stack, Region::Fork(*handle));
                go!(next, inner);
            }
            Op::Join { handle, .. } => match stacks.pop(stack) {
                Some((Region::Fork(h), below)) if h == *handle => go!(next, below),
                _ => return cx.err("join does not match the innermost open fork"),
            },
            Op::Return { .. } | Op::Throw { .. } | Op::Rethrow { .. } => {
                if stacks.holds_fork(stack) {
                    return cx.err("leaves the function with a fork not joined");
                }
            }
            _ => go!(next, stack),
        }
    }
    cx.pc = None;
    Ok(())
}
