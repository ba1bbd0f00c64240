//! Construct modifiers, parsed once: `parallel (...)` into a [`Join`](r::Join), and a
//! loop's `(max: n)`.

use super::exprs::null;
use super::words::word_of;
use super::Analyzer;
use crate::ast::*;
use crate::diagnostics::closest;
use crate::diagnostics::{Code, Diagnostic};
use crate::resolved::{self as r, OnFail, Strategy};
use crate::span::Span;

const STRATEGIES: [&str; 3] = ["all", "first", "any"];
const ON_FAIL: [&str; 3] = ["fail-fast", "continue", "ignore"];
const PARALLEL_MODIFIERS: [&str; 2] = ["count", "on-fail"];

/// Adds "did you mean" to `d` when `word` is close to one of `known`, else `fallback`.
fn help(d: Diagnostic, word: Option<&str>, known: &[&str], fallback: &str) -> Diagnostic {
    match word.and_then(|w| closest(w, known.iter().copied())) {
        Some(s) => d.with_help(format!("did you mean `{s}`?")),
        None => d.with_help(fallback),
    }
}

/// Checks `parallel (...)` modifiers and returns how the fork joins; `branches` is the
/// branch count when known statically.
pub(super) fn parallel(a: &mut Analyzer, mods: &[Arg], branches: Option<usize>) -> r::Join {
    let mut join = r::Join::default();
    let mut count: Option<(i64, Span)> = None;
    for m in mods {
        match &m.name {
            None => {
                let word = word_of(&m.value);
                match word.as_deref() {
                    Some("all") => join.strategy = Strategy::All,
                    Some("first") => join.strategy = Strategy::First,
                    Some("any") => join.strategy = Strategy::Any,
                    _ => {
                        let d = Diagnostic::new(
                            Code::E112,
                            a.file,
                            m.value.span,
                            "invalid join strategy",
                        );
                        a.report(help(
                            d,
                            word.as_deref(),
                            &STRATEGIES,
                            "use \"all\", \"first\" or \"any\"",
                        ));
                    }
                }
            }
            Some(n) if n.text == "on-fail" => {
                let word = word_of(&m.value);
                match word.as_deref() {
                    Some("fail-fast") => join.on_fail = OnFail::FailFast,
                    Some("continue") => join.on_fail = OnFail::Continue,
                    Some("ignore") => join.on_fail = OnFail::Ignore,
                    _ => {
                        let d = Diagnostic::new(
                            Code::E113,
                            a.file,
                            m.value.span,
                            "invalid on-fail policy",
                        );
                        a.report(help(
                            d,
                            word.as_deref(),
                            &ON_FAIL,
                            "use \"fail-fast\", \"continue\" or \"ignore\"",
                        ));
                    }
                }
            }
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
                let d = Diagnostic::new(
                    Code::E116,
                    a.file,
                    n.span,
                    format!("unknown parallel modifier `{}`", n.text),
                );
                a.report(help(
                    d,
                    Some(&n.text),
                    &PARALLEL_MODIFIERS,
                    "modifiers: a strategy (\"all\", \"first\", \"any\"), count: N, on-fail: \"...\"",
                ));
            }
        }
    }
    if let Some((c, cspan)) = count {
        if join.strategy != Strategy::Any {
            a.diag(
                Code::E114,
                cspan,
                "`count` is only valid with the \"any\" strategy",
            );
        } else if let Some(b) = branches.filter(|&b| c as usize > b) {
            a.diag(
                Code::W105,
                cspan,
                format!("count {c} exceeds the {b} branch(es)"),
            )
            .help = Some("the block can never collect that many results".into());
        }
        join.count = u32::try_from(c).unwrap_or(u32::MAX);
    }
    join
}

/// Checks a loop's `(max: n)` modifiers and returns the limit (a `null` stands for a
/// limit reported as invalid).
pub(super) fn loop_max<'a>(a: &mut Analyzer<'a>, mods: &'a [Arg]) -> Option<r::Expr> {
    let mut max = None;
    for m in mods {
        match &m.name {
            Some(n) if n.text == "max" => {
                let value = match &m.value.kind {
                    ExprKind::Int(v) if *v >= 1 => a.expr(&m.value),
                    ExprKind::Int(v) => {
                        a.diag(
                            Code::E119,
                            m.value.span,
                            format!("max iterations must be positive, not {v}"),
                        );
                        null(m.value.span)
                    }
                    ExprKind::Unary(UnOp::Neg, _) => {
                        a.diag(Code::E119, m.value.span, "max iterations must be positive");
                        null(m.value.span)
                    }
                    ExprKind::Name(_) | ExprKind::Member(..) => a.expr(&m.value),
                    _ => {
                        a.diag(
                            Code::E120,
                            m.value.span,
                            "max iterations must be an integer",
                        );
                        null(m.value.span)
                    }
                };
                max.get_or_insert(value);
            }
            Some(n) => {
                let d = Diagnostic::new(
                    Code::E116,
                    a.file,
                    n.span,
                    format!("unknown loop modifier `{}`", n.text),
                );
                a.report(help(d, Some(&n.text), &["max"], "loops take `(max: N)`"));
            }
            None => {
                a.diag(Code::E116, m.value.span, "loop modifiers must be named")
                    .help = Some("write `(max: N)`".into());
            }
        }
    }
    max
}
