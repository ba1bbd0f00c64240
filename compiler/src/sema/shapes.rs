//! The fields of records whose shape is known: a variable every binding of which is a record
//! literal (`let r = {title: t, body: b}`) has the fields those literals name. Reading
//! another field (`r.titel`, `{r.titel}`, `let {titel} = r`) gives `null` at run time, so it
//! is a likely misspelling: W123.
//!
//! The check is flow-insensitive, so it never depends on which binding ran last: analysis
//! records every value written to a variable as it goes, and the field reads, and the reads
//! are checked once the whole file is analysed. A variable written anything but a record
//! literal (a session's result, an input, a parameter, a block's output...) has no known
//! shape and is not checked.

use crate::ast::{Expr, ExprKind, Interp, PathSeg};
use crate::resolved::VarId;
use crate::span::Span;
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;

/// The fields a record literal has, each with the shape of its value when that is a record
/// literal too.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shape {
    fields: BTreeMap<String, Option<Shape>>,
}

impl Shape {
    /// The shape of a value, when it is a record literal.
    pub fn of(e: &Expr) -> Option<Shape> {
        match &e.kind {
            ExprKind::Object(entries) => Some(Shape {
                fields: entries
                    .iter()
                    .map(|en| (en.key.text.clone(), Shape::of(&en.value)))
                    .collect(),
            }),
            _ => None,
        }
    }

    /// The shape of a value that is one of two records: every field of either (a field whose
    /// values differ in shape has no known shape).
    fn union(mut self, other: Shape) -> Shape {
        for (name, shape) in other.fields {
            match self.fields.get_mut(&name) {
                None => {
                    self.fields.insert(name, shape);
                }
                Some(mine) => {
                    *mine = match (mine.take(), shape) {
                        (Some(a), Some(b)) => Some(a.union(b)),
                        _ => None,
                    }
                }
            }
        }
        self
    }
}

/// What has been written to a variable.
#[derive(Debug)]
enum Written {
    /// Only record literals (their fields joined), the first at this span.
    Records(Shape, Span),
    /// Something else at least once.
    Unknown,
}

/// A read of a field path of a variable: each field with where it is written.
#[derive(Debug)]
struct Read {
    var: VarId,
    path: Vec<(String, Span)>,
}

/// A field read that no record bound to the variable has.
#[derive(Debug, PartialEq)]
pub struct Missing {
    /// The variable.
    pub var: VarId,
    /// The fields read before it (`meta` in `r.meta.titel`).
    pub prefix: Vec<String>,
    /// The field as written.
    pub field: String,
    /// Where.
    pub span: Span,
    /// The fields the record has there.
    pub known: Vec<String>,
    /// Where the variable is first bound to a record literal.
    pub record: Span,
}

/// Writes and field reads recorded during analysis.
#[derive(Debug, Default)]
pub struct Shapes {
    written: HashMap<VarId, Written>,
    reads: Vec<Read>,
}

impl Shapes {
    /// Records a binding of `var` to `value`.
    pub fn bind(&mut self, var: VarId, value: &Expr) {
        self.write(var, Shape::of(value), value.span);
    }

    /// Records that `var` is written a value of unknown shape.
    pub fn unknown(&mut self, var: VarId) {
        self.written.insert(var, Written::Unknown);
    }

    fn write(&mut self, var: VarId, shape: Option<Shape>, at: Span) {
        let next = match (self.written.remove(&var), shape) {
            (Some(Written::Unknown), _) | (_, None) => Written::Unknown,
            (None, Some(s)) => Written::Records(s, at),
            (Some(Written::Records(old, first)), Some(s)) => Written::Records(old.union(s), first),
        };
        self.written.insert(var, next);
    }

    /// Records a read of the fields `path` of `var` (a path stops at the first index).
    pub fn read(&mut self, var: VarId, path: Vec<(String, Span)>) {
        if !path.is_empty() {
            self.reads.push(Read { var, path });
        }
    }

