//! Property blocks of agents and sessions: their checks, and the resolved agent table entry
//! and session descriptor.

use super::permissions::{check_permissions, scoped_permissions, table_permissions};
use super::words::{unique_props, word, word_of};
use super::Analyzer;
use crate::ast::*;
use crate::diagnostics::closest;
use crate::diagnostics::{Code, Diagnostic};
use crate::resolved::{self as r, Backoff};
use crate::span::Span;

const MODELS: [&str; 3] = ["sonnet", "opus", "haiku"];
const AGENT_PROPS: [&str; 10] = [
    "model",
    "prompt",
    "persist",
    "skills",
    "permissions",
    "tools",
    "context",
    "retry",
    "backoff",
    "description",
];
/// Agent properties the agent table keeps in fields of their own (the others are passed
/// to the driver as they are).
const AGENT_FIELDS: [&str; 8] = [
    "model",
    "prompt",
    "persist",
    "skills",
    "permissions",
    "context",
    "retry",
    "backoff",
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
const BACKOFFS: [&str; 3] = ["none", "linear", "exponential"];

fn expr_of(p: &Property) -> Option<&Expr> {
    match &p.value {
        PropValue::Expr(e) => Some(e),
        PropValue::Block(_) => None,
    }
}

/// The first property named `key`.
fn prop<'p>(props: &'p [Property], key: &str) -> Option<&'p Property> {
    props.iter().find(|p| p.key.text == key)
}

fn prop_expr<'p>(props: &'p [Property], key: &str) -> Option<&'p Expr> {
    prop(props, key).and_then(expr_of)
}

/// Properties that decide what an agent may do: misspelt, they would be ignored and the
/// agent would run with the defaults, so a near miss is an error (E156), not a warning.
const GUARDING_PROPS: [&str; 2] = ["permissions", "tools"];

/// Reports an unknown property, suggesting the closest known one. One that is a near miss
/// of a property that decides what an agent may do is an error.
fn unknown_prop(a: &mut Analyzer, p: &Property, what: &str, known: &[&str]) {
    let key = p.key.text.as_str();
    let d = match closest(key, known.iter().copied()) {
        Some(s) if GUARDING_PROPS.contains(&s) => Diagnostic::new(
            Code::E156,
            a.file,
            p.key.span,
            format!("unknown {what} property `{key}`, a misspelling of `{s}`"),
        )
        .with_help(format!(
            "write `{s}`: as written, the {what} would run without the `{s}` it declares"
        )),
        Some(s) => Diagnostic::new(
            Code::W005,
            a.file,
            p.key.span,
            format!("unknown {what} property `{key}`"),
        )
        .with_help(format!("did you mean `{s}`?")),
        None => Diagnostic::new(
            Code::W005,
            a.file,
            p.key.span,
            format!("unknown {what} property `{key}`"),
        )
        .with_help(format!(
            "known properties: {}; unknown ones are kept and passed to the driver",
            known.join(", ")
        )),
    };
    a.report(d);
}

