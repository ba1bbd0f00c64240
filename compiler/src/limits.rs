//! Nesting limits. The parser itself uses an explicit stack, but the tree it builds is
//! walked (and dropped) recursively, so a hostile file of ten thousand `[` could exhaust the
//! thread's stack. These limits, far above anything a real program needs, are checked on the
//! token stream before parsing so such input gets a clear error instead.

use crate::diagnostics::Code;
use crate::lexer::{LexProblem, Spanned, Tok};
use crate::span::Span;

/// Most indentation levels open at once.
pub const MAX_INDENT_DEPTH: usize = 64;
/// Most brackets open at once.
pub const MAX_BRACKET_DEPTH: usize = 64;
/// Most operators in one logical line (each nests the expression tree one level deeper).
pub const MAX_OPERATORS_PER_LINE: usize = 256;

/// Returns the first limit the tokens exceed, as a problem to report.
pub fn check(tokens: &[Spanned]) -> Option<LexProblem> {
    let (mut indent, mut bracket, mut ops) = (0usize, 0usize, 0usize);
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
                bracket += 1;
                (bracket > MAX_BRACKET_DEPTH)
                    .then(|| format!("more than {MAX_BRACKET_DEPTH} nested brackets"))
            }
            Tok::RParen | Tok::RBracket | Tok::RBrace => {
                bracket = bracket.saturating_sub(1);
                None
            }
            Tok::Newline => {
                ops = 0;
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
                (ops > MAX_OPERATORS_PER_LINE).then(|| {
                    format!("more than {MAX_OPERATORS_PER_LINE} operators in one statement line")
                })
            }
            _ => None,
        };
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
