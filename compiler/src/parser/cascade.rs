//! Where a syntax error's consequences end.
//!
//! After a syntax error the parser resumes at the next statement, but the rest of the
//! erroneous statement is usually not code either: the rest of its line, and the indented
//! block under it (session properties after a broken line, text indented by mistake, the
//! lines of a string that ended early). Problems found there are consequences of the first
//! error, not new ones, so they are not reported.

use crate::ast::{walk_stmts, ExprKind, Program, Stmt, StmtKind};
use crate::lexer::{Spanned, Tok};
use crate::span::Span;
use lalrpop_util::ParseError;

/// What kind of token a syntax error is at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The end of a logical line.
    Newline,
    /// An indentation (an indented block where none may start).
    Indent,
    /// The end of an indented block.
    Dedent,
    /// Any other token (or the end of the file).
    Other,
}

fn layout(t: &Tok) -> Layout {
    match t {
        Tok::Newline => Layout::Newline,
        Tok::Indent => Layout::Indent,
        Tok::Dedent => Layout::Dedent,
        _ => Layout::Other,
    }
}

/// The kind of token a parse error is at.
pub fn error_layout<E>(e: &ParseError<usize, Tok, E>) -> Layout {
    match e {
        ParseError::UnrecognizedToken {
            token: (_, t, _), ..
        }
        | ParseError::ExtraToken { token: (_, t, _) } => layout(t),
        _ => Layout::Other,
    }
}

/// The layout of a token stream: each token's start and whether it opens or closes a line
/// or a block.
pub struct Regions {
    starts: Vec<usize>,
    layout: Vec<Layout>,
    /// For tokens that are not layout: whether they are `else`, or a keyword that starts
    /// a statement.
    word: Vec<Word>,
}

/// What matters about a token that is not layout.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Word {
    /// `else`.
    Else,
    /// A keyword that starts a statement.
    Keyword,
    /// Anything else (and layout tokens).
    Other,
}

/// Keywords that start a statement: a line starting with one is code, even broken.
pub(super) fn starts_statement(t: &Tok) -> bool {
    matches!(
        t,
        Tok::Use
            | Tok::Import
            | Tok::Input
            | Tok::Output
            | Tok::Agent
            | Tok::Session
            | Tok::Resume
            | Tok::Let
            | Tok::Const
            | Tok::Do
            | Tok::Block
            | Tok::Parallel
            | Tok::For
            | Tok::Repeat
            | Tok::Loop
            | Tok::Try
            | Tok::Throw
            | Tok::Assert
            | Tok::Choice
            | Tok::If
    )
}

impl Regions {
    /// Records the layout of `tokens` (before they are handed to the parser).
    pub fn new(tokens: &[Spanned]) -> Regions {
        let mut starts = Vec::with_capacity(tokens.len());
        let mut layout = Vec::with_capacity(tokens.len());
        let mut word = Vec::with_capacity(tokens.len());
        for (l, t, _) in tokens {
            starts.push(*l);
            layout.push(self::layout(t));
            word.push(if *t == Tok::Else {
                Word::Else
            } else if starts_statement(t) {
                Word::Keyword
            } else {
                Word::Other
            });
        }
        Regions {
            starts,
            layout,
            word,
        }
    }

    /// Whether the logical line starting with the token at `at` follows, in the same block,
    /// a line that starts with `else` (lines of blocks nested under it are skipped).
    pub fn follows_else(&self, at: usize) -> bool {
        let is_layout = |i: usize| self.layout[i] != Layout::Other;
        let mut idx = self.starts.partition_point(|&s| s < at);
        while idx < self.starts.len() && self.starts[idx] == at && is_layout(idx) {
            idx += 1;
        }
        if idx >= self.starts.len() || self.starts[idx] != at || (idx > 0 && !is_layout(idx - 1)) {
            return false;
        }
        let mut depth = 0usize;
        let mut first = None;
        for i in (0..idx).rev() {
            match self.layout[i] {
                Layout::Dedent => depth += 1,
                Layout::Indent if depth == 0 => break,
                Layout::Indent => depth -= 1,
                Layout::Newline if depth == 0 && first.is_some() => break,
                Layout::Newline => {}
                Layout::Other if depth == 0 => first = Some(i),
                Layout::Other => {}
            }
        }
        first.is_some_and(|i| self.word[i] == Word::Else)
    }

    /// Whether the logical line holding offset `at` starts with a statement keyword (a
    /// broken statement, rather than prose that strayed outside a string).
    pub fn line_is_code(&self, at: usize) -> bool {
        let mut i = self
            .starts
            .partition_point(|&s| s < at)
            .min(self.starts.len());
        while i > 0 && self.layout[i - 1] == Layout::Other {
            i -= 1;
        }
        while self.layout.get(i).is_some_and(|&l| l != Layout::Other) {
            i += 1;
        }
        self.word.get(i) == Some(&Word::Keyword)
    }

