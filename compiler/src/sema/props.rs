//! Checks of property blocks (agents, sessions) and of construct modifiers.

use super::Analyzer;
use crate::ast::*;
use crate::diagnostics::{Code, Diagnostic};
use crate::span::Span;
use rustc_hash::FxHashMap as HashMap;

/// `permissions` of an agent definition (bound late).
const AGENT: bool = true;
/// `permissions` of a session (bound where it stands).
const SESSION: bool = false;

const MODELS: [&str; 3] = ["sonnet", "opus", "haiku"];
const AGENT_PROPS: [&str; 9] = [
    "model",
    "prompt",
    "persist",
    "skills",
    "permissions",
    "context",
    "retry",
    "backoff",
    "description",
];
const SESSION_PROPS: [&str; 8] = [
    "prompt",
    "model",
    "context",
    "retry",
    "backoff",
    "permissions",
    "skills",
    "description",
];

/// Reports duplicate keys and returns the first occurrence of each.
fn unique_props<'p>(a: &mut Analyzer, props: &'p [Property]) -> HashMap<&'p str, &'p Property> {
    let mut seen: HashMap<&str, &Property> = HashMap::default();
    for p in props {
        if let Some(first) = seen.get(p.key.text.as_str()) {
            let first = first.key.span;
            a.report(
                Diagnostic::new(
                    Code::E009,
                    a.file,
                    p.key.span,
                    format!("property `{}` is given twice", p.key.text),
                )
                .with_secondary(first, "first given here"),
            );
        } else {
            seen.insert(&p.key.text, p);
        }
    }
    seen
}

fn expr_of(p: &Property) -> Option<&Expr> {
    match &p.value {
        PropValue::Expr(e) => Some(e),
        PropValue::Block(_) => None,
    }
}

fn word_of(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Name(n) => Some(n.text.clone()),
        ExprKind::Str(s) => s.as_plain(),
        _ => None,
    }
}

/// Checks an `agent` definition.
pub(super) fn agent(a: &mut Analyzer, def: &AgentDef) {
    let props = unique_props(a, &def.props);
    for p in &def.props {
        let key = p.key.text.as_str();
        if !AGENT_PROPS.contains(&key) {
            a.diag(
                Code::W005,
                p.key.span,
                format!("unknown agent property `{key}`"),
            )
            .help = Some(format!(
                "known properties: {}; unknown ones are kept and passed to the driver",
                AGENT_PROPS.join(", ")
            ));
        }
    }
    if let Some(p) = props.get("model") {
        model(a, p);
    }
    if let Some(p) = props.get("prompt") {
        match expr_of(p) {
            Some(Expr {
                kind: ExprKind::Str(s),
                ..
            }) => {
                if s.raw_text().trim().is_empty() {
                    a.diag(Code::W004, p.span, "agent prompt is empty").help =
                        Some("describe the agent's role, or remove the property".into());
                }
                a.late_strlit(s);
            }
            _ => {
                a.diag(Code::E144, p.span, "`prompt` must be a string");
            }
        }
    }
    if let Some(p) = props.get("persist") {
        let ok = match expr_of(p).map(|e| &e.kind) {
            Some(ExprKind::Bool(_)) => true,
            Some(ExprKind::Name(n)) => n.text == "project" || n.text == "user",
            Some(ExprKind::Str(s)) => !s.raw_text().trim().is_empty(),
            _ => false,
        };
        if !ok {
            a.diag(Code::E103, p.span, "invalid `persist` value").help =
                Some("use `true` (this run), `project`, `user`, or a path string".into());
        }
    }
    if let Some(p) = props.get("skills") {
        skills(a, p);
    }
    if let Some(p) = props.get("permissions") {
        permissions(a, p, AGENT);
    }
    for key in ["retry", "backoff"] {
        if let Some(p) = props.get(key) {
            a.diag(
                Code::W102,
                p.key.span,
                format!("`{key}` on an agent definition has no effect"),
            )
            .help = Some("put retry and backoff on the sessions that should retry".into());
        }
    }
    if let Some(p) = props.get("context") {
        context(a, p);
    }
}

