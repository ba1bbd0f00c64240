//! The disassembler: a readable listing of an artifact.
//!
//! The listing is deterministic (tables in index order, no addresses, no hash-map order), so
//! it can serve as a golden file. It never panics, even on an artifact the verifier would
//! reject: an index that points nowhere is shown as `<bad s99>`, `<bad sess7>` and so on.
//!
//! Layout (two spaces of indentation per level):
//!
//! ```text
//! artifact
//!   format    1
//!   compiler  0.1.0
//!   source    sha256 abababababababababababababababababababababababababababababababab
//!   modules   1
//!
//! module 0 hello (main program)
//!   entry f0 main
//!   sessions:
//!     sess0 session, line 2
//!       prompt: t1 "Say hello to {name}"
//!   inputs:
//!     in0 name parameter t0 "Who to greet"
//!   templates:
//!     t0 "Who to greet"
//!     t1 "Say hello to {name}"  [name=r0]
//!
//!   function f0 main (main, params 0, registers 3)
//!        0  load_input r0, in0 name           ; line 1: input name: "Who to greet"
//!        1  make_list r2, []                  ; line 2: session "Say hello to {name}"
//!        2  session r1, sess0 "Say hello to {name}" ctx=r2  ; line 2
//!        3  return r1                         ; line 2
//! ```
//!
//! Conventions: registers are `rN`; a register `d` static links out is `upD.rN`; table
//! entries are shown by id followed by what identifies them (a name, or quoted text);
//! templates are quoted with `{name}` for each variable and `\{`/`\}` for literal braces;
//! constants are shown as values; jump targets are pc numbers. In instruction lines, long
//! texts are cut after [`INLINE_TEXT`] characters (`...`); the module's tables show them in
//! full, and lists of more than eight registers, targets or branches are abbreviated. Each
//! instruction ends with `; line N`, followed by the trimmed source line whenever the line
//! number changes; instructions at line 0 (no source position) have no comment.

use crate::artifact::{Header, FORMAT_VERSION};
use crate::ids::*;
use crate::module::*;
use crate::op::*;
use cranelift_entity::{EntityRef, PrimaryMap};
use std::fmt::Display;

/// Characters of text shown for a string or template inside an instruction line.
pub const INLINE_TEXT: usize = 60;
/// The column where the `; line N` comment of an instruction starts (when the instruction
/// text is shorter).
const COMMENT_COLUMN: usize = 44;
/// Most items (registers, jump targets, branches, fields) an instruction line lists; longer
/// lists are abbreviated, so that a corrupt artifact cannot make the listing explode.
const MAX_LISTED: usize = 8;

/// Produces the listing of an artifact.
pub fn disassemble(header: &Header, artifact: &Artifact) -> String {
    let mut out = String::new();
    out.push_str("artifact\n");
    out.push_str(&format!("  format    {FORMAT_VERSION}\n"));
    out.push_str(&format!("  compiler  {}\n", word(&header.compiler_version)));
    out.push_str("  source    sha256 ");
    for b in header.source_hash {
        out.push_str(&format!("{b:02x}"));
    }
    out.push('\n');
    out.push_str(&format!("  modules   {}\n", artifact.modules.len()));
    // Each module's parameters, for naming the arguments of `invoke` without rescanning.
    let params: Vec<Vec<StrId>> = artifact
        .modules
        .iter()
        .map(|m| {
            m.inputs
                .values()
                .filter(|i| i.parameter)
                .map(|i| i.name)
                .collect()
        })
        .collect();
    for (mi, m) in artifact.modules.iter().enumerate() {
        out.push('\n');
        Dis {
            artifact,
            params: &params,
            m,
            out: &mut out,
        }
        .module(mi);
    }
    out
}

struct Dis<'a> {
    artifact: &'a Artifact,
    params: &'a [Vec<StrId>],
    m: &'a Module,
    out: &'a mut String,
}

/// Shows an out-of-range id.
fn bad(id: impl Display) -> String {
    format!("<bad {id}>")
}

/// Shows a name bare when it is a plain word, quoted otherwise.
fn word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@' | '/' | '$' | '+')
        });
    if plain {
        s.to_string()
    } else {
        quoted(s, false, None)
    }
}

/// Appends `s` escaped (and, for template text, with literal braces escaped), stopping after
/// `limit` characters if given. Returns whether the text was cut.
fn escape_into(out: &mut String, s: &str, braces: bool, limit: &mut Option<usize>) -> bool {
    for c in s.chars() {
        if let Some(left) = limit {
            if *left == 0 {
                return true;
            }
            *left -= 1;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '{' if braces => out.push_str("\\{"),
            '}' if braces => out.push_str("\\}"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    false
}

/// A quoted, escaped string, cut after `limit` characters if given.
fn quoted(s: &str, braces: bool, limit: Option<usize>) -> String {
    let mut out = String::from("\"");
    let mut limit = limit;
    if escape_into(&mut out, s, braces, &mut limit) {
        out.push_str("...");
    }
    out.push('"');
    out
}

/// A register by number (registers computed from a base and a count may exceed `u32`).
fn reg_n(n: u64) -> String {
    if n >= u32::MAX as u64 {
        format!("<bad r{n}>")
    } else {
        format!("r{n}")
    }
}

/// `[a, b, c]`, showing at most [`MAX_LISTED`] of the `total` items.
fn capped(items: impl Iterator<Item = String>, total: usize) -> String {
    let mut shown: Vec<String> = items.take(MAX_LISTED).collect();
    if total > shown.len() {
        shown.push(format!("... ({total} in all)"));
    }
    format!("[{}]", shown.join(", "))
}

/// `count` consecutive registers from `first`.
fn reg_list(first: Reg, count: u64) -> String {
    let f = first.as_u32() as u64;
    match count {
        0 => "[]".to_string(),
        n if n <= MAX_LISTED as u64 => {
            let regs: Vec<String> = (f..f + n).map(reg_n).collect();
            format!("[{}]", regs.join(", "))
        }
        n => format!("[{} .. {}] ({n} registers)", reg_n(f), reg_n(f + n - 1)),
    }
}

fn up(depth: u8, reg: Reg) -> String {
    if depth == 0 {
        reg.to_string()
    } else {
        format!("up{depth}.{reg}")
    }
}

fn binop(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
    }
}

fn shape(s: Shape) -> &'static str {
    match s {
        Shape::List => "list",
        Shape::Record => "record",
        Shape::Int => "int",
        Shape::Bool => "bool",
    }
}

fn func_kind(k: FuncKind) -> &'static str {
    match k {
        FuncKind::Main => "main",
        FuncKind::Block => "block",
        FuncKind::Branch => "branch",
    }
}