    /// The offset where the consequences of a syntax error at `at`, at a token of kind
    /// `at_kind`, end: the end of its logical line and of the indented block under it (or,
    /// when the error is an unexpected indentation, of that block; an unexpected end of
    /// block has no consequences). `usize::MAX` when they run to the end of the file.
    pub fn end(&self, at: usize, at_kind: Layout) -> usize {
        let mut i = self.starts.partition_point(|&s| s < at);
        match at_kind {
            Layout::Dedent => return at,
            Layout::Indent => {
                while self.layout.get(i).is_some_and(|&l| l != Layout::Indent) {
                    i += 1;
                }
            }
            Layout::Newline | Layout::Other => {
                // Layout tokens share their offset with the token after them.
                while i < self.layout.len()
                    && self.starts[i] == at
                    && matches!(self.layout[i], Layout::Indent | Layout::Dedent)
                {
                    i += 1;
                }
                while i < self.layout.len() && self.layout[i] != Layout::Newline {
                    i += 1;
                }
                i += 1;
                if self.layout.get(i) != Some(&Layout::Indent) {
                    return self.starts.get(i).copied().unwrap_or(usize::MAX);
                }
            }
        }
        // Skip the block that opens at `i`.
        let mut depth = 0usize;
        for j in i..self.layout.len() {
            match self.layout[j] {
                Layout::Indent => depth += 1,
                Layout::Dedent => {
                    depth -= 1;
                    if depth == 0 {
                        return self.starts[j];
                    }
                }
                _ => {}
            }
        }
        usize::MAX
    }
}

/// Whether `at` lies inside one of `regions` (in order, not overlapping), after the error
/// that starts it.
pub fn inside(regions: &[Span], at: u32) -> bool {
    let i = regions.partition_point(|r| r.end <= at);
    regions.get(i).is_some_and(|r| r.start < at)
}

/// Whether a parsed statement is evidence of code rather than prose that happened to
/// parse (a bare name, `- text`, `a b` cut short): anything but an expression statement
/// without a construct.
fn looks_like_code(s: &Stmt) -> bool {
    match &s.kind {
        StmtKind::Error => false,
        StmtKind::Expr(e) => !matches!(
            e.kind,
            ExprKind::Name(_)
                | ExprKind::Int(_)
                | ExprKind::Float(_)
                | ExprKind::Str(_)
                | ExprKind::Discretion(_)
                | ExprKind::Bool(_)
                | ExprKind::Null
                | ExprKind::Array(_)
                | ExprKind::Object(_)
                | ExprKind::Member(..)
                | ExprKind::Index(..)
                | ExprKind::Unary(..)
                | ExprKind::Binary(..)
                | ExprKind::Error
        ),
        _ => true,
    }
}

/// The start offsets of the statements that look like code, at any depth, in order.
pub fn code_starts(program: &Program) -> Vec<usize> {
    fn visit(stmts: &[Stmt], out: &mut Vec<usize>) {
        walk_stmts(stmts, &mut |s| {
            if looks_like_code(s) {
                out.push(s.span.start as usize);
            }
            if let StmtKind::BlockDef(b) = &s.kind {
                visit(&b.body.stmts, out);
            }
        });
    }
    let mut out = Vec::new();
    visit(&program.stmts, &mut out);
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::{Layout, Regions};

    fn end_of(src: &str, at: &str, kind: Layout) -> usize {
        let (tokens, _) = crate::lexer::tokenize(src);
        Regions::new(&tokens).end(src.find(at).expect("marker"), kind)
    }

    #[test]
    fn a_broken_line_takes_its_indented_block_with_it() {
        let src = "let a = session \"x\" ]\n  context: a\n  retry: 2\nlet c = 3\n";
        assert_eq!(end_of(src, "]", Layout::Other), src.find("let c").unwrap());
    }

    #[test]
    fn a_broken_line_without_a_block_ends_at_the_next_line() {
        let src = "let a = = 1\nlet b = 2\n";
        assert_eq!(
            end_of(src, "= 1", Layout::Other),
            src.find("let b").unwrap()
        );
    }

    #[test]
    fn an_unexpected_indentation_takes_the_whole_block() {
        let src = "let a = 1\n    - x: {y}\n    - z: {w}\nlet b = 2\n";
        assert_eq!(
            end_of(src, "- x", Layout::Indent),
            src.find("let b").unwrap()
        );
    }

    #[test]
    fn an_error_inside_an_indented_block_takes_its_line_only() {
        let src = "let a = session \"x\"\n  - x: {y}\n  - z: {w}\nlet b = 2\n";
        assert_eq!(end_of(src, "- x", Layout::Other), src.find("- z").unwrap());
        assert_eq!(
            end_of(src, "let b", Layout::Dedent),
            src.find("let b").unwrap()
        );
    }

    #[test]
    fn lines_starting_with_a_statement_keyword_are_code() {
        let src = "let a = = 1\nWrite the plan = = 2\n  if x y\n";
        let (tokens, _) = crate::lexer::tokenize(src);
        let r = Regions::new(&tokens);
        assert!(r.line_is_code(src.find("= 1").unwrap()));
        assert!(!r.line_is_code(src.find("= 2").unwrap()));
        assert!(r.line_is_code(src.find("y").unwrap()));
    }

    #[test]
    fn at_the_end_of_the_file_the_region_is_open() {
        let src = "let a = = 1";
        assert_eq!(end_of(src, "= 1", Layout::Other), usize::MAX);
    }
}