fn model(a: &mut Analyzer, p: &Property) {
    match expr_of(p).map(|e| &e.kind) {
        Some(ExprKind::Name(n)) if MODELS.contains(&n.text.as_str()) => {}
        Some(ExprKind::Str(s)) if s.as_plain().is_some_and(|m| !m.trim().is_empty()) => {
            let m = s.raw_text();
            if !MODELS.contains(&m.as_str()) {
                a.diag(
                    Code::W118,
                    p.span,
                    format!("model {m:?} is provider-specific"),
                )
                .help = Some(
                    "only sonnet, opus and haiku are portable; the driver must know this id".into(),
                );
            }
        }
        _ => {
            a.diag(Code::E008, p.span, "invalid model").help =
                Some("use sonnet, opus or haiku (or a quoted provider model id)".into());
        }
    }
}

fn skills(a: &mut Analyzer, p: &Property) {
    let Some(Expr {
        kind: ExprKind::Array(items),
        ..
    }) = expr_of(p)
    else {
        a.diag(
            Code::E013,
            p.span,
            "`skills` must be an array of skill names",
        )
        .help = Some("write `skills: [\"name\"]`".into());
        return;
    };
    if items.is_empty() {
        a.diag(Code::W010, p.span, "`skills` is empty");
    }
    for item in items {
        match &item.kind {
            ExprKind::Str(s) => {
                let name = s.raw_text();
                if !a.skills.contains(&name) {
                    a.diag(
                        Code::W007,
                        item.span,
                        format!("skill {name:?} is not imported"),
                    )
                    .help = Some(format!(
                        "import it: `import \"{name}\" from \"github:...\"`"
                    ));
                }
            }
            _ => {
                a.diag(Code::E014, item.span, "skill names must be strings");
            }
        }
    }
}

/// Checks a `permissions:` block. An agent's (`late`) resolves names and interpolations when
/// a session uses the agent, so they may name any variable of the program.
fn permissions(a: &mut Analyzer, p: &Property, late: bool) {
    let PropValue::Block(entries) = &p.value else {
        a.diag(
            Code::E015,
            p.span,
            "`permissions` must be an indented block",
        )
        .help = Some(
            "write `permissions:` then lines such as `read: [\"*.md\"]` and `bash: deny`".into(),
        );
        return;
    };
    unique_props(a, entries);
    for e in entries {
        let key = e.key.text.as_str();
        let value = match &e.value {
            PropValue::Expr(v) => v,
            PropValue::Block(_) => {
                a.diag(
                    Code::W009,
                    e.span,
                    format!("unknown value for permission `{key}`"),
                );
                continue;
            }
        };
        match key {
            "read" | "write" | "execute" | "network" | "bash" => {}
            _ => {
                a.diag(
                    Code::W008,
                    e.key.span,
                    format!("unknown permission type `{key}`"),
                )
                .help = Some("known types: read, write, execute, bash, network".into());
            }
        }
        match &value.kind {
            ExprKind::Array(items) => {
                if key == "bash" {
                    a.diag(Code::W009, value.span, "`bash` takes allow, deny or prompt");
                }
                for item in items {
                    match &item.kind {
                        ExprKind::Str(s) if late => a.late_strlit(s),
                        ExprKind::Str(s) => a.strlit(s),
                        ExprKind::Name(n) if !late && a.lookup(&n.text).is_some() => {}
                        ExprKind::Name(n) if late && a.declared_anywhere(&n.text) => {}
                        _ => {
                            a.diag(Code::E016, item.span, "permission patterns must be strings");
                        }
                    }
                }
            }
            _ => match word_of(value) {
                Some(w) if matches!(w.as_str(), "allow" | "deny" | "prompt") => {}
                // `read`, `write` and `execute` also take one pattern string.
                Some(_)
                    if matches!(key, "read" | "write" | "execute")
                        && matches!(value.kind, ExprKind::Str(_)) => {}
                _ => {
                    a.diag(
                        Code::W009,
                        value.span,
                        format!("unknown value for permission `{key}`"),
                    )
                    .help = Some("use allow, deny, prompt, or a list of patterns".into());
                }
            },
        }
    }
}

/// Checks a `context:` value: variable references, member paths, lists and objects of them,
/// a string note, or a block of `file:` entries.
fn context(a: &mut Analyzer, p: &Property) {
    match &p.value {
        PropValue::Block(entries) => {
            for e in entries {
                if let PropValue::Expr(v) = &e.value {
                    a.expr(v);
                }
            }
        }
        PropValue::Expr(e) => context_value(a, e, true),
    }
}

