//! Properties and words as written: a block's `key: value` properties with each key given
//! once, and an expression read as a bare word (a modifier's option, a property's value, a
//! permission's rule). The checks of properties, permissions and modifiers share them.

use super::Analyzer;
use crate::ast::*;
use crate::diagnostics::{Code, Diagnostic};
use rustc_hash::FxHashMap as HashMap;

/// Reports duplicate keys and returns the first occurrence of each.
pub(super) fn unique_props<'p>(
    a: &mut Analyzer,
    props: &'p [Property],
) -> HashMap<&'p str, &'p Property> {
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

/// A word given as a name or a plain string.
pub(super) fn word_of(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Name(n) => Some(n.text.clone()),
        ExprKind::Str(s) => s.as_plain(),
        _ => None,
    }
}

/// A property value read as a word (a name, a string, a boolean).
pub(super) fn word(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Name(n) => Some(n.text.clone()),
        ExprKind::Str(s) => Some(s.raw_text()),
        ExprKind::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
