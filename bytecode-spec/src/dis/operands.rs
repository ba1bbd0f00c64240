//! Operands: registers, lists of them, enum words, and table entries shown by what
//! identifies them.

use super::text::{bad, escape_into, lookup, quoted, word};
use super::{Dis, INLINE_TEXT, MAX_LISTED};
use crate::ids::*;
use crate::module::*;
use crate::op::*;

/// A register by number (registers computed from a base and a count may exceed `u32`).
pub(super) fn reg_n(n: u64) -> String {
    if n >= u32::MAX as u64 {
        format!("<bad r{n}>")
    } else {
        format!("r{n}")
    }
}

/// `[a, b, c]`, showing at most [`MAX_LISTED`] of the `total` items.
pub(super) fn capped(items: impl Iterator<Item = String>, total: usize) -> String {
    let mut shown: Vec<String> = items.take(MAX_LISTED).collect();
    if total > shown.len() {
        shown.push(format!("... ({total} in all)"));
    }
    format!("[{}]", shown.join(", "))
}

/// `count` consecutive registers from `first`.
pub(super) fn reg_list(first: Reg, count: u64) -> String {
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

pub(super) fn up(depth: u8, reg: Reg) -> String {
    if depth == 0 {
        reg.to_string()
    } else {
        format!("up{depth}.{reg}")
    }
}

pub(super) fn binop(op: BinOp) -> &'static str {
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

pub(super) fn shape(s: Shape) -> &'static str {
    match s {
        Shape::List => "list",
        Shape::Record => "record",
        Shape::Int => "int",
        Shape::Bool => "bool",
    }
}

pub(super) fn func_kind(k: FuncKind) -> &'static str {
    match k {
        FuncKind::Main => "main",
        FuncKind::Block => "block",
        FuncKind::Branch => "branch",
    }
}

pub(super) fn strategy(s: Strategy) -> &'static str {
    match s {
        Strategy::All => "all",
        Strategy::First => "first",
        Strategy::Any => "any",
    }
}

pub(super) fn on_fail(o: OnFail) -> &'static str {
    match o {
        OnFail::FailFast => "fail-fast",
        OnFail::Continue => "continue",
        OnFail::Ignore => "ignore",
    }
}

pub(super) fn backoff(b: Backoff) -> &'static str {
    match b {
        Backoff::None => "none",
        Backoff::Linear => "linear",
        Backoff::Exponential => "exponential",
    }
}

impl Dis<'_> {
    /// A string as a bare word or quoted (names).
    pub(super) fn name(&self, s: StrId) -> String {
        match self.m.strings.get(s) {
            Some(t) => word(t),
            None => bad(s),
        }
    }

    /// A string, quoted.
    pub(super) fn string(&self, s: StrId, limit: Option<usize>) -> String {
        match self.m.strings.get(s) {
            Some(t) => quoted(t, false, limit),
            None => bad(s),
        }
    }

    pub(super) fn names(&self, ss: &[StrId]) -> String {
        ss.iter()
            .map(|s| self.name(*s))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A template's text, quoted, with `{name}` for its variables.
    pub(super) fn template_text(&self, t: TplId, limit: Option<usize>) -> String {
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
    pub(super) fn var_name(&self, s: StrId) -> String {
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
    pub(super) fn template(&self, t: TplId, limit: Option<usize>) -> String {
        if self.m.templates.get(t).is_none() {
            return bad(t);
        }
        format!("{t} {}", self.template_text(t, limit))
    }

    /// Where a template's variables come from: `[name=r0, other=up1.r3]`.
    pub(super) fn bindings(&self, tpl: &Template) -> String {
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

    pub(super) fn constant(&self, c: ConstId) -> String {
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
    pub(super) fn func(&self, f: FuncId) -> String {
        match self.m.funcs.get(f) {
            Some(func) => format!("{f} {}", self.name(func.name)),
            None => bad(f),
        }
    }

    pub(super) fn agent(&self, a: AgentId) -> String {
        match self.m.agents.get(a) {
            Some(ag) => format!("{a} {}", self.name(ag.name)),
            None => bad(a),
        }
    }

    pub(super) fn input(&self, i: InputId) -> String {
        match self.m.inputs.get(i) {
            Some(inp) => format!("{i} {}", self.name(inp.name)),
            None => bad(i),
        }
    }

    pub(super) fn output(&self, o: OutputId) -> String {
        match self.m.outputs.get(o) {
            Some(out) => format!("{o} {}", self.name(out.name)),
            None => bad(o),
        }
    }

    pub(super) fn permissions(&self, ps: &[Permission]) -> String {
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
}
