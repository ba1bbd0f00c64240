//! `permissions:` blocks: their checks, and their rules as the agent table keeps them or as
//! a session resolves them in its scope.

use super::words::{unique_props, word, word_of};
use super::Analyzer;
use crate::ast::*;
use crate::diagnostics::closest;
use crate::diagnostics::{Code, Diagnostic};
use crate::resolved as r;

const PERMISSION_KINDS: [&str; 5] = ["read", "write", "execute", "bash", "network"];
const PERMISSION_WORDS: [&str; 3] = ["allow", "deny", "prompt"];

/// Checks a `permissions:` block. An agent's (`late`) resolves names and interpolations when
/// a session uses the agent, so they may name any variable of the program.
pub(super) fn check_permissions(a: &mut Analyzer, p: &Property, late: bool) {
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
        if !PERMISSION_KINDS.contains(&key) {
            // A near miss of a kind would leave that kind at its default: an error.
            a.report(match closest(key, PERMISSION_KINDS) {
                Some(s) => Diagnostic::new(
                    Code::E156,
                    a.file,
                    e.key.span,
                    format!("unknown permission type `{key}`, a misspelling of `{s}`"),
                )
                .with_help(format!(
                    "write `{s}`: as written, `{s}` would keep its default instead of this rule"
                )),
                None => Diagnostic::new(
                    Code::W008,
                    a.file,
                    e.key.span,
                    format!("unknown permission type `{key}`"),
                )
                .with_help("known types: read, write, execute, bash, network"),
            });
        }
        match &value.kind {
            ExprKind::Array(items) => {
                if key == "bash" {
                    a.diag(Code::W009, value.span, "`bash` takes allow, deny or prompt");
                }
                for item in items {
                    if matches!(key, "read" | "write" | "execute") {
                        warn_if_computed(a, key, item, late);
                    }
                    match &item.kind {
                        ExprKind::Str(s) if late => a.late_strlit(s),
                        ExprKind::Str(s) => {
                            a.template(s);
                        }
                        ExprKind::Name(n) if !late && a.lookup(&n.text).is_some() => {}
                        ExprKind::Name(n) if late && a.declared_anywhere(&n.text) => {}
                        _ => {
                            a.diag(Code::E016, item.span, "permission patterns must be strings");
                        }
                    }
                }
            }
            _ => match word_of(value) {
                Some(w) if PERMISSION_WORDS.contains(&w.as_str()) => {}
                // `read`, `write` and `execute` also take one pattern string.
                Some(_)
                    if matches!(key, "read" | "write" | "execute")
                        && matches!(value.kind, ExprKind::Str(_)) => {}
                word => {
                    let d = Diagnostic::new(
                        Code::W009,
                        a.file,
                        value.span,
                        format!("unknown value for permission `{key}`"),
                    );
                    a.report(match word.and_then(|w| closest(&w, PERMISSION_WORDS)) {
                        Some(s) => d.with_help(format!("did you mean `{s}`?")),
                        None => d.with_help("use allow, deny, prompt, or a list of patterns"),
                    });
                }
            },
        }
    }
}

/// Warns (W121) about a `read`, `write` or `execute` pattern whose start is computed when the
/// program runs (a variable, or a string beginning with an interpolated variable, before any
/// fixed directory; a `const` bound to plain text is fixed): a value a model chose could make
/// it cover the whole working directory.
fn warn_if_computed(a: &mut Analyzer, key: &str, item: &Expr, late: bool) {
    let is_var = |a: &mut Analyzer, name: &str| {
        let declared = if late {
            a.declared_anywhere(name)
        } else {
            a.lookup(name).is_some()
        };
        declared && !is_fixed_text(a, name)
    };
    let computed = match &item.kind {
        ExprKind::Name(n) => is_var(a, &n.text),
        ExprKind::Str(l) => {
            let mut fixed = String::new();
            let mut first_var = false;
            for part in &l.parts {
                match part {
                    StrPart::Text(t) => fixed.push_str(t),
                    StrPart::Interp(i) if is_var(a, &i.root) => {
                        first_var = true;
                        break;
                    }
                    StrPart::Interp(i) => fixed.push_str(&i.raw),
                }
            }
            first_var && !starts_with_a_fixed_directory(&fixed)
        }
        _ => false,
    };
    if computed {
        a.diag(
            Code::W121,
            item.span,
            format!(
                "this `{key}` pattern begins with a value computed when the program runs: a \
                 model's answer could make it cover the whole working directory"
            ),
        )
        .help = Some(
            "begin the pattern with a fixed directory, such as `\"out/{dir}/\"`, so that no \
             value can widen it beyond that directory"
                .into(),
        );
    }
}

/// Whether `name` is a `const` bound to plain text, fixed when the program is written.
fn is_fixed_text(a: &Analyzer, name: &str) -> bool {
    let mut fixed = false;
    walk_stmts(&a.program.stmts, &mut |s| {
        if let StmtKind::Bind {
            kind: BindKind::Const,
            target: Target::Name(n),
            value,
        } = &s.kind
        {
            if n.text == name && matches!(&value.kind, ExprKind::Str(l) if l.as_plain().is_some()) {
                fixed = true;
            }
        }
    });
    fixed
}

/// Whether the literal start of a pattern names a directory without glob characters
/// (`out/`, `./reports/2024/`), which any text after it stays beneath.
fn starts_with_a_fixed_directory(text: &str) -> bool {
    let mut t = text;
    while let Some(rest) = t.strip_prefix("./").or_else(|| t.strip_prefix('/')) {
        t = rest;
    }
    match t.split_once('/') {
        Some((dir, _)) => {
            !dir.is_empty() && dir != "." && dir != ".." && !dir.contains(['*', '?', '[', '{'])
        }
        None => false,
    }
}

/// The rules of a `permissions:` block as written (the agent table does not interpolate).
pub(super) fn table_permissions(p: Option<&Property>) -> Vec<r::Permission> {
    permission_rules(p, |item| match &item.kind {
        ExprKind::Str(l) => Some(r::Template::text(l.raw_text())),
        ExprKind::Name(n) => Some(r::Template::text(format!("{{{}}}", n.text))),
        _ => None,
    })
}

/// The rules of a `permissions:` block with patterns interpolated in the current scope (a
/// name stands for its variable, `{name}` groups for theirs).
pub(super) fn scoped_permissions(a: &mut Analyzer, p: Option<&Property>) -> Vec<r::Permission> {
    permission_rules(p, |item| match &item.kind {
        ExprKind::Str(l) => Some(a.quiet_template(l)),
        ExprKind::Name(n) => Some(match a.lookup(&n.text).cloned() {
            Some(var) => r::Template {
                parts: vec![r::TplPart::Var {
                    var: a.read_var(&var, n.span, false),
                    path: Vec::new(),
                    name: n.text.clone(),
                }],
            },
            None => r::Template::text(format!("{{{}}}", n.text)),
        }),
        _ => None,
    })
}

fn permission_rules(
    p: Option<&Property>,
    mut pattern: impl FnMut(&Expr) -> Option<r::Template>,
) -> Vec<r::Permission> {
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
        let value = match &v.kind {
            ExprKind::Array(items) => {
                r::PermissionValue::Patterns(items.iter().filter_map(&mut pattern).collect())
            }
            _ => match word(v) {
                Some(w) => r::PermissionValue::Word(w),
                None => continue,
            },
        };
        out.push(r::Permission {
            kind: e.key.text.clone(),
            value,
        });
    }
    out
}
