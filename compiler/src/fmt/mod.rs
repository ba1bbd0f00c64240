//! `prosec fmt`: one canonical layout for `.prose` files.
//!
//! The formatter works from the real lexer's tokens (with the parser's tree where spacing
//! depends on the construct) and a trivia side-table of comments and blank lines read from
//! the gaps between tokens ([`trivia`]). It re-indents every block by the configured width,
//! puts one space (or none) between tokens by fixed rules, keeps each comment on its line
//! (own-line comments at the indentation of the code they sit in, trailing ones two spaces
//! after the code, or in one column with the others of their run when they were aligned:
//! [`align`]), keeps at most one blank line in a row, and ends the file with one line
//! break. Tokens are written as they were: string contents never change. Line breaks inside
//! brackets are kept, with continuation lines indented one step per open bracket.
//!
//! Before returning, the output is lexed again and must give the same tokens as the input,
//! so a formatted program always means the same.

mod align;
pub mod config;
mod spacing;
pub mod trivia;

use crate::ast::{visit_exprs, ExprKind};
use crate::diagnostics::Diagnostic;
use crate::lexer::{Lexer, Spanned, Tok};
use crate::span::Span;
use rustc_hash::FxHashSet;
use trivia::Trivia;

pub use config::FmtOptions;

/// Why a file cannot be formatted.
#[derive(Debug)]
pub enum FmtError {
    /// The file has lexical or syntax errors (formatting needs a well-formed program).
    Syntax(Vec<Diagnostic>),
    /// A layout the configured indentation cannot express (such as a line dedented to a
    /// column between two levels with an indent width of 1).
    Layout {
        /// Where.
        span: Span,
        /// Why.
        message: String,
    },
}

impl std::fmt::Display for FmtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FmtError::Syntax(d) => write!(f, "the file has {} syntax error(s)", d.len()),
            FmtError::Layout { message, .. } => f.write_str(message),
        }
    }
}

/// An open indentation level: the column it had in the input and the one it gets.
#[derive(Clone, Copy, Debug)]
struct Level {
    orig: usize,
    col: usize,
}

/// Formats `src`, returning the canonical text.
pub fn format(src: &str, options: &FmtOptions) -> Result<String, FmtError> {
    let parsed = crate::parser::parse(0, src);
    let errors: Vec<Diagnostic> = parsed
        .diagnostics
        .into_iter()
        .filter(Diagnostic::is_error)
        .collect();
    if !errors.is_empty() {
        return Err(FmtError::Syntax(errors));
    }
    let tokens = Lexer::new(src).run().tokens;
    let spaced = spaced_parens(&parsed.program.stmts, &tokens);
    let (out, trailing) = Printer::new(src, options.indent_width, &spaced).print(&tokens)?;
    let out = align::trailing_comments(src, &out, &trailing);
    let again = Lexer::new(&out).run().tokens;
    if !same_tokens(src, &tokens, &out, &again) {
        // A bug in these rules, never the user's: refuse rather than change the program.
        return Err(FmtError::Layout {
            span: Span::new(0, 0),
            message: "internal error: the formatted text would lex differently; the file was left as it is".into(),
        });
    }
    Ok(out)
}

/// Whether two token streams are the same program: the same kinds, and for tokens with
/// text, the same text.
fn same_tokens(a_src: &str, a: &[Spanned], b_src: &str, b: &[Spanned]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((s1, t1, e1), (s2, t2, e2))| {
            std::mem::discriminant(t1) == std::mem::discriminant(t2)
                && (matches!(t1, Tok::Newline | Tok::Indent | Tok::Dedent)
                    || a_src[*s1..*e1] == b_src[*s2..*e2])
        })
}

/// Start offsets of the `(` of loop modifiers (`loop until done (max: 3):`), which the
/// grammar reads like a call but which are written apart from the condition.
fn spaced_parens(stmts: &[crate::ast::Stmt], tokens: &[Spanned]) -> FxHashSet<usize> {
    let mut out = FxHashSet::default();
    visit_exprs(stmts, &mut |e| {
        if let ExprKind::Loop(l) = &e.kind {
            if let Some(first) = l.mods.first() {
                let before = first.value.span.start as usize;
                let at = tokens.partition_point(|t| t.0 < before);
                if let Some((s, _, _)) = tokens[..at]
                    .iter()
                    .rev()
                    .find(|t| matches!(t.1, Tok::LParen))
                {
                    out.insert(*s);
                }
            }
        }
    });
    out
}

/// The column a comment line goes to: the level (among those open before the line break
/// and the one after it) whose input column is the largest not past the comment's.
fn comment_col(col: usize, before: &[Level], after: &[Level]) -> usize {
    before
        .iter()
        .chain(after.last())
        .filter(|l| l.orig <= col)
        .max_by_key(|l| (l.orig, l.col))
        .map_or(0, |l| l.col)
}

struct Printer<'s> {
    src: &'s str,
    width: usize,
    spaced: &'s FxHashSet<usize>,
    out: String,
    /// Where the text proper starts (after a byte-order mark, which is kept).
    body: usize,
    /// The comments after code, written without the space before them (added by
    /// [`align::trailing_comments`]).
    trailing: Vec<align::Trailing>,
}

