//! Helpers called from the grammar's actions.

use super::{ParseCx, ParseProblem, Trailer};
use crate::ast::*;
use crate::diagnostics::Code;
use crate::span::Span;

/// Builds a boxed expression spanning `l..r`.
pub fn expr(kind: ExprKind, l: usize, r: usize) -> Box<Expr> {
    Box::new(Expr::new(kind, Span::new(l, r)))
}

/// Builds a boxed statement spanning `l..r`.
pub fn stmt(kind: StmtKind, l: usize, r: usize) -> Box<Stmt> {
    Box::new(Stmt {
        kind,
        span: Span::new(l, r),
    })
}

/// Unboxes the elements of a list built from boxed grammar values.
pub fn unbox<T>(v: Vec<Box<T>>) -> Vec<T> {
    v.into_iter().map(|b| *b).collect()
}

/// Builds a binary expression spanning `l..r`.
pub fn binary(op: BinOp, a: Box<Expr>, b: Box<Expr>, l: usize, r: usize) -> Box<Expr> {
    expr(ExprKind::Binary(op, a, b), l, r)
}

/// Builds a session expression without properties (the trailer adds them).
pub fn session(
    kind: SessionKind,
    text: Option<StrLit>,
    name: Option<Name>,
    agent: Option<Name>,
) -> SessionExpr {
    SessionExpr {
        kind,
        text,
        name,
        agent,
        props: Vec::new(),
    }
}

/// Sets the properties written on the session's own line (an indented trailer may add more).
pub fn with_props(mut s: Box<SessionExpr>, props: Vec<Property>) -> Box<SessionExpr> {
    s.props = props;
    s
}

/// An object entry written as just a name or member path takes its key from the last name.
pub fn shorthand_entry(value: Expr) -> ObjEntry {
    let key = match &value.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Member(_, n) => n.clone(),
        _ => Name {
            text: String::new(),
            span: value.span,
        },
    };
    ObjEntry { key, value }
}

/// Attaches an indented trailer to the value it follows: properties go to the session the
/// line ends with, pipeline stages wrap the value into a pipeline.
pub fn attach_trailer(cx: &mut ParseCx, mut e: Box<Expr>, t: Option<Trailer>) -> Box<Expr> {
    match t {
        None => e,
        Some(Trailer::Stages(stages)) => {
            let span = stages.last().map(|s| e.span.to(s.span)).unwrap_or(e.span);
            Box::new(Expr::new(ExprKind::Pipeline(e, stages), span))
        }
        Some(Trailer::Props(props)) => {
            let props_span = props
                .iter()
                .map(|p| p.span)
                .reduce(Span::to)
                .unwrap_or(e.span);
            match last_session(&mut e) {
                Some(s) => {
                    s.props.extend(props);
                    e.span = e.span.to(props_span);
                }
                None => cx.problems.push(ParseProblem {
                    code: Code::E137,
                    span: props_span,
                    message: "properties can only follow a session or `resume:`".into(),
                    help: Some("indent these lines under a `session` statement".into()),
                }),
            }
            e
        }
    }
}

/// The session a property block belongs to: the expression itself, or the last step of an
/// arrow sequence.
fn last_session(e: &mut Expr) -> Option<&mut SessionExpr> {
    match &mut e.kind {
        ExprKind::Session(s) => Some(s),
        ExprKind::Arrow(items) => items.last_mut().and_then(last_session),
        _ => None,
    }
}

/// `loop until cond (max: n)` parses `(max: n)` as a call on the condition's last operand;
/// this takes it back off. A trailing call whose arguments are all named is the modifier list,
/// unless it calls a name with arguments other than `max`: that is a program invocation
/// (`loop until check(draft: d)`).
pub fn split_loop_mods(cond: Expr) -> (Expr, Vec<Arg>) {
    let Expr { kind, span } = cond;
    match kind {
        ExprKind::Call(callee, args) if is_modifier_list(&callee, &args) => (*callee, args),
        ExprKind::Binary(op, l, r) => {
            let (r, mods) = split_loop_mods(*r);
            let span = if mods.is_empty() {
                span
            } else {
                l.span.to(r.span)
            };
            (Expr::new(ExprKind::Binary(op, l, Box::new(r)), span), mods)
        }
        ExprKind::Unary(op, x) => {
            let (x, mods) = split_loop_mods(*x);
            let span = if mods.is_empty() {
                span
            } else {
                Span {
                    end: x.span.end,
                    ..span
                }
            };
            (Expr::new(ExprKind::Unary(op, Box::new(x)), span), mods)
        }
        kind => (Expr { kind, span }, Vec::new()),
    }
}

/// Whether `callee(args)` at the end of a loop condition is the loop's modifier list.
fn is_modifier_list(callee: &Expr, args: &[Arg]) -> bool {
    if args.is_empty() || args.iter().any(|a| a.name.is_none()) {
        return false;
    }
    let only_max = args
        .iter()
        .all(|a| a.name.as_ref().is_some_and(|n| n.text == "max"));
    only_max || !matches!(callee.kind, ExprKind::Name(_))
}