/// Checks an `agent` definition.
pub(super) fn agent<'a>(a: &mut Analyzer<'a>, def: &'a AgentDef) {
    let props = unique_props(a, &def.props);
    for p in &def.props {
        if !AGENT_PROPS.contains(&p.key.text.as_str()) {
            unknown_prop(a, p, "agent", &AGENT_PROPS);
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
        check_permissions(a, p, true);
    }
    if let Some(p) = props.get("tools") {
        if tool_names(p).is_none() {
            a.diag(
                Code::E144,
                p.span,
                "`tools` must be `none`, `all` or a list of tool names",
            )
            .help = Some(
                "write `tools: none` for plain answers, or `tools: [\"read_file\", \"grep\"]`"
                    .into(),
            );
        }
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

/// The agent table's entry for a definition: its properties as written.
pub(super) fn agent_entry(def: &AgentDef) -> r::Agent {
    let props = &def.props;
    let persist = match prop_expr(props, "persist").map(|e| &e.kind) {
        Some(ExprKind::Bool(true)) => r::Persist::Run,
        Some(ExprKind::Name(n)) if n.text == "project" => r::Persist::Project,
        Some(ExprKind::Name(n)) if n.text == "user" => r::Persist::User,
        Some(ExprKind::Str(s)) => r::Persist::Path(s.raw_text()),
        _ => r::Persist::None,
    };
    let extra = props
        .iter()
        .filter(|p| !AGENT_FIELDS.contains(&p.key.text.as_str()))
        .filter_map(|p| {
            if p.key.text == "tools" {
                return Some((p.key.text.clone(), r::Literal::Str(tool_names(p)?)));
            }
            let e = expr_of(p)?;
            let value = match &e.kind {
                ExprKind::Int(i) => r::Literal::Int(*i),
                ExprKind::Bool(b) => r::Literal::Bool(*b),
                _ => r::Literal::Str(word(e)?),
            };
            Some((p.key.text.clone(), value))
        })
        .collect();
    r::Agent {
        name: def.name.text.clone(),
        model: prop_expr(props, "model").and_then(word),
        prompt: match prop_expr(props, "prompt").map(|e| &e.kind) {
            Some(ExprKind::Str(s)) => Some(s.raw_text()),
            _ => None,
        },
        persist,
        skills: skill_names(prop_expr(props, "skills")),
        permissions: table_permissions(prop(props, "permissions")),
        extra,
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
        value => {
            let d = Diagnostic::new(Code::E008, a.file, p.span, "invalid model");
            let written = match value {
                Some(ExprKind::Name(n)) => Some(n.text.as_str()),
                _ => None,
            };
            a.report(match written.and_then(|w| closest(w, MODELS)) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help("use sonnet, opus or haiku (or a quoted provider model id)"),
            });
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
                    let d = Diagnostic::new(
                        Code::W007,
                        a.file,
                        item.span,
                        format!("skill {name:?} is not imported"),
                    );
                    let known: Vec<&str> = a.skills.iter().map(String::as_str).collect();
                    a.report(match closest(&name, known) {
                        Some(s) => d.with_help(format!("did you mean {s:?}?")),
                        None => d.with_help(format!(
                            "import it: `import \"{name}\" from \"github:...\"`"
                        )),
                    });
                }
            }
            _ => {
                a.diag(Code::E014, item.span, "skill names must be strings");
            }
        }
    }
}

/// The skill names of a `skills:` value (nothing when it is not a list).
/// An agent's `tools:` as the VM reads it from the agent table: `none`, `all`, or the tools'
/// names joined with commas (`read_file,grep`); none when the value is not one of those.
pub(super) fn tool_names(p: &Property) -> Option<String> {
    match &expr_of(p)?.kind {
        ExprKind::Name(n) if n.text == "none" || n.text == "all" => Some(n.text.clone()),
        ExprKind::Array(items) => {
            let names: Option<Vec<String>> = items
                .iter()
                .map(|i| {
                    let name = word(i)?;
                    let ok = !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    ok.then_some(name)
                })
                .collect();
            Some(names?.join(","))
        }
        _ => None,
    }
}