impl<'s> Printer<'s> {
    fn new(src: &'s str, width: usize, spaced: &'s FxHashSet<usize>) -> Printer<'s> {
        let body = if src.starts_with('\u{feff}') { 3 } else { 0 };
        let mut out = String::with_capacity(src.len() + src.len() / 8);
        out.push_str(&src[..body]);
        Printer {
            src,
            width,
            spaced,
            out,
            body,
            trailing: Vec::new(),
        }
    }

    /// A comment after code on its line (`c`, a slice of the source, at input column
    /// `col`).
    fn trailing_comment(&mut self, c: &str, col: usize) {
        self.trailing.push(align::Trailing {
            at: self.out.len(),
            input: c.as_ptr() as usize - self.src.as_ptr() as usize,
            col,
        });
        self.out.push_str(c);
    }

    fn indent(&mut self, col: usize) {
        self.out.extend(std::iter::repeat_n(' ', col));
    }

    fn column_of(&self, offset: usize) -> usize {
        offset - self.src[..offset].rfind('\n').map_or(self.body, |n| n + 1)
    }

    /// The text, and the comments after code in it (without the space before them).
    fn print(mut self, tokens: &[Spanned]) -> Result<(String, Vec<align::Trailing>), FmtError> {
        let mut levels = vec![Level { orig: 0, col: 0 }];
        let mut before = levels.clone();
        let mut last_popped: Option<usize> = None;
        let mut line_start = true;
        let mut prev: Option<&Spanned> = None;
        let mut brackets = 0usize;
        let mut unary_minus = false;
        for t @ (s, tok, e) in tokens {
            match tok {
                Tok::Newline => {
                    line_start = true;
                    before.clone_from(&levels);
                    last_popped = None;
                    continue;
                }
                Tok::Indent => {
                    let top = levels.last().map_or(0, |l| l.col);
                    let col = match last_popped {
                        // A line dedented to a column between two levels: it must stay
                        // between them, or the program would change.
                        Some(popped) if popped - top < 2 => {
                            return Err(FmtError::Layout {
                                span: Span::new(*s, *s),
                                message: "this line sits between two indentation levels, which an indent width below 2 cannot express".into(),
                            })
                        }
                        Some(popped) => top + (popped - top) / 2,
                        None => top + self.width,
                    };
                    levels.push(Level {
                        orig: self.column_of(*s),
                        col,
                    });
                    last_popped = None;
                    continue;
                }
                Tok::Dedent => {
                    last_popped = levels.pop().map(|l| l.col);
                    continue;
                }
                _ => {}
            }
            last_popped = None;
            let gap = trivia::scan(self.src, prev.map_or(self.body, |p| p.2), *s);
            if line_start {
                self.line_gap(&gap, &before, &levels, false);
                self.indent(levels.last().map_or(0, |l| l.col));
                brackets = 0;
            } else if gap.iter().any(|g| matches!(g, Trivia::Newline)) {
                let base = levels.last().map_or(0, |l| l.col);
                let closing = matches!(tok, Tok::RParen | Tok::RBracket | Tok::RBrace);
                let own = base + self.width * brackets.saturating_sub(usize::from(closing));
                self.inner_gap(&gap, base + self.width * brackets, own);
            } else if let Some((_, p, _)) = prev {
                if spacing::space_between(p, unary_minus, tok, self.spaced.contains(s)) {
                    self.out.push(' ');
                }
            }
            self.out.push_str(&self.src[*s..*e]);
            unary_minus =
                matches!(tok, Tok::Minus) && !prev.is_some_and(|p| spacing::ends_operand(&p.1));
            match tok {
                Tok::LParen | Tok::LBracket | Tok::LBrace => brackets += 1,
                Tok::RParen | Tok::RBracket | Tok::RBrace => brackets = brackets.saturating_sub(1),
                _ => {}
            }
            prev = Some(t);
            line_start = false;
        }
        let gap = trivia::scan(self.src, prev.map_or(self.body, |p| p.2), self.src.len());
        self.line_gap(&gap, &before, &levels, true);
        Ok((self.out, self.trailing))
    }

    /// The gap between two logical lines (or before the first, or after the last): the
    /// previous line's trailing comment, then comment lines and at most one blank line
    /// between any two of them.
    fn line_gap(&mut self, gap: &[Trivia<'_>], before: &[Level], after: &[Level], at_end: bool) {
        let mut at_begin = self.out.len() == self.body;
        let mut blank = false;
        for g in gap {
            match *g {
                Trivia::Newline if at_begin => blank = true,
                Trivia::Newline => {
                    self.out.push('\n');
                    at_begin = true;
                }
                Trivia::Comment(c, col) if !at_begin => self.trailing_comment(c, col),
                Trivia::Comment(c, col) => {
                    if blank && self.out.len() > self.body {
                        self.out.push('\n');
                    }
                    blank = false;
                    let col = comment_col(col, before, after);
                    self.indent(col);
                    self.out.push_str(c);
                    at_begin = false;
                }
            }
        }
        if !at_begin {
            self.out.push('\n');
        }
        if blank && !at_end && self.out.len() > self.body {
            self.out.push('\n');
        }
    }

    /// A line break inside brackets: trailing and own-line comments kept, blank lines
    /// dropped, and the next token on a continuation line at `own`.
    fn inner_gap(&mut self, gap: &[Trivia<'_>], cont: usize, own: usize) {
        let mut at_begin = false;
        for g in gap {
            match *g {
                Trivia::Newline => at_begin = true,
                Trivia::Comment(c, col) if !at_begin => self.trailing_comment(c, col),
                Trivia::Comment(c, _) => {
                    self.out.push('\n');
                    self.indent(cont);
                    self.out.push_str(c);
                    at_begin = false;
                }
            }
        }
        self.out.push('\n');
        self.indent(own);
    }
}

#[cfg(test)]
mod tests;
