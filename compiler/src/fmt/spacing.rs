//! Whether one space or none goes between two tokens on the same line.

use crate::lexer::Tok;

/// Whether a token can end an operand (so a following `-` is binary, `(` a call and `[` an
/// index).
pub fn ends_operand(t: &Tok) -> bool {
    matches!(
        t,
        Tok::Ident(_)
            | Tok::Int(_)
            | Tok::Float(_)
            | Tok::Str(_)
            | Tok::Discretion(_)
            | Tok::RParen
            | Tok::RBracket
            | Tok::RBrace
            | Tok::True
            | Tok::False
            | Tok::Null
            | Tok::From
            | Tok::Option
    )
}

/// Whether a space goes between `prev` and `next`. `after_unary_minus` says `prev` is a
/// unary `-`; `spaced_paren` that `next` opens a loop's modifiers.
pub fn space_between(prev: &Tok, after_unary_minus: bool, next: &Tok, spaced_paren: bool) -> bool {
    if after_unary_minus {
        return false;
    }
    match next {
        Tok::Comma | Tok::Colon | Tok::RParen | Tok::RBracket | Tok::Dot => return false,
        Tok::RBrace => return !matches!(prev, Tok::LBrace),
        Tok::LParen if !spaced_paren && ends_operand(prev) => return false,
        Tok::LBracket if ends_operand(prev) => return false,
        _ => {}
    }
    !matches!(prev, Tok::LParen | Tok::LBracket | Tok::Dot)
}