fn context_value(a: &mut Analyzer, e: &Expr, top: bool) {
    match &e.kind {
        ExprKind::Name(n) if a.agents.contains_key(&n.text) && a.lookup(&n.text).is_none() => {}
        ExprKind::Name(_) | ExprKind::Member(..) | ExprKind::Index(..) | ExprKind::Str(_) => {
            a.expr(e)
        }
        ExprKind::Array(items) if top => {
            for i in items {
                context_value(a, i, false);
            }
        }
        ExprKind::Object(entries) if top => {
            for en in entries {
                a.expr(&en.value);
            }
        }
        _ => {
            a.diag(
                Code::E107,
                e.span,
                "context entries must be variable references",
            )
            .help = Some("bind the value first (`let x = ...`) and pass `context: x`".into());
            a.expr(e);
        }
    }
}

/// Checks a session or `resume:` with its properties.
pub(super) fn session(a: &mut Analyzer, s: &SessionExpr, span: Span) {
    let props = unique_props(a, &s.props);
    for p in &s.props {
        let key = p.key.text.as_str();
        if !SESSION_PROPS.contains(&key) {
            a.diag(
                Code::W005,
                p.key.span,
                format!("unknown session property `{key}`"),
            )
            .help = Some(format!(
                "known properties: {}; unknown ones are kept and passed to the driver",
                SESSION_PROPS.join(", ")
            ));
        }
    }
    if let Some(agent) = &s.agent {
        match a.agents.get(&agent.text) {
            None => {
                let mut d = Diagnostic::new(
                    Code::E007,
                    a.file,
                    agent.span,
                    format!("undefined agent `{}`", agent.text),
                );
                if a.lookup(&agent.text).is_some() {
                    d = d.with_help(format!(
                        "`{}` is a variable; pass it with `context: {}`",
                        agent.text, agent.text
                    ));
                } else {
                    d = d.with_help(format!(
                        "define it: `agent {}:` with a `model:` and a `prompt:`",
                        agent.text
                    ));
                }
                a.report(d);
            }
            Some(info) if s.kind == SessionKind::Resume && !info.persistent => {
                let prev = info.span;
                a.report(
                    Diagnostic::new(
                        Code::E017,
                        a.file,
                        agent.span,
                        format!(
                            "`resume:` needs a persistent agent, and `{}` has no `persist:`",
                            agent.text
                        ),
                    )
                    .with_secondary(prev, "agent defined here")
                    .with_help("add `persist: true` to the agent, or use `session:`"),
                );
            }
            Some(_) => {}
        }
    }
    let prompt_prop = props.get("prompt").copied();
    if let Some(text) = &s.text {
        a.strlit(text);
        if prompt_prop.is_none() {
            prompt_text(a, text);
        }
    }
    if let Some(p) = prompt_prop {
        match expr_of(p) {
            Some(Expr {
                kind: ExprKind::Str(t),
                ..
            }) => {
                a.strlit(t);
                prompt_text(a, t);
            }
            Some(e) => a.expr(e),
            None => {
                a.diag(Code::E144, p.span, "`prompt` must be a string or a value");
            }
        }
    }
    if s.text.is_none() && s.agent.is_none() && prompt_prop.is_none() {
        a.diag(
            Code::E003,
            Span::new(span.start as usize, span.start as usize + 7),
            "session has neither a prompt nor an agent",
        )
        .help =
            Some("write `session \"task\"`, `session: agent`, or add a `prompt:` property".into());
    }
    if let Some(p) = props.get("model") {
        model(a, p);
    }
    if let Some(p) = props.get("context") {
        context(a, p);
    }
    if let Some(p) = props.get("retry") {
        match expr_of(p).map(|e| &e.kind) {
            Some(ExprKind::Int(n)) if *n < 1 => {
                a.diag(
                    Code::E125,
                    p.span,
                    format!("retry count must be positive, not {n}"),
                );
            }
            Some(ExprKind::Int(n)) if *n > 10 => {
                a.diag(
                    Code::W113,
                    p.span,
                    format!("retry count {n} is unusually high"),
                );
            }
            Some(ExprKind::Int(_)) => {}
            Some(ExprKind::Unary(UnOp::Neg, _)) => {
                a.diag(Code::E125, p.span, "retry count must be positive");
            }
            _ => {
                a.diag(Code::E126, p.span, "retry count must be an integer");
            }
        }
    }
    if let Some(p) = props.get("backoff") {
        let ok = expr_of(p)
            .and_then(word_of)
            .is_some_and(|w| matches!(w.as_str(), "none" | "linear" | "exponential"));
        if !ok {
            a.diag(Code::E127, p.span, "invalid backoff strategy").help =
                Some("use none, linear or exponential".into());
        }
    }
    if let Some(p) = props.get("permissions") {
        permissions(a, p, SESSION);
    }
    if let Some(p) = props.get("skills") {
        skills(a, p);
    }
}

