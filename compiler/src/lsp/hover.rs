//! Hover: what an agent is (model, prompt, permissions, skills), what a session runs with
//! (agent, model, context), a loop's or fan-out's static session bounds (as `prosec cost`
//! computes them), and what a variable, block or imported program is.

use super::document::Document;
use crate::ast::{visit_exprs, ExprKind, PropValue, SessionExpr};
use crate::cost;
use crate::lexer::Tok;
use crate::resolved::{self as r, PermissionValue, Template, TplPart};
use crate::sema::index::Target;
use crate::span::Span;

/// Template text with its interpolations written back.
pub fn template_text(t: &Template) -> String {
    let mut s = String::new();
    for p in &t.parts {
        match p {
            TplPart::Text(x) => s.push_str(x),
            TplPart::Var { name, path, .. } => {
                s.push('{');
                s.push_str(name);
                for seg in path {
                    match seg {
                        crate::ast::PathSeg::Field(f) => {
                            s.push('.');
                            s.push_str(f);
                        }
                        crate::ast::PathSeg::Index(i) => s.push_str(&format!("[{i}]")),
                    }
                }
                s.push('}');
            }
        }
    }
    s
}

/// A Markdown description of an agent.
pub fn agent_text(a: &r::Agent) -> String {
    let mut s = format!("**agent** `{}`\n\n", a.name);
    s.push_str(&format!(
        "- model: `{}`\n",
        a.model.as_deref().unwrap_or("(the driver's default)")
    ));
    if let Some(p) = &a.prompt {
        s.push_str(&format!("- prompt: {}\n", p.trim()));
    }
    if !a.permissions.is_empty() {
        s.push_str("- permissions:\n");
        for p in &a.permissions {
            let v = match &p.value {
                PermissionValue::Word(w) => w.clone(),
                PermissionValue::Patterns(ps) => ps
                    .iter()
                    .map(|t| format!("`{}`", template_text(t)))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            s.push_str(&format!("  - {}: {v}\n", p.kind));
        }
    }
    if !a.skills.is_empty() {
        s.push_str(&format!("- skills: {}\n", a.skills.join(", ")));
    }
    if a.persist != r::Persist::None {
        s.push_str(&format!("- persist: {:?}\n", a.persist));
    }
    s
}

/// The session bounds of each loop and fan-out, by span (from `prosec cost`'s analysis).
pub fn construct_bounds(doc: &Document) -> Vec<cost::Construct> {
    if doc.comp.error_count() > 0 {
        return Vec::new();
    }
    let dir = doc.path.parent().unwrap_or(std::path::Path::new("."));
    let settings = prose_settings::Settings::load(None, dir).unwrap_or_default();
    let pricing =
        cost::Pricing::from_settings(&settings, cost::DEFAULT_TOKENS_IN, cost::DEFAULT_TOKENS_OUT);
    cost::bounds(&doc.comp, doc.module, &pricing).constructs
}

/// A range of sessions as text.
pub fn sessions_text(r: &cost::Range) -> String {
    r.render(cost::poly::count)
}

fn token_at(doc: &Document, offset: usize) -> Option<(Span, &Tok)> {
    let i = doc.tokens.partition_point(|t| t.2 < offset);
    let (s, t, e) = doc.tokens.get(i)?;
    (*s <= offset).then_some((Span::new(*s, *e), t))
}

fn session_at(doc: &Document, offset: usize) -> Option<(&SessionExpr, Span)> {
    let mut found = None;
    visit_exprs(&doc.ast.stmts, &mut |e| {
        if let ExprKind::Session(s) = &e.kind {
            if e.span.start as usize <= offset && offset <= e.span.start as usize + 7 {
                found = Some((&**s, e.span));
            }
        }
    });
    found
}

fn session_text(doc: &Document, s: &SessionExpr) -> String {
    let p = &doc.analysis().program;
    let agent = s
        .agent
        .as_ref()
        .and_then(|n| p.agents.values().find(|a| a.name == n.text));
    let prop = |key: &str| {
        s.props
            .iter()
            .find(|p| p.key.text == key)
            .map(|p| match &p.value {
                PropValue::Expr(e) => doc.text[e.span.range()].to_string(),
                PropValue::Block(_) => doc.text[p.span.range()].to_string(),
            })
    };
    let mut out = String::from("**session**\n\n");
    match (&s.agent, agent) {
        (Some(n), _) => out.push_str(&format!("- agent: `{}`\n", n.text)),
        (None, _) => out.push_str("- agent: none (the prompt alone)\n"),
    }
    let model = prop("model")
        .or_else(|| agent.and_then(|a| a.model.clone()))
        .unwrap_or_else(|| "(the driver's default)".into());
    out.push_str(&format!("- model: `{model}`\n"));
    match prop("context") {
        Some(c) => out.push_str(&format!("- context: `{c}`\n")),
        None => out.push_str("- context: the previous step's result (no `context:`)\n"),
    }
    if let Some(r) = prop("retry") {
        out.push_str(&format!("- retry: {r}\n"));
    }
    out
}

/// The hover text at `offset`, with the span it describes.
pub fn hover(doc: &Document, offset: usize) -> Option<(String, Span)> {
    let (tspan, tok) = token_at(doc, offset)?;
    match tok {
        Tok::Session | Tok::Resume => {
            let (s, _) = session_at(doc, offset)?;
            return Some((session_text(doc, s), tspan));
        }
        Tok::Loop | Tok::Repeat | Tok::For | Tok::Parallel => {
            let c = construct_bounds(doc)
                .into_iter()
                .find(|c| c.span.start as usize == tspan.start as usize)?;
            let what = doc.text[tspan.range()].to_string();
            return Some((
                format!(
                    "**{what}**: {} session(s) in all (static bounds, as `prosec cost` counts them)",
                    sessions_text(&c.sessions)
                ),
                tspan,
            ));
        }
        _ => {}
    }
    let occ = super::navigate::at(doc, offset)?;
    let p = &doc.analysis().program;
    let text = match &occ.target {
        Target::Agent(id) => agent_text(&p.agents[*id]),
        Target::Var(id) => {
            let v = &p.vars[*id];
            let name = v.name.as_deref().unwrap_or("_");
            let kind = format!("{:?}", v.kind).to_lowercase();
            let mut s = format!("**{kind}** `{name}`");
            if let Some(i) = p.inputs.values().find(|i| i.name == name) {
                if let Some(d) = &i.description {
                    s.push_str(&format!("\n\n{d}"));
                }
            }
            s
        }
        Target::Block(id) => {
            let b = &p.blocks[*id];
            let params: Vec<&str> = b
                .params
                .iter()
                .filter_map(|v| p.vars[*v].name.as_deref())
                .collect();
            format!("**block** `{}({})`", b.name, params.join(", "))
        }
        Target::Program(alias) => match p.imports.values().find(|i| &i.alias == alias) {
            Some(i) => format!(
                "**program** `{alias}` from `{}`\n\n- inputs: {}",
                i.path,
                if i.params.is_empty() {
                    "none".to_string()
                } else {
                    i.params.join(", ")
                }
            ),
            None => format!("**program** `{alias}` (not loaded)"),
        },
    };
    Some((text, occ.span))
}