fn skill_names(e: Option<&Expr>) -> Vec<String> {
    match e.map(|e| &e.kind) {
        Some(ExprKind::Array(items)) => items
            .iter()
            .filter_map(|i| match &i.kind {
                ExprKind::Str(s) => Some(s.raw_text()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Checks a `context:` value and resolves it into labelled values: variable references,
/// member paths, lists and objects of them, a string note, a block of `file:` entries, or
/// an agent (its prompt).
fn context<'a>(a: &mut Analyzer<'a>, p: &'a Property) -> Vec<(String, r::ContextValue)> {
    let mut out = Vec::new();
    match &p.value {
        PropValue::Block(entries) => {
            for e in entries {
                if let PropValue::Expr(v) = &e.value {
                    out.push((e.key.text.clone(), r::ContextValue::Expr(a.expr(v))));
                }
            }
        }
        PropValue::Expr(e) => context_value(a, e, true, &mut out),
    }
    out
}

fn context_value<'a>(
    a: &mut Analyzer<'a>,
    e: &'a Expr,
    top: bool,
    out: &mut Vec<(String, r::ContextValue)>,
) {
    let label = match &e.kind {
        ExprKind::Name(n) => n.text.clone(),
        ExprKind::Member(_, f) => f.text.clone(),
        ExprKind::Str(_) => "note".into(),
        _ => "context".into(),
    };
    match &e.kind {
        ExprKind::Name(n) if a.lookup(&n.text).is_none() && a.agents.contains_key(&n.text) => {
            // An agent named as context: its description.
            let id = a.agents[&n.text].id;
            out.push((label, r::ContextValue::Agent(id)));
        }
        ExprKind::Name(_) | ExprKind::Member(..) | ExprKind::Index(..) | ExprKind::Str(_) => {
            out.push((label, r::ContextValue::Expr(a.expr(e))));
        }
        ExprKind::Array(items) if top => {
            for i in items {
                context_value(a, i, false, out);
            }
        }
        ExprKind::Object(entries) if top => {
            for en in entries {
                out.push((
                    en.key.text.clone(),
                    r::ContextValue::Expr(a.expr(&en.value)),
                ));
            }
        }
        _ => {
            a.diag(
                Code::E107,
                e.span,
                "context entries must be variable references",
            )
            .help = Some("bind the value first (`let x = ...`) and pass `context: x`".into());
            out.push((label, r::ContextValue::Expr(a.expr(e))));
        }
    }
}

/// Checks a session or `resume:` with its properties and resolves it.
pub(super) fn session<'a>(a: &mut Analyzer<'a>, s: &'a SessionExpr, span: Span) -> r::Session {
    let props = unique_props(a, &s.props);
    for p in &s.props {
        if !SESSION_PROPS.contains(&p.key.text.as_str()) {
            unknown_prop(a, p, "session", &SESSION_PROPS);
        }
    }
    let agent = s.agent.as_ref().and_then(|name| session_agent(a, s, name));
    let prompt_prop = props.get("prompt").copied();
    let text = s.text.as_ref().map(|text| {
        let t = a.template(text);
        if prompt_prop.is_none() {
            prompt_text(a, text);
        }
        t
    });
    let prompt = prompt_prop.map(|p| match expr_of(p) {
        Some(Expr {
            kind: ExprKind::Str(t),
            ..
        }) => {
            let tpl = a.template(t);
            prompt_text(a, t);
            tpl
        }
        Some(e) => {
            // A prompt given as a value: a variable, or a member path of one.
            let value = a.expr(e);
            match value_path(&value) {
                Some((var, path)) => r::Template {
                    parts: vec![r::TplPart::Var {
                        var,
                        path,
                        name: root_name(e),
                    }],
                },
                None => {
                    a.diag(
                        Code::E144,
                        p.span,
                        "`prompt` must be a string, a variable, or a field or element of one",
                    )
                    .help =
                        Some("bind the value first: `let task = ...`, then `prompt: task`".into());
                    r::Template::text("")
                }
            }
        }
        None => {
            a.diag(Code::E144, p.span, "`prompt` must be a string or a value");
            r::Template::text("")
        }
    });
    if s.text.is_none() && s.agent.is_none() && prompt_prop.is_none() {
        a.diag(
            Code::E003,
            Span::new(span.start as usize, span.start as usize + 7),
            "session has neither a prompt nor an agent",
        )
        .help =
            Some("write `session \"task\"`, `session: agent`, or add a `prompt:` property".into());
    }
    // `session "label"` with a `prompt:` property: the string is the label.
    let (label, prompt) = match (text, prompt) {
        (Some(t), Some(p)) => (Some(t), Some(p)),
        (t, p) => (None, p.or(t)),
    };
    let label = label.or_else(|| s.name.as_ref().map(|n| r::Template::text(n.text.clone())));
    if let Some(p) = props.get("model") {
        model(a, p);
    }
    let context = props
        .get("context")
        .map(|p| context(a, p))
        .unwrap_or_default();
    let mut retry = 0;
    if let Some(p) = props.get("retry") {
        match expr_of(p).map(|e| &e.kind) {
            Some(ExprKind::Int(n)) if *n < 1 => {
                a.diag(
                    Code::E125,
                    p.span,
                    format!("retry count must be positive, not {n}"),
                );
            }
            Some(ExprKind::Int(n)) => {
                if *n > 10 {
                    a.diag(
                        Code::W113,
                        p.span,
                        format!("retry count {n} is unusually high"),
                    );
                }
                retry = u32::try_from(*n).unwrap_or(u32::MAX);
            }
            Some(ExprKind::Unary(UnOp::Neg, _)) => {
                a.diag(Code::E125, p.span, "retry count must be positive");
            }
            _ => {
                a.diag(Code::E126, p.span, "retry count must be an integer");
            }
        }
    }
    let mut backoff = Backoff::None;
    if let Some(p) = props.get("backoff") {
        let w = expr_of(p).and_then(word_of);
        match w.as_deref() {
            Some("none") => {}
            Some("linear") => backoff = Backoff::Linear,
            Some("exponential") => backoff = Backoff::Exponential,
            _ => {
                let d = Diagnostic::new(Code::E127, a.file, p.span, "invalid backoff strategy");
                a.report(match w.and_then(|w| closest(&w, BACKOFFS)) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help("use none, linear or exponential"),
                });
            }
        }
    }
    if let Some(p) = props.get("permissions") {
        check_permissions(a, p, false);
    }
    if let Some(p) = props.get("skills") {
        skills(a, p);
    }
    // The agent's prompt and permission patterns interpolate in this session's scope.
    let agent_def = s
        .agent
        .as_ref()
        .filter(|_| agent.is_some())
        .and_then(|name| a.agents.get(&name.text))
        .map(|info| info.def);
    let system = agent_def.and_then(
        |def| match prop_expr(&def.props, "prompt").map(|e| &e.kind) {
            Some(ExprKind::Str(lit)) => Some(a.quiet_template(lit)),
            _ => None,
        },
    );
    let mut permissions = match agent_def {
        Some(def) => scoped_permissions(a, prop(&def.props, "permissions")),
        None => Vec::new(),
    };
    for p in scoped_permissions(a, prop(&s.props, "permissions")) {
        permissions.retain(|q| q.kind != p.kind);
        permissions.push(p);
    }
    r::Session {
        kind: s.kind,
        context,
        inherit: !props.contains_key("context"),
        agent,
        label,
        prompt,
        system,
        model: prop_expr(&s.props, "model").and_then(word),
        permissions,
        skills: prop_expr(&s.props, "skills").map(|e| skill_names(Some(e))),
        retry,
        backoff,
    }
}

/// A variable and the member path read from it, for a value written as `name`,
/// `name.field` or `name[0]` (chained).
fn value_path(e: &r::Expr) -> Option<(r::VarId, Vec<PathSeg>)> {
    match &e.kind {
        r::ExprKind::Var(v) => Some((*v, Vec::new())),
        r::ExprKind::Member(base, field) => {
            let (v, mut path) = value_path(base)?;
            path.push(PathSeg::Field(field.clone()));
            Some((v, path))
        }
        r::ExprKind::Index(base, index) => match index.kind {
            r::ExprKind::Lit(r::Literal::Int(i)) => {
                let (v, mut path) = value_path(base)?;
                path.push(PathSeg::Index(u32::try_from(i).ok()?));
                Some((v, path))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The name a member path starts from.
fn root_name(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.text.clone(),
        ExprKind::Member(base, _) | ExprKind::Index(base, _) => root_name(base),
        _ => String::new(),
    }
}

/// Checks the agent a session names (E007, E017) and returns it.
fn session_agent(a: &mut Analyzer, s: &SessionExpr, agent: &Name) -> Option<r::AgentId> {
    let Some(info) = a.agents.get(&agent.text) else {
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
        } else if let Some(s) = closest(&agent.text, a.agents.keys().map(String::as_str)) {
            d = d.with_help(format!("did you mean `{s}`?"));
        } else {
            d = d.with_help(format!(
                "define it: `agent {}:` with a `model:` and a `prompt:`",
                agent.text
            ));
        }
        a.report(d);
        return None;
    };
    let (id, persistent, prev) = (info.id, info.persistent, info.span);
    a.index
        .add(agent.span, super::index::Target::Agent(id), false);
    if s.kind == SessionKind::Resume && !persistent {
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
    Some(id)
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
