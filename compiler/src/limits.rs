//! Nesting limits. The parser itself uses an explicit stack, but the trees it builds are
//! walked (and dropped) recursively by every later pass: analysis, code generation, the
//! resolved program. A hostile file of ten thousand `[` or `[0]` could exhaust the thread's
//! stack. These limits, far above anything a real program needs, are checked on the token
//! stream before parsing, so such input gets a clear error instead, and they bound the depth
//! of every tree and so of every recursive pass.

use crate::diagnostics::Code;
use crate::lexer::{LexProblem, Spanned, Tok};
use crate::span::Span;

/// Most indentation levels open at once.
pub const MAX_INDENT_DEPTH: usize = 64;
/// Most brackets open at once.
pub const MAX_BRACKET_DEPTH: usize = 64;
/// Most operators, calls, indexes and member accesses on the way from the top of an
/// expression to any part of it (each nests the tree one level deeper).
pub const MAX_OPERATORS_PER_LINE: usize = 256;

/// Whether a token ends an operand, so that a `(` or `[` right after it is a call or an
/// index (nesting the tree one level deeper) rather than a new parenthesis or list.
fn ends_operand(tok: &Tok) -> bool {
    matches!(
        tok,
        Tok::Ident(_)
            | Tok::Int(_)
            | Tok::Float(_)
            | Tok::Str(_)
            | Tok::Discretion(_)
            | Tok::True
            | Tok::False
            | Tok::Null
            | Tok::From
            | Tok::Option
            | Tok::RParen
            | Tok::RBracket
            | Tok::RBrace
    )
}

/// Returns the first limit the tokens exceed, as a problem to report.
pub fn check(tokens: &[Spanned]) -> Option<LexProblem> {
    let mut indent = 0usize;
    // Operators on the path from the top of the line's expression to the current token. The
    // elements of a bracket are siblings: a comma goes back to the count where the bracket
    // opened, and so does its closing.
    let mut ops = 0usize;
    let mut open: Vec<usize> = Vec::new();
    let mut after_operand = false;
    for (l, tok, r) in tokens {
        let exceeded = match tok {
            Tok::Indent => {
                indent += 1;
                (indent > MAX_INDENT_DEPTH)
                    .then(|| format!("more than {MAX_INDENT_DEPTH} nested indentation levels"))
            }
            Tok::Dedent => {
                indent = indent.saturating_sub(1);
                None
            }
            Tok::LParen | Tok::LBracket | Tok::LBrace => {
                if after_operand && *tok != Tok::LBrace {
                    ops += 1;
                }
                open.push(ops);
                if open.len() > MAX_BRACKET_DEPTH {
                    Some(format!("more than {MAX_BRACKET_DEPTH} nested brackets"))
                } else {
                    too_deep(ops)
                }
            }
            Tok::RParen | Tok::RBracket | Tok::RBrace => {
                ops = open.pop().unwrap_or(0);
                None
            }
            Tok::Comma => {
                if let Some(&at) = open.last() {
                    ops = at;
                }
                None
            }
            Tok::Newline => {
                ops = 0;
                open.clear();
                None
            }
            Tok::Plus
            | Tok::Minus
            | Tok::Not
            | Tok::And
            | Tok::Or
            | Tok::EqEq
            | Tok::NotEq
            | Tok::Lt
            | Tok::Le
            | Tok::Gt
            | Tok::Ge
            | Tok::Is
            | Tok::Arrow
            | Tok::Dot
            | Tok::Pipe => {
                ops += 1;
                too_deep(ops)
            }
            _ => None,
        };
        after_operand = ends_operand(tok);
        if let Some(message) = exceeded {
            return Some(LexProblem {
                code: Code::E145,
                span: Span::new(*l, *r),
                message: format!("program nests too deeply: {message}"),
                help: Some("split the construct into smaller blocks or variables".into()),
            });
        }
    }
    None
}

fn too_deep(ops: usize) -> Option<String> {
    (ops > MAX_OPERATORS_PER_LINE).then(|| {
        format!(
            "an expression nests more than {MAX_OPERATORS_PER_LINE} operators, calls, indexes or member accesses deep"
        )
    })
}