fn prompt_text(a: &mut Analyzer, s: &StrLit) {
    let text = s.raw_text();
    if text.is_empty() {
        a.diag(Code::W001, s.span, "session prompt is empty");
    } else if text.trim().is_empty() {
        a.diag(
            Code::W002,
            s.span,
            "session prompt contains only whitespace",
        );
    } else if text.chars().count() > 10_000 {
        a.diag(
            Code::W003,
            s.span,
            "session prompt is longer than 10,000 characters",
        )
        .help = Some("consider breaking the task into smaller sessions".into());
    }
}

/// Checks `parallel (...)` modifiers; `branches` is the branch count when known statically.
pub(super) fn parallel_mods(a: &mut Analyzer, mods: &[Arg], branches: Option<usize>) {
    let mut strategy: Option<(String, Span)> = None;
    let mut count: Option<(i64, Span)> = None;
    for m in mods {
        match &m.name {
            None => match word_of(&m.value) {
                Some(w) if matches!(w.as_str(), "all" | "first" | "any") => {
                    strategy = Some((w, m.value.span))
                }
                _ => {
                    a.diag(Code::E112, m.value.span, "invalid join strategy")
                        .help = Some("use \"all\", \"first\" or \"any\"".into());
                }
            },
            Some(n) if n.text == "on-fail" => match word_of(&m.value) {
                Some(w) if matches!(w.as_str(), "fail-fast" | "continue" | "ignore") => {}
                _ => {
                    a.diag(Code::E113, m.value.span, "invalid on-fail policy")
                        .help = Some("use \"fail-fast\", \"continue\" or \"ignore\"".into());
                }
            },
            Some(n) if n.text == "count" => match &m.value.kind {
                ExprKind::Int(c) if *c >= 1 => count = Some((*c, m.value.span)),
                ExprKind::Int(_) | ExprKind::Unary(UnOp::Neg, _) => {
                    a.diag(Code::E115, m.value.span, "count must be at least 1");
                }
                _ => {
                    a.diag(
                        Code::E115,
                        m.value.span,
                        "count must be an integer of at least 1",
                    );
                }
            },
            Some(n) => {
                a.diag(Code::E116, n.span, format!("unknown parallel modifier `{}`", n.text))
                    .help = Some("modifiers: a strategy (\"all\", \"first\", \"any\"), count: N, on-fail: \"...\"".into());
            }
        }
    }
    if let Some((c, cspan)) = count {
        if strategy.as_ref().map(|s| s.0.as_str()) != Some("any") {
            a.diag(
                Code::E114,
                cspan,
                "`count` is only valid with the \"any\" strategy",
            );
        } else if let Some(b) = branches {
            if c as usize > b {
                a.diag(
                    Code::W105,
                    cspan,
                    format!("count {c} exceeds the {b} branch(es)"),
                )
                .help = Some("the block can never collect that many results".into());
            }
        }
    }
}

/// Checks `loop (max: n)` modifiers; returns whether a max was given.
pub(super) fn loop_mods(a: &mut Analyzer, mods: &[Arg]) -> bool {
    let mut has_max = false;
    for m in mods {
        match &m.name {
            Some(n) if n.text == "max" => {
                has_max = true;
                match &m.value.kind {
                    ExprKind::Int(v) if *v >= 1 => {}
                    ExprKind::Int(v) => {
                        a.diag(
                            Code::E119,
                            m.value.span,
                            format!("max iterations must be positive, not {v}"),
                        );
                    }
                    ExprKind::Unary(UnOp::Neg, _) => {
                        a.diag(Code::E119, m.value.span, "max iterations must be positive");
                    }
                    ExprKind::Name(_) | ExprKind::Member(..) => a.expr(&m.value),
                    _ => {
                        a.diag(
                            Code::E120,
                            m.value.span,
                            "max iterations must be an integer",
                        );
                    }
                }
            }
            Some(n) => {
                a.diag(
                    Code::E116,
                    n.span,
                    format!("unknown loop modifier `{}`", n.text),
                )
                .help = Some("loops take `(max: N)`".into());
            }
            None => {
                a.diag(Code::E116, m.value.span, "loop modifiers must be named")
                    .help = Some("write `(max: N)`".into());
            }
        }
    }
    has_max
}