    /// Every field read that the variable's records never have, each place once.
    pub fn missing(&self) -> Vec<Missing> {
        let mut out: Vec<Missing> = Vec::new();
        for r in &self.reads {
            let Some(Written::Records(shape, record)) = self.written.get(&r.var) else {
                continue;
            };
            let mut shape = shape;
            for (i, (field, span)) in r.path.iter().enumerate() {
                match shape.fields.get(field) {
                    Some(Some(inner)) => shape = inner,
                    Some(None) => break,
                    None => {
                        if !out.iter().any(|m| m.span == *span) {
                            out.push(Missing {
                                var: r.var,
                                prefix: r.path[..i].iter().map(|p| p.0.clone()).collect(),
                                field: field.clone(),
                                span: *span,
                                known: shape.fields.keys().cloned().collect(),
                                record: *record,
                            });
                        }
                        break;
                    }
                }
            }
        }
        out
    }
}

/// The fields of `e` read from a variable, when `e` is a member path of a name
/// (`r.meta.title`): the name and each field with its span (up to the first index).
pub fn member_path(e: &Expr) -> Option<(&crate::ast::Name, Vec<(String, Span)>)> {
    let mut fields = Vec::new();
    let mut at = e;
    loop {
        match &at.kind {
            ExprKind::Member(base, field) => {
                fields.push((field.text.clone(), field.span));
                at = base;
            }
            ExprKind::Index(base, _) => {
                // Fields after an index are fields of an element: unknown.
                fields.clear();
                at = base;
            }
            ExprKind::Name(n) => {
                fields.reverse();
                return Some((n, fields));
            }
            _ => return None,
        }
    }
}

/// The fields of an interpolation `{root.a.b[0].c}` up to the first index, with their spans
/// in the source.
pub fn interp_path(i: &Interp) -> Vec<(String, Span)> {
    let mut out = Vec::new();
    // The group is written without spaces: `{`, the root, then `.field` and `[n]` steps.
    let mut at = i.span.start as usize + 1 + i.root.len();
    for seg in &i.path {
        match seg {
            PathSeg::Field(f) => {
                out.push((f.clone(), Span::new(at + 1, at + 1 + f.len())));
                at += 1 + f.len();
            }
            PathSeg::Index(_) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(src: &str) -> Expr {
        let program = crate::parser::parse(0, &format!("let x = {src}\n")).program;
        match &program.stmts[0].kind {
            crate::ast::StmtKind::Bind { value, .. } => (**value).clone(),
            other => panic!("not a binding: {other:?}"),
        }
    }

    #[test]
    fn records_of_two_bindings_have_the_fields_of_both() {
        let mut s = Shapes::default();
        let v = VarId::from_u32(0);
        s.bind(v, &expr("{title: 1, meta: {by: 2}}"));
        s.bind(v, &expr("{body: 1, meta: {at: 3}}"));
        let f = |name: &str, at: usize| (name.to_string(), Span::new(at, at + name.len()));
        s.read(v, vec![f("title", 0)]);
        s.read(v, vec![f("body", 10)]);
        s.read(v, vec![f("meta", 20), f("at", 30)]);
        s.read(v, vec![f("meta", 40), f("on", 50)]);
        s.read(v, vec![f("titel", 60)]);
        let missing: Vec<(String, Vec<String>)> = s
            .missing()
            .into_iter()
            .map(|m| (m.field, m.known))
            .collect();
        assert_eq!(
            missing,
            [
                ("on".to_string(), vec!["at".to_string(), "by".to_string()]),
                (
                    "titel".to_string(),
                    vec!["body".to_string(), "meta".to_string(), "title".to_string()]
                ),
            ]
        );
    }

    #[test]
    fn any_other_value_makes_the_shape_unknown() {
        let mut s = Shapes::default();
        let v = VarId::from_u32(0);
        s.bind(v, &expr("{title: 1}"));
        s.bind(v, &expr("session \"x\""));
        s.read(v, vec![("titel".into(), Span::new(0, 5))]);
        assert!(s.missing().is_empty());
        let w = VarId::from_u32(1);
        s.unknown(w);
        s.bind(w, &expr("{title: 1}"));
        s.read(w, vec![("titel".into(), Span::new(0, 5))]);
        assert!(s.missing().is_empty());
    }
}