fn strategy(s: Strategy) -> &'static str {
    match s {
        Strategy::All => "all",
        Strategy::First => "first",
        Strategy::Any => "any",
    }
}

fn on_fail(o: OnFail) -> &'static str {
    match o {
        OnFail::FailFast => "fail-fast",
        OnFail::Continue => "continue",
        OnFail::Ignore => "ignore",
    }
}

fn backoff(b: Backoff) -> &'static str {
    match b {
        Backoff::None => "none",
        Backoff::Linear => "linear",
        Backoff::Exponential => "exponential",
    }
}

/// Looks `k` up in `map`, or shows it as a bad id.
fn lookup<K: EntityRef + Display, V>(map: &PrimaryMap<K, V>, k: K) -> Result<&V, String> {
    map.get(k).ok_or_else(|| bad(k))
}

impl Dis<'_> {
    fn line(&mut self, indent: usize, text: impl AsRef<str>) {
        for _ in 0..indent {
            self.out.push_str("  ");
        }
        self.out.push_str(text.as_ref());
        self.out.push('\n');
    }

    /// A string as a bare word or quoted (names).
    fn name(&self, s: StrId) -> String {
        match self.m.strings.get(s) {
            Some(t) => word(t),
            None => bad(s),
        }
    }

    /// A string, quoted.
    fn string(&self, s: StrId, limit: Option<usize>) -> String {
        match self.m.strings.get(s) {
            Some(t) => quoted(t, false, limit),
            None => bad(s),
        }
    }

    fn names(&self, ss: &[StrId]) -> String {
        ss.iter()
            .map(|s| self.name(*s))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A template's text, quoted, with `{name}` for its variables.
    fn template_text(&self, t: TplId, limit: Option<usize>) -> String {
        let tpl = match lookup(&self.m.templates, t) {
            Ok(tpl) => tpl,
            Err(b) => return b,
        };
        let mut out = String::from("\"");
        let mut limit = limit;
        let mut cut = false;
        for part in &tpl.parts {
            if limit == Some(0) {
                cut = true;
                break;
            }
            let piece = match part {
                TplPart::Text(s) => match self.m.strings.get(*s) {
                    Some(text) => {
                        cut = escape_into(&mut out, text, true, &mut limit);
                        if cut {
                            break;
                        }
                        continue;
                    }
                    None => bad(*s),
                },
                TplPart::Var { path, name, .. } => {
                    let mut v = String::from("{");
                    v.push_str(&self.var_name(*name));
                    for step in path {
                        match step {
                            PathStep::Field(s) => {
                                v.push('.');
                                v.push_str(&self.var_name(*s));
                            }
                            PathStep::Index(i) => v.push_str(&format!("[{i}]")),
                        }
                    }
                    v.push('}');
                    v
                }
            };
            // Variables and bad ids are shown whole, but count against the limit.
            if let Some(left) = &mut limit {
                if *left == 0 {
                    cut = true;
                    break;
                }
                *left = left.saturating_sub(piece.chars().count());
            }
            out.push_str(&piece);
        }
        if cut {
            out.push_str("...");
        }
        out.push('"');
        out
    }

    /// A variable or field name inside a template, escaped like template text.
    fn var_name(&self, s: StrId) -> String {
        match self.m.strings.get(s) {
            Some(n) => {
                let mut out = String::new();
                escape_into(&mut out, n, true, &mut None);
                out
            }
            None => bad(s),
        }
    }

    /// `tN "text"`.
    fn template(&self, t: TplId, limit: Option<usize>) -> String {
        if self.m.templates.get(t).is_none() {
            return bad(t);
        }
        format!("{t} {}", self.template_text(t, limit))
    }

    /// Where a template's variables come from: `[name=r0, other=up1.r3]`.
    fn bindings(&self, tpl: &Template) -> String {
        let vars: Vec<String> = tpl
            .parts
            .iter()
            .filter_map(|p| match p {
                TplPart::Var {
                    depth, reg, name, ..
                } => Some(format!("{}={}", self.name(*name), up(*depth, *reg))),
                TplPart::Text(_) => None,
            })
            .collect();
        if vars.is_empty() {
            String::new()
        } else {
            format!("  [{}]", vars.join(", "))
        }
    }

    fn constant(&self, c: ConstId) -> String {
        match lookup(&self.m.consts, c) {
            Err(b) => b,
            Ok(Const::Null) => "null".to_string(),
            Ok(Const::Bool(b)) => b.to_string(),
            Ok(Const::Int(i)) => i.to_string(),
            Ok(Const::Float(f)) => format!("{f:?}"),
            Ok(Const::Str(s)) => self.string(*s, Some(INLINE_TEXT)),
        }
    }

    /// `fN name`.
    fn func(&self, f: FuncId) -> String {
        match self.m.funcs.get(f) {
            Some(func) => format!("{f} {}", self.name(func.name)),
            None => bad(f),
        }
    }

    fn agent(&self, a: AgentId) -> String {
        match self.m.agents.get(a) {
            Some(ag) => format!("{a} {}", self.name(ag.name)),
            None => bad(a),
        }
    }

    fn input(&self, i: InputId) -> String {
        match self.m.inputs.get(i) {
            Some(inp) => format!("{i} {}", self.name(inp.name)),
            None => bad(i),
        }
    }

    fn output(&self, o: OutputId) -> String {
        match self.m.outputs.get(o) {
            Some(out) => format!("{o} {}", self.name(out.name)),
            None => bad(o),
        }
    }

    fn permissions(&self, ps: &[Permission]) -> String {
        ps.iter()
            .map(|p| {
                let value = match &p.value {
                    PermissionValue::Word(w) => self.name(*w),
                    PermissionValue::Patterns(ts) => {
                        let pats: Vec<String> =
                            ts.iter().map(|t| self.template_text(*t, None)).collect();
                        format!("[{}]", pats.join(", "))
                    }
                };
                format!("{}={value}", self.name(p.kind))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn module(&mut self, mi: usize) {
        let m = self.m;
        let origin = if m.import_path.is_empty() {
            if mi == 0 {
                "main program".to_string()
            } else {
                "no import path".to_string()
            }
        } else {
            format!("imported as {}", quoted(&m.import_path, false, None))
        };
        self.line(0, format!("module {mi} {} ({origin})", word(&m.name)));
        let entry = self.func(m.entry);
        self.line(1, format!("entry {entry}"));
        self.agents();
        self.sessions();
        self.choices();
        self.forks();
        self.inputs();
        if !m.outputs.is_empty() {
            self.line(1, "outputs:");
            for o in m.outputs.keys() {
                let text = self.output(o);
                self.line(2, text);
            }
        }
        if !m.programs.is_empty() {
            self.line(1, "programs:");
            for (p, prog) in m.programs.iter() {
                let target = match self.artifact.modules.get(prog.module as usize) {
                    Some(callee) => format!("module {} {}", prog.module, word(&callee.name)),
                    None => format!("<bad module {}>", prog.module),
                };
                let text = format!("{p} {} -> {target}", self.name(prog.alias));
                self.line(2, text);
            }
        }
        if !m.templates.is_empty() {
            self.line(1, "templates:");
            for (t, tpl) in m.templates.iter() {
                let text = format!("{t} {}{}", self.template_text(t, None), self.bindings(tpl));
                self.line(2, text);
            }
        }
        let lines: Vec<&str> = m.source.lines().collect();
        for (f, func) in m.funcs.iter() {
            self.out.push('\n');
            self.function(f, func, &lines);
        }
    }

    fn agents(&mut self) {
        let m = self.m;
        if m.agents.is_empty() {
            return;
        }
        self.line(1, "agents:");
        for (a, ag) in m.agents.iter() {
            let head = self.agent(a);
            self.line(2, head);
            if let Some(model) = ag.model {
                let text = format!("model: {}", self.name(model));
                self.line(3, text);
            }
            if let Some(prompt) = ag.prompt {
                let text = format!("prompt: {}", self.string(prompt, None));
                self.line(3, text);
            }
            let persist = match ag.persist {
                Persist::None => None,
                Persist::Run => Some("run".to_string()),
                Persist::Project => Some("project".to_string()),
                Persist::User => Some("user".to_string()),
                Persist::Path(p) => Some(format!("path {}", self.string(p, None))),
            };
            if let Some(p) = persist {
                self.line(3, format!("persist: {p}"));
            }
            if !ag.skills.is_empty() {
                let text = format!("skills: {}", self.names(&ag.skills));
                self.line(3, text);
            }
            if !ag.permissions.is_empty() {
                let text = format!("permissions: {}", self.permissions(&ag.permissions));
                self.line(3, text);
            }
            if !ag.extra.is_empty() {
                let extra: Vec<String> = ag
                    .extra
                    .iter()
                    .map(|(k, c)| format!("{}={}", self.name(*k), self.constant(*c)))
                    .collect();
                self.line(3, format!("extra: {}", extra.join(", ")));
            }
        }
    }

    fn sessions(&mut self) {
        let m = self.m;
        if m.sessions.is_empty() {
            return;
        }
        self.line(1, "sessions:");
        for (s, sd) in m.sessions.iter() {
            let mut head = format!(
                "{s} {}",
                match sd.kind {
                    SessionKind::Fresh => "session",
                    SessionKind::Resume => "resume",
                }
            );
            if let Some(a) = sd.agent {
                head.push_str(&format!(", agent {}", self.agent(a)));
            }
            if let Some(l) = sd.label {
                head.push_str(&format!(", label {}", self.string(l, None)));
            }
            head.push_str(&format!(", line {}", sd.line));
            self.line(2, head);
            if let Some(t) = sd.prompt {
                let text = format!("prompt: {}", self.template(t, None));
                self.line(3, text);
            }
            if let Some(t) = sd.system {
                let text = format!("system: {}", self.template(t, None));
                self.line(3, text);
            }
            if let Some(model) = sd.model {
                let text = format!("model: {}", self.name(model));
                self.line(3, text);
            }
            if !sd.context_labels.is_empty() {
                let text = format!("context: {}", self.names(&sd.context_labels));
                self.line(3, text);
            }
            if !sd.permissions.is_empty() {
                let text = format!("permissions: {}", self.permissions(&sd.permissions));
                self.line(3, text);
            }
            if !sd.skills.is_empty() {
                let text = format!("skills: {}", self.names(&sd.skills));
                self.line(3, text);
            }
            if sd.retry != 0 || sd.backoff != Backoff::None {
                self.line(
                    3,
                    format!("retry: {}, backoff {}", sd.retry, backoff(sd.backoff)),
                );
            }
        }
    }

    fn choices(&mut self) {
        let m = self.m;
        if m.choices.is_empty() {
            return;
        }
        self.line(1, "choices:");
        for (c, ch) in m.choices.iter() {
            let head = format!("{c} {}", self.template(ch.criteria, None));
            self.line(2, head);
            for (i, o) in ch.options.iter().enumerate() {
                let text = format!("option {i}: {}", self.template(*o, None));
                self.line(3, text);
            }
        }
    }

    fn forks(&mut self) {
        let m = self.m;
        if m.forks.is_empty() {
            return;
        }
        self.line(1, "forks:");
        for (f, fk) in m.forks.iter() {
            self.line(
                2,
                format!(
                    "{f} {}, count {}, on-fail {}",
                    strategy(fk.strategy),
                    fk.count,
                    on_fail(fk.on_fail)
                ),
            );
            for (i, b) in fk.branches.iter().enumerate() {
                let mut text = format!("branch {i}: {}", self.func(*b));
                match fk.names.get(i) {
                    Some(Some(n)) => text.push_str(&format!(", assigns {}", self.name(*n))),
                    Some(None) => {}
                    None => text.push_str(", <no name entry>"),
                }
                self.line(3, text);
            }
            if fk.names.len() > fk.branches.len() {
                let extra = fk.names.len() - fk.branches.len();
                self.line(3, format!("<{extra} name entries without a branch>"));
            }
        }
    }

    fn inputs(&mut self) {
        let m = self.m;
        if m.inputs.is_empty() {
            return;
        }
        self.line(1, "inputs:");
        for (i, inp) in m.inputs.iter() {
            let mut text = format!(
                "{} {}",
                self.input(i),
                if inp.parameter {
                    "parameter"
                } else {
                    "mid-program"
                }
            );
            if let Some(d) = inp.description {
                text.push_str(&format!(" {}", self.template(d, None)));
            }
            self.line(2, text);
        }
    }

    fn function(&mut self, f: FuncId, func: &Function, lines: &[&str]) {
        self.line(
            1,
            format!(
                "function {f} {} ({}, params {}, registers {})",
                self.name(func.name),
                func_kind(func.kind),
                func.params,
                func.nregs
            ),
        );
        if !func.vars.is_empty() {
            let names: Vec<String> = func
                .vars
                .iter()
                .map(|(r, n)| format!("{}={r}", self.name(*n)))
                .collect();
            self.line(2, format!("vars: {}", names.join(", ")));
        }
        if func.locs.len() != func.code.len() {
            self.line(
                2,
                format!(
                    "<{} instructions but {} source positions>",
                    func.code.len(),
                    func.locs.len()
                ),
            );
        }
        let width = func.code.len().saturating_sub(1).to_string().len().max(4);
        let mut last_line = None;
        for (pc, op) in func.code.iter().enumerate() {
            let mut text = format!("    {pc:>width$}  {}", self.op(op));
            let comment = match func.locs.get(pc) {
                None => "; <no source position>".to_string(),
                Some(loc) if loc.line == 0 => String::new(),
                Some(loc) => {
                    let mut c = format!("; line {}", loc.line);
                    if last_line != Some(loc.line) {
                        last_line = Some(loc.line);
                        let src = (loc.line as usize)
                            .checked_sub(1)
                            .and_then(|i| lines.get(i))
                            .map(|l| l.trim())
                            .unwrap_or("");
                        if !src.is_empty() {
                            c.push_str(": ");
                            c.extend(src.chars().map(|ch| if ch.is_control() { ' ' } else { ch }));
                        }
                    }
                    c
                }
            };
            if !comment.is_empty() {
                let len = text.chars().count();
                let pad = COMMENT_COLUMN.saturating_sub(len).max(2);
                text.extend(std::iter::repeat_n(' ', pad));
                text.push_str(&comment);
            }
            self.out.push_str(&text);
            self.out.push('\n');
        }
    }

    /// One instruction, operands resolved.
    fn op(&self, op: &Op) -> String {
        let m = self.m;
        let lim = Some(INLINE_TEXT);
        let name = op.name();
        let operands = match op {
            Op::LoadConst { dst, c } => format!("{dst}, {}", self.constant(*c)),
            Op::Move { dst, src } | Op::Not { dst, src } | Op::Neg { dst, src } => {
                format!("{dst}, {src}")
            }
            Op::GetUp { dst, depth, reg } => format!("{dst}, {}", up(*depth, *reg)),
            Op::SetUp { depth, reg, src } => format!("{}, {src}", up(*depth, *reg)),
            Op::Format { dst, tpl } => format!("{dst}, {}", self.template(*tpl, lim)),
            Op::MakeList { dst, first, len } => format!("{dst}, {}", reg_list(*first, *len as u64)),
            Op::MakeRecord { dst, first, keys } => match m.keysets.get(*keys) {
                None => format!("{dst}, {} from {first}", bad(*keys)),
                Some(ks) => {
                    let base = first.as_u32() as u64;
                    let fields = ks
                        .iter()
                        .enumerate()
                        .map(|(i, k)| format!("{}: {}", self.name(*k), reg_n(base + i as u64)));
                    let fields = capped(fields, ks.len());
                    format!("{dst}, {keys} {{{}}}", &fields[1..fields.len() - 1])
                }
            },
            Op::Binary { op, dst, a, b } => format!("{dst}, {a} {} {b}", binop(*op)),
            Op::GetField { dst, src, name } => format!("{dst}, {src}, {}", self.string(*name, lim)),
            Op::GetIndex { dst, src, index } => format!("{dst}, {src}, {index}"),
            Op::Convert { dst, src, shape: s } => format!("{dst}, {src}, {}", shape(*s)),
            Op::Jump { target } => target.to_string(),
            Op::JumpIf { cond, target } | Op::JumpIfNot { cond, target } => {
                format!("{cond}, {target}")
            }
            Op::Switch { index, table } => match m.tables.get(*table) {
                None => format!("{index}, {}", bad(*table)),
                Some(ts) => {
                    let targets = capped(ts.iter().map(|t| t.to_string()), ts.len());
                    format!("{index}, {table} {targets}")
                }
            },
            Op::ForNext {
                list,
                counter,
                item,
                index,
                exit,
            } => {
                let mut s = format!("item={item}");
                if let Some(i) = index {
                    s.push_str(&format!(" index={i}"));
                }
                s.push_str(&format!(" list={list} counter={counter} exit={exit}"));
                s
            }
            Op::RepeatNext {
                count,
                counter,
                index,
                exit,
            } => {
                let mut s = format!("count={count} counter={counter}");
                if let Some(i) = index {
                    s.push_str(&format!(" index={i}"));
                }
                s.push_str(&format!(" exit={exit}"));
                s
            }
            Op::LoopNext {
                counter,
                max,
                index,
                exit,
            } => {
                let mut s = format!("counter={counter}");
                if let Some(mx) = max {
                    s.push_str(&format!(" max={mx}"));
                }
                if let Some(i) = index {
                    s.push_str(&format!(" index={i}"));
                }
                s.push_str(&format!(" exit={exit}"));
                s
            }
            Op::TryEnter {
                catch,
                finally,
                err,
                pending,
            } => {
                let target =
                    |t: &Option<Pc>| t.map_or_else(|| "none".to_string(), |t| t.to_string());
                format!(
                    "catch={} finally={} err={err} pending={pending}",
                    target(catch),
                    target(finally)
                )
            }
            Op::TryExit => String::new(),
            Op::EndFinally { pending } => pending.to_string(),
            Op::Throw { msg } => msg.to_string(),
            Op::Rethrow { err } => err.to_string(),
            Op::Assert { cond, msg } => match msg {
                Some(m) => format!("{cond} msg={m}"),
                None => cond.to_string(),
            },
            Op::Call {
                func,
                args,
                argc,
                dst,
            } => {
                format!(
                    "{dst}, {} args={} outputs={}",
                    self.func(*func),
                    reg_list(*args, *argc as u64),
                    reg_n(dst.as_u32() as u64 + 1)
                )
            }
            Op::Return { src } => src.to_string(),
            Op::SetBlockOutput { name, src } => format!("{}, {src}", self.name(*name)),
            Op::Invoke { prog, args, dst } => self.invoke(*prog, *args, *dst),
            Op::LoadInput { dst, input } => format!("{dst}, {}", self.input(*input)),
            Op::SetOutput { output, src } => format!("{}, {src}", self.output(*output)),
            Op::Session { dst, desc, ctx } => {
                let what = match m.sessions.get(*desc) {
                    None => bad(*desc),
                    Some(sd) => {
                        let mut s = desc.to_string();
                        if let Some(a) = sd.agent {
                            s.push_str(&format!(" {}", self.agent(a)));
                        }
                        if let Some(t) = sd.prompt {
                            s.push_str(&format!(" {}", self.template_text(t, lim)));
                        } else if let Some(l) = sd.label {
                            s.push_str(&format!(" {}", self.string(l, lim)));
                        }
                        s
                    }
                };
                format!("{dst}, {what} ctx={ctx}")
            }
            Op::Evaluate { dst, cond } => format!("{dst}, {}", self.template(*cond, lim)),
            Op::Choose { dst, choice } => match m.choices.get(*choice) {
                None => format!("{dst}, {}", bad(*choice)),
                Some(ch) => format!(
                    "{dst}, {choice} {} ({} options)",
                    self.template_text(ch.criteria, lim),
                    ch.options.len()
                ),
            },
            Op::Ask { dst, input } => {
                let mut s = format!("{dst}, {}", self.input(*input));
                if let Some(d) = m.inputs.get(*input).and_then(|i| i.description) {
                    s.push_str(&format!(" {}", self.template_text(d, lim)));
                }
                s
            }
            Op::Fork { fork, handle } => match m.forks.get(*fork) {
                None => format!("{handle}, {}", bad(*fork)),
                Some(fk) => {
                    let bs = capped(fk.branches.iter().map(|b| b.to_string()), fk.branches.len());
                    format!("{handle}, {fork} {} {bs}", strategy(fk.strategy))
                }
            },
            Op::ForkEach { fork, list, handle } => match m.forks.get(*fork) {
                None => format!("{handle}, {} list={list}", bad(*fork)),
                Some(fk) => {
                    let bs = capped(fk.branches.iter().map(|b| b.to_string()), fk.branches.len());
                    format!(
                        "{handle}, {fork} {} {bs} list={list}",
                        strategy(fk.strategy)
                    )
                }
            },
            Op::Join { handle, dst } => format!("{dst}, {handle}"),
        };
        if operands.is_empty() {
            name.to_string()
        } else {
            format!("{name} {operands}")
        }
    }

    /// `invoke dst, progN alias args=[name=r1, ...]`, naming the callee's parameters.
    fn invoke(&self, prog: ProgId, args: Reg, dst: Reg) -> String {
        let Some(p) = self.m.programs.get(prog) else {
            return format!("{dst}, {} args={args}", bad(prog));
        };
        let head = format!("{dst}, {prog} {}", self.name(p.alias));
        let Some(callee) = self.artifact.modules.get(p.module as usize) else {
            return format!("{head} <bad module {}> args={args}", p.module);
        };
        let base = args.as_u32() as u64;
        let names = self
            .params
            .get(p.module as usize)
            .map_or(&[][..], |v| &v[..]);
        let params = names.iter().enumerate().map(|(k, name)| {
            let n = match callee.strings.get(*name) {
                Some(n) => word(n),
                None => bad(*name),
            };
            format!("{n}={}", reg_n(base + k as u64))
        });
        format!("{head} args={}", capped(params, names.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interns strings for a hand-built module.
    struct B {
        m: Module,
    }

    impl B {
        fn new(name: &str, source: &str) -> B {
            B {
                m: Module {
                    name: name.into(),
                    import_path: String::new(),
                    source: source.into(),
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
                },
            }
        }

        fn s(&mut self, text: &str) -> StrId {
            match self.m.strings.iter().find(|(_, t)| *t == text) {
                Some((id, _)) => id,
                None => self.m.strings.push(text.into()),
            }
        }

        fn text(&mut self, text: &str) -> TplPart {
            TplPart::Text(self.s(text))
        }

        fn var(&mut self, name: &str, depth: u8, reg: u32) -> TplPart {
            TplPart::Var {
                depth,
                reg: Reg::from_u32(reg),
                path: Vec::new(),
                name: self.s(name),
            }
        }

        fn tpl(&mut self, parts: Vec<TplPart>) -> TplId {
            self.m.templates.push(Template { parts })
        }
    }

    fn r(n: u32) -> Reg {
        Reg::from_u32(n)
    }

    fn loc(line: u32) -> Loc {
        Loc { line, col: 1 }
    }

    fn header() -> Header {
        let mut source_hash = [0u8; 32];
        for (i, b) in source_hash.iter_mut().enumerate() {
            *b = i as u8 * 8;
        }
        Header {
            compiler_version: "0.1.0".into(),
            source_hash,
        }
    }

    /// A program using most of the tables:
    ///
    /// ```text
    /// 1 input topic: "The topic"
    /// 2 agent researcher: ...
    /// 3 let notes = session: researcher
    /// 4 try:
    /// 5   parallel:
    /// 6     a = session "Research {topic}"
    /// 7 catch as err:
    /// 8   throw
    /// ```
    fn sample() -> Artifact {
        let mut b = B::new(
            "research",
            "input topic: \"The topic\"\nagent researcher:\nlet notes = session: researcher\n  try:\n    parallel:\n      a = session \"Research {topic}\"\ncatch as err:\n  throw\n",
        );
        let main_name = b.s("main");
        let branch_name = b.s("parallel@5.0");
        let topic = b.s("topic");
        let researcher = b.s("researcher");
        let sonnet = b.s("sonnet");
        let agent_prompt = b.s("You research {topic}.");
        let read = b.s("read");
        let bash = b.s("bash");
        let deny = b.s("deny");
        let notes = b.s("notes");
        let a = b.s("a");
        let hello = b.s("say \"hi\"\n");
        let pattern = {
            let t = b.text("docs/**");
            b.tpl(vec![t])
        };
        let desc = {
            let t = b.text("The topic");
            b.tpl(vec![t])
        };
        let prompt = {
            let t = b.text("Research ");
            let v = b.var("topic", 1, 0);
            let t2 = b.text(" {literally}");
            b.tpl(vec![t, v, t2])
        };
        let temperature = b.s("temperature");
        let web_search = b.s("web-search");
        let k_null = b.m.consts.push(Const::Null);
        let k_float = b.m.consts.push(Const::Float(0.5));
        let k_str = b.m.consts.push(Const::Str(hello));
        let k_int = b.m.consts.push(Const::Int(-3));
        let agent = b.m.agents.push(AgentTemplate {
            name: researcher,
            model: Some(sonnet),
            prompt: Some(agent_prompt),
            persist: Persist::Project,
            skills: vec![web_search],
            permissions: vec![
                Permission {
                    kind: read,
                    value: PermissionValue::Patterns(vec![pattern]),
                },
                Permission {
                    kind: bash,
                    value: PermissionValue::Word(deny),
                },
            ],
            extra: vec![(temperature, k_float)],
        });
        let s_notes = b.m.sessions.push(SessionDesc {
            kind: SessionKind::Resume,
            agent: Some(agent),
            label: Some(notes),
            prompt: None,
            system: None,
            model: Some(sonnet),
            context_labels: vec![],
            permissions: vec![],
            skills: vec![],
            retry: 2,
            backoff: Backoff::Exponential,
            line: 3,
        });
        let s_research = b.m.sessions.push(SessionDesc {
            kind: SessionKind::Fresh,
            agent: None,
            label: None,
            prompt: Some(prompt),
            system: None,
            model: None,
            context_labels: vec![notes],
            permissions: vec![],
            skills: vec![],
            retry: 0,
            backoff: Backoff::None,
            line: 6,
        });
        let input = b.m.inputs.push(InputDesc {
            name: topic,
            description: Some(desc),
            parameter: true,
        });
        let keys = b.m.keysets.push(vec![notes, a]);
        let main = b.m.funcs.push(Function {
            name: main_name,
            kind: FuncKind::Main,
            params: 0,
            nregs: 8,
            code: Vec::new(),
            locs: Vec::new(),
            vars: Vec::new(),
        });
        let branch = b.m.funcs.push(Function {
            name: branch_name,
            kind: FuncKind::Branch,
            params: 0,
            nregs: 3,
            vars: Vec::new(),
            code: vec![
                Op::MakeList {
                    dst: r(1),
                    first: r(0),
                    len: 0,
                },
                Op::Session {
                    dst: r(0),
                    desc: s_research,
                    ctx: r(1),
                },
                Op::Return { src: r(0) },
            ],
            locs: vec![loc(6), loc(6), loc(6)],
        });
        let fork = b.m.forks.push(ForkDesc {
            strategy: Strategy::All,
            count: 1,
            on_fail: OnFail::FailFast,
            branches: vec![branch],
            names: vec![Some(a)],
        });
        let code = vec![
            Op::LoadInput { dst: r(0), input },
            Op::LoadConst {
                dst: r(2),
                c: k_null,
            },
            Op::Session {
                dst: r(1),
                desc: s_notes,
                ctx: r(2),
            },
            Op::TryEnter {
                catch: Some(8),
                finally: None,
                err: r(3),
                pending: r(4),
            },
            Op::Fork { fork, handle: r(5) },
            Op::Join {
                handle: r(5),
                dst: r(6),
            },
            Op::TryExit,
            Op::Jump { target: 10 },
            Op::TryExit,
            Op::Rethrow { err: r(3) },
            Op::LoadConst {
                dst: r(6),
                c: k_str,
            },
            Op::LoadConst {
                dst: r(7),
                c: k_int,
            },
            Op::MakeRecord {
                dst: r(5),
                first: r(6),
                keys,
            },
            Op::Binary {
                op: BinOp::Ge,
                dst: r(2),
                a: r(6),
                b: r(7),
            },
            Op::JumpIfNot {
                cond: r(2),
                target: 3,
            },
            Op::Return { src: r(5) },
        ];
        let lines = [1, 3, 3, 4, 5, 5, 5, 5, 7, 8, 0, 0, 0, 0, 0, 0];
        b.m.funcs[main].locs = lines.iter().map(|&l| loc(l)).collect();
        b.m.funcs[main].code = code;
        b.m.entry = main;
        Artifact { modules: vec![b.m] }
    }

    #[test]
    fn listing_of_a_sample() {
        let a = sample();
        crate::verify::verify(&a).expect("the sample verifies");
        let text = disassemble(&header(), &a);
        let expected = r#"artifact
  format    1
  compiler  0.1.0
  source    sha256 0008101820283038404850586068707880889098a0a8b0b8c0c8d0d8e0e8f0f8
  modules   1

module 0 research (main program)
  entry f0 main
  agents:
    agent0 researcher
      model: sonnet
      prompt: "You research {topic}."
      persist: project
      skills: web-search
      permissions: read=["docs/**"], bash=deny
      extra: temperature=0.5
  sessions:
    sess0 resume, agent agent0 researcher, label "notes", line 3
      model: sonnet
      retry: 2, backoff exponential
    sess1 session, line 6
      prompt: t2 "Research {topic} \{literally\}"
      context: notes
  forks:
    fork0 all, count 1, on-fail fail-fast
      branch 0: f1 parallel@5.0, assigns a
  inputs:
    in0 topic parameter t1 "The topic"
  templates:
    t0 "docs/**"
    t1 "The topic"
    t2 "Research {topic} \{literally\}"  [topic=up1.r0]

  function f0 main (main, params 0, registers 8)
       0  load_input r0, in0 topic          ; line 1: input topic: "The topic"
       1  load_const r2, null               ; line 3: let notes = session: researcher
       2  session r1, sess0 agent0 researcher "notes" ctx=r2  ; line 3
       3  try_enter catch=8 finally=none err=r3 pending=r4  ; line 4: try:
       4  fork r5, fork0 all [f1]           ; line 5: parallel:
       5  join r6, r5                       ; line 5
       6  try_exit                          ; line 5
       7  jump 10                           ; line 5
       8  try_exit                          ; line 7: catch as err:
       9  rethrow r3                        ; line 8: throw
      10  load_const r6, "say \"hi\"\n"
      11  load_const r7, -3
      12  make_record r5, keys0 {notes: r6, a: r7}
      13  binary r2, r6 >= r7
      14  jump_if_not r2, 3
      15  return r5

  function f1 parallel@5.0 (branch, params 0, registers 3)
       0  make_list r1, []                  ; line 6: a = session "Research {topic}"
       1  session r0, sess1 "Research {topic} \{literally\}" ctx=r1  ; line 6
       2  return r0                         ; line 6
"#;
        assert_eq!(text, expected, "got:\n{text}");
    }

    #[test]
    fn invoke_names_parameters_and_long_lists_are_cut() {
        let mut a = sample();
        let mut helper = B::new("helper", "");
        for (name, parameter) in [("topic", true), ("question", false), ("depth", true)] {
            let name = helper.s(name);
            helper.m.inputs.push(InputDesc {
                name,
                description: None,
                parameter,
            });
        }
        let name = helper.s("main");
        helper.m.funcs.push(Function {
            name,
            kind: FuncKind::Main,
            params: 0,
            nregs: 1,
            code: vec![Op::Return { src: r(0) }],
            locs: vec![loc(1)],
            vars: Vec::new(),
        });
        helper.m.import_path = "@alice/helper".into();
        a.modules.push(helper.m);
        let m = &mut a.modules[0];
        let alias = m.strings.push("help".into());
        let prog = m.programs.push(ProgramRef { alias, module: 1 });
        let table = m.tables.push(vec![15; 20]);
        let many = m.keysets.push(vec![StrId::new(0); 10]);
        m.funcs[FuncId::new(0)].nregs = 16;
        m.funcs[FuncId::new(0)].code[0] = Op::Invoke {
            prog,
            args: r(3),
            dst: r(2),
        };
        m.funcs[FuncId::new(0)].code[1] = Op::Switch { index: r(1), table };
        m.funcs[FuncId::new(0)].code[10] = Op::MakeRecord {
            dst: r(0),
            first: r(0),
            keys: many,
        };
        m.funcs[FuncId::new(0)].code[11] = Op::MakeList {
            dst: r(0),
            first: r(1),
            len: 12,
        };
        crate::verify::verify(&a).expect("still verifies");
        let text = disassemble(&header(), &a);
        for needle in [
            "prog0 help -> module 1 helper",
            "module 1 helper (imported as \"@alice/helper\")",
            "invoke r2, prog0 help args=[topic=r3, depth=r4]",
            "switch r1, table0 [15, 15, 15, 15, 15, 15, 15, 15, ... (20 in all)]",
            "make_record r0, keys1 {main: r0, main: r1, main: r2, main: r3, main: r4, main: r5, main: r6, main: r7, ... (10 in all)}",
            "make_list r0, [r1 .. r12] (12 registers)",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
    }

    /// The example in the module documentation.
    #[test]
    fn hello() {
        let mut b = B::new(
            "hello",
            "input name: \"Who to greet\"\nsession \"Say hello to {name}\"\n",
        );
        let desc = {
            let t = b.text("Who to greet");
            b.tpl(vec![t])
        };
        let prompt = {
            let t = b.text("Say hello to ");
            let v = b.var("name", 0, 0);
            b.tpl(vec![t, v])
        };
        let name = b.s("name");
        let input = b.m.inputs.push(InputDesc {
            name,
            description: Some(desc),
            parameter: true,
        });
        let sess = b.m.sessions.push(SessionDesc {
            kind: SessionKind::Fresh,
            agent: None,
            label: None,
            prompt: Some(prompt),
            system: None,
            model: None,
            context_labels: vec![],
            permissions: vec![],
            skills: vec![],
            retry: 0,
            backoff: Backoff::None,
            line: 2,
        });
        let main = b.s("main");
        b.m.funcs.push(Function {
            name: main,
            kind: FuncKind::Main,
            params: 0,
            nregs: 3,
            vars: Vec::new(),
            code: vec![
                Op::LoadInput { dst: r(0), input },
                Op::MakeList {
                    dst: r(2),
                    first: r(0),
                    len: 0,
                },
                Op::Session {
                    dst: r(1),
                    desc: sess,
                    ctx: r(2),
                },
                Op::Return { src: r(1) },
            ],
            locs: vec![loc(1), loc(2), loc(2), loc(2)],
        });
        let a = Artifact { modules: vec![b.m] };
        crate::verify::verify(&a).expect("verifies");
        let h = Header {
            compiler_version: "0.1.0".into(),
            source_hash: [0xab; 32],
        };
        let expected = r#"artifact
  format    1
  compiler  0.1.0
  source    sha256 abababababababababababababababababababababababababababababababab
  modules   1

module 0 hello (main program)
  entry f0 main
  sessions:
    sess0 session, line 2
      prompt: t1 "Say hello to {name}"
  inputs:
    in0 name parameter t0 "Who to greet"
  templates:
    t0 "Who to greet"
    t1 "Say hello to {name}"  [name=r0]

  function f0 main (main, params 0, registers 3)
       0  load_input r0, in0 name           ; line 1: input name: "Who to greet"
       1  make_list r2, []                  ; line 2: session "Say hello to {name}"
       2  session r1, sess0 "Say hello to {name}" ctx=r2  ; line 2
       3  return r1                         ; line 2
"#;
        assert_eq!(disassemble(&h, &a), expected);
    }

    #[test]
    fn mutated_encodings_do_not_panic() {
        let config = bincode::config::standard().with_limit::<{ 1 << 20 }>();
        let bytes = bincode::serde::encode_to_vec(sample(), config).expect("encodes");
        let mut decoded = 0;
        for at in 0..bytes.len() {
            for value in [0u8, 1, 7, 0x7f, 0xfb, 0xff] {
                let mut b = bytes.clone();
                b[at] = value;
                if let Ok((a, _)) = bincode::serde::decode_from_slice::<Artifact, _>(&b, config) {
                    decoded += 1;
                    let _ = disassemble(&header(), &a);
                }
            }
        }
        assert!(
            decoded > bytes.len(),
            "too few mutations decode ({decoded})"
        );
    }

    #[test]
    fn deterministic() {
        let a = sample();
        assert_eq!(
            disassemble(&header(), &a),
            disassemble(&header(), &a.clone())
        );
    }

    #[test]
    fn bad_ids_are_shown_not_fatal() {
        let mut a = sample();
        let m = &mut a.modules[0];
        m.entry = FuncId::from_u32(40);
        m.programs.push(ProgramRef {
            alias: StrId::from_u32(999),
            module: 7,
        });
        m.funcs[FuncId::new(1)].locs.clear();
        m.funcs[FuncId::new(0)].code = vec![
            Op::LoadConst {
                dst: r(0),
                c: ConstId::from_u32(77),
            },
            Op::Format {
                dst: r(0),
                tpl: TplId::from_u32(12),
            },
            Op::Session {
                dst: r(1),
                desc: SessionId::from_u32(9),
                ctx: r(2),
            },
            Op::Call {
                func: FuncId::from_u32(5),
                args: r(u32::MAX - 2),
                argc: u32::MAX,
                dst: r(u32::MAX - 1),
            },
            Op::MakeList {
                dst: r(0),
                first: r(4),
                len: 3,
            },
            Op::Invoke {
                prog: ProgId::from_u32(0),
                args: r(0),
                dst: r(1),
            },
            Op::GetField {
                dst: r(0),
                src: r(0),
                name: StrId::from_u32(500),
            },
            Op::Switch {
                index: r(0),
                table: TableId::from_u32(3),
            },
        ];
        let text = disassemble(&header(), &a);
        for needle in [
            "entry <bad f40>",
            "prog0 <bad s999> -> <bad module 7>",
            "load_const r0, <bad k77>",
            "format r0, <bad t12>",
            "session r1, <bad sess9> ctx=r2",
            "call r4294967294, <bad f5> args=[r4294967293 .. <bad r8589934587>] (4294967295 registers) outputs=<bad r4294967295>",
            "make_list r0, [r4, r5, r6]",
            "invoke r1, prog0 <bad s999> <bad module 7> args=r0",
            "get_field r0, r0, <bad s500>",
            "switch r0, <bad table3>",
            "<8 instructions but 16 source positions>",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
        assert!(
            text.contains("<3 instructions but 0 source positions>"),
            "{text}"
        );
        assert!(text.contains("; <no source position>"), "{text}");
    }

    #[test]
    fn corrupt_tables_do_not_panic() {
        let mut a = sample();
        let m = &mut a.modules[0];
        let nowhere = StrId::from_u32(1 << 20);
        for t in m.templates.values_mut() {
            t.parts.push(TplPart::Text(nowhere));
            t.parts.push(TplPart::Var {
                depth: 9,
                reg: r(3),
                path: vec![PathStep::Field(nowhere), PathStep::Index(2)],
                name: nowhere,
            });
        }
        for ag in m.agents.values_mut() {
            ag.name = nowhere;
            ag.persist = Persist::Path(nowhere);
            ag.extra.push((nowhere, ConstId::from_u32(1000)));
        }
        for sd in m.sessions.values_mut() {
            sd.agent = Some(AgentId::from_u32(3));
            sd.prompt = Some(TplId::from_u32(30));
            sd.system = Some(TplId::new(2));
        }
        for fk in m.forks.values_mut() {
            fk.branches.push(FuncId::from_u32(66));
            fk.names.clear();
        }
        m.inputs.push(InputDesc {
            name: nowhere,
            description: Some(TplId::from_u32(31)),
            parameter: false,
        });
        m.outputs.push(OutputDesc { name: nowhere });
        m.choices.push(ChoiceDesc {
            criteria: TplId::from_u32(32),
            options: vec![TplId::new(0), TplId::from_u32(33)],
        });
        m.source = String::new();
        let code = vec![
            Op::Choose {
                dst: r(0),
                choice: ChoiceId::new(0),
            },
            Op::Choose {
                dst: r(0),
                choice: ChoiceId::new(1),
            },
            Op::Ask {
                dst: r(0),
                input: InputId::new(1),
            },
            Op::Ask {
                dst: r(0),
                input: InputId::new(9),
            },
            Op::SetOutput {
                output: OutputId::new(4),
                src: r(0),
            },
            Op::ForkEach {
                fork: ForkId::new(3),
                list: r(1),
                handle: r(2),
            },
            Op::MakeRecord {
                dst: r(0),
                first: r(u32::MAX - 1),
                keys: KeysId::new(0),
            },
            Op::MakeRecord {
                dst: r(0),
                first: r(0),
                keys: KeysId::new(5),
            },
        ];
        let n = code.len();
        let f = &mut m.funcs[FuncId::new(0)];
        f.code = code;
        f.locs = (0..n)
            .map(|i| loc(if i == 0 { u32::MAX } else { 1 }))
            .collect();
        let text = disassemble(&header(), &a);
        for needle in [
            "agent0 <bad s1048576>",
            "persist: path <bad s1048576>",
            "extra: temperature=0.5, <bad s1048576>=<bad k1000>",
            "sess0 resume, agent <bad agent3>",
            "prompt: <bad t30>",
            "{<bad s1048576>.<bad s1048576>[2]}",
            "[topic=up1.r0, <bad s1048576>=up9.r3]",
            "branch 1: <bad f66>, <no name entry>",
            "in1 <bad s1048576> mid-program <bad t31>",
            "out0 <bad s1048576>",
            "choice0 <bad t32>",
            "option 1: <bad t33>",
            "choose r0, <bad choice1>",
            "ask r0, <bad in9>",
            "set_output <bad out4>, r0",
            "fork_each r2, <bad fork3> list=r1",
            "make_record r0, keys0 {notes: r4294967294, a: <bad r4294967295>}",
            "make_record r0, <bad keys5> from r0",
            "; line 4294967295",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
    }

    #[test]
    fn empty_artifact_and_odd_headers() {
        let h = Header {
            compiler_version: "v 1\u{0}\"x\"".into(),
            source_hash: [0xff; 32],
        };
        let text = disassemble(&h, &Artifact { modules: vec![] });
        assert!(text.contains("compiler  \"v 1\\u{0}\\\"x\\\"\""), "{text}");
        assert!(text.contains(&"ff".repeat(32)), "{text}");
        assert!(text.ends_with("  modules   0\n"), "{text}");
    }

    #[test]
    fn long_texts_are_cut_inline_but_whole_in_tables() {
        let mut a = sample();
        let m = &mut a.modules[0];
        let long = "x".repeat(100);
        let s = m.strings.push(long.clone());
        let t = m.templates.push(Template {
            parts: vec![TplPart::Text(s)],
        });
        m.funcs[FuncId::new(0)].code[0] = Op::Evaluate { dst: r(0), cond: t };
        let text = disassemble(&header(), &a);
        assert!(text.contains(&format!("t3 \"{long}\"\n")), "{text}");
        assert!(
            text.contains(&format!(
                "evaluate r0, t3 \"{}...\"",
                "x".repeat(INLINE_TEXT)
            )),
            "{text}"
        );
    }
}
