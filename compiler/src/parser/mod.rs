//! Parsing: runs the lexer and the generated LALRPOP parser, recovers after syntax errors,
//! and turns every problem into a [`Diagnostic`].

pub(crate) mod actions;
mod cascade;

use crate::ast::{PipeStage, Program, Property};
use crate::diagnostics::{Code, Diagnostic};
use crate::lexer::{Lexer, Spanned, Tok};
use crate::source::FileId;
use crate::span::Span;
use lalrpop_util::{ErrorRecovery, ParseError};

#[allow(clippy::all, missing_docs, unused_parens, dead_code)]
mod generated {
    lalrpop_util::lalrpop_mod!(grammar);
    pub use grammar::*;
}

/// The lexer never fails (its problems are diagnostics), so the parser's lexical error type
/// has no values.
#[derive(Clone, Debug, PartialEq)]
pub enum NoLexError {}

/// An indented block following a simple statement's line.
pub enum Trailer {
    /// Session properties.
    Props(Vec<Property>),
    /// `| op:` pipeline stages on continuation lines.
    Stages(Vec<PipeStage>),
}

/// A problem found by a grammar action.
pub struct ParseProblem {
    /// Code.
    pub code: Code,
    /// Where.
    pub span: Span,
    /// What.
    pub message: String,
    /// Help.
    pub help: Option<String>,
}

/// State threaded through the grammar's actions.
#[derive(Default)]
pub struct ParseCx {
    /// Syntax errors the parser recovered from.
    pub errors: Vec<ErrorRecovery<usize, Tok, NoLexError>>,
    /// Problems found by actions.
    pub problems: Vec<ParseProblem>,
}

/// The result of parsing one file.
pub struct Parsed {
    /// The tree (with `Error` nodes where statements failed to parse).
    pub program: Program,
    /// Lexical and syntax diagnostics.
    pub diagnostics: Vec<Diagnostic>,
    /// Text after each syntax error that is not code either (the rest of its statement):
    /// problems found there are consequences of the error, not new ones.
    pub cascades: Vec<Span>,
    /// Spans of `# prose: ...` comments (lint directives).
    pub directives: Vec<Span>,
}

/// Parses `src` (file `file`), reporting every lexical and syntax problem found.
pub fn parse(file: FileId, src: &str) -> Parsed {
    let mut lexer = Lexer::new(src).run();
    let tokens = std::mem::take(&mut lexer.tokens);
    if let Some(problem) = crate::limits::check(&tokens) {
        lexer.problems.push(problem);
        return Parsed {
            program: Program {
                stmts: Vec::new(),
                span: Span::new(0, src.len()),
            },
            diagnostics: lexer
                .problems
                .iter()
                .map(|p| Diagnostic::new(p.code, file, p.span, p.message.clone()))
                .collect(),
            cascades: Vec::new(),
            directives: std::mem::take(&mut lexer.directives),
        };
    }
    let regions = cascade::Regions::new(&tokens);
    let mut cx = ParseCx::default();
    let result = generated::ProgramParser::new().parse(&mut cx, tokens.into_iter().map(Ok));
    let mut diagnostics: Vec<Diagnostic> = lexer
        .problems
        .iter()
        .map(|p| {
            let d = Diagnostic::new(p.code, file, p.span, p.message.clone());
            match &p.help {
                Some(h) => d.with_help(h.clone()),
                None => d,
            }
        })
        .collect();
    let lexical = diagnostics.len();
    let mut syntax = Vec::new();
    for e in cx.errors.drain(..) {
        let layout = cascade::error_layout(&e.error);
        syntax.push((syntax_error(file, src, &lexer.triple_ends, e.error), layout));
    }
    let program = match result {
        Ok(p) => p,
        Err(e) => {
            let layout = cascade::error_layout(&e);
            syntax.push((syntax_error(file, src, &lexer.triple_ends, e), layout));
            Program {
                stmts: Vec::new(),
                span: Span::new(0, src.len()),
            }
        }
    };
    // One syntax error per statement: later ones on the same logical line or in the
    // indented block under it are cascades of the first, and so are further errors with
    // nothing that looks like code in between or on their own line (lines of prose outside
    // a string, say) and an unexpected end of block after an earlier error (the recovery's
    // leftover).
    let code = cascade::code_starts(&program);
    let mut cascades: Vec<Span> = Vec::new();
    for (d, layout) in syntax {
        let at = d.span.start as usize;
        let end = regions.end(at, layout).min(src.len()).max(at);
        if let Some(last) = cascades.last_mut() {
            let next_code = code.partition_point(|&c| c < last.end as usize);
            let follows = at < last.end as usize
                || (code.get(next_code).is_none_or(|&c| c >= at) && !regions.line_is_code(at));
            if follows || d.message == "unexpected end of indented block" {
                *last = last.to(Span::new(at, end));
                continue;
            }
        }
        cascades.push(Span::new(at, end));
        // A lexical problem already explains this.
        if !diagnostics[..lexical].iter().any(|l| explains(src, l, &d)) {
            diagnostics.push(d);
        }
    }
    // Problems in text that a syntax error made not code are not new problems (a tab in
    // the indentation is: it is about the layout, not the text).
    let mut index = 0;
    diagnostics.retain(|d| {
        index += 1;
        index > lexical || d.code == Code::E132 || !cascade::inside(&cascades, d.span.start)
    });
    for p in cx.problems {
        if cascade::inside(&cascades, p.span.start) {
            continue;
        }
        let d = Diagnostic::new(p.code, file, p.span, p.message);
        diagnostics.push(match p.help {
            Some(h) => d.with_help(h),
            None => d,
        });
    }
    crate::diagnostics::sort(&mut diagnostics);
    Parsed {
        program,
        diagnostics,
        cascades,
        directives: lexer.directives,
    }
}

/// Whether lexical problem `lexical` already explains syntax error `syntax`: the error sits
/// inside the malformed text, or after text the lexer swallowed or dropped on the same line
/// (an unterminated literal, an invalid character), or at the end of a file that an
/// unterminated multi-line literal ran into.
fn explains(src: &str, lexical: &Diagnostic, syntax: &Diagnostic) -> bool {
    let (l, s) = (lexical.span, syntax.span);
    if s.start < l.start {
        return false;
    }
    if s.start <= l.end {
        return true;
    }
    let line_of = |at: u32| src[..(at as usize).min(src.len())].matches('\n').count();
    match lexical.code {
        Code::E001 | Code::E133 => {
            line_of(s.start) == line_of(l.start) || s.start as usize >= src.len()
        }
        Code::E134 => line_of(s.start) == line_of(l.start),
        _ => false,
    }
}

/// The first token of the logical line before the one starting at byte `at` within the same
/// block (lines of blocks nested under it are skipped), or `None` when the line at `at` opens
/// its block or does not start with a token.
fn previous_sibling(tokens: &[Spanned], at: usize) -> Option<&Tok> {
    let is_layout = |t: &Tok| matches!(t, Tok::Newline | Tok::Indent | Tok::Dedent);
    let idx = tokens
        .iter()
        .position(|(l, t, _)| *l == at && !is_layout(t))?;
    if idx > 0 && !is_layout(&tokens[idx - 1].1) {
        return None;
    }
    let mut depth = 0usize;
    let mut first = None;
    for (_, tok, _) in tokens[..idx].iter().rev() {
        match tok {
            Tok::Dedent => depth += 1,
            Tok::Indent if depth == 0 => break,
            Tok::Indent => depth -= 1,
            Tok::Newline if depth == 0 && first.is_some() => break,
            Tok::Newline => {}
            other if depth == 0 => first = Some(other),
            _ => {}
        }
    }
    first
}

/// Code, message and help for an `elif` or `else` the grammar could not attach to an `if`:
/// it follows an `else` (E131 for a second `else`), or no `if` at all.
fn misplaced_clause(src: &str, tok: &Tok, at: usize) -> (Code, &'static str, &'static str) {
    let (tokens, _) = crate::lexer::tokenize(src);
    let after_else = matches!(previous_sibling(&tokens, at), Some(Tok::Else));
    let continues = "`elif` and `else` continue an `if` at its indentation, right after its body";
    match (tok, after_else) {
        (Tok::Elif, true) => (
            Code::E129,
            "`elif` after `else`",
            "move the `elif` before the `else`",
        ),
        (Tok::Elif, false) => (Code::E129, "`elif` without a preceding `if`", continues),
        (_, true) => (
            Code::E131,
            "a second `else` for the same `if`",
            "an `if` takes one `else`; use `elif **condition**:` for another branch",
        ),
        (_, false) => (Code::E130, "`else` without a preceding `if`", continues),
    }
}

fn expected_list(expected: &[String]) -> String {
    let has = |t: &str| expected.iter().any(|e| e == t);
    if has("\"agent\"") && has("\"let\"") {
        return "expected a statement".into();
    }
    if has("IDENT") && has("STR") && has("\"[\"") && has("\"session\"") {
        return "expected an expression".into();
    }
    let mut names: Vec<String> = expected
        .iter()
        .filter(|e| !e.starts_with('!'))
        .map(|e| match e.as_str() {
            "NEWLINE" => "end of line".to_string(),
            "INDENT" => "an indented block".to_string(),
            "DEDENT" => "end of block".to_string(),
            "IDENT" => "a name".to_string(),
            "INT" => "a number".to_string(),
            "FLOAT" => "a number".to_string(),
            "STR" => "a string".to_string(),
            "DISCRETION" => "`**condition**`".to_string(),
            other => format!("`{}`", other.trim_matches('"')),
        })
        .collect();
    names.sort();
    names.dedup();
    match names.len() {
        0 => String::new(),
        1..=6 => format!("expected {}", names.join(", ")),
        _ => format!("expected one of {} and more", names[..6].join(", ")),
    }
}

fn syntax_error(
    file: FileId,
    src: &str,
    triple_ends: &[usize],
    e: ParseError<usize, Tok, NoLexError>,
) -> Diagnostic {
    match e {
        ParseError::UnrecognizedToken {
            token: (l, tok, r),
            expected,
        } => {
            let expected = expected_list(&expected);
            let (code, message, help) = match &tok {
                Tok::Elif | Tok::Else => {
                    let (code, message, help) = misplaced_clause(src, &tok, l);
                    (code, message.to_string(), Some(help.to_string()))
                }
                Tok::Indent => (
                    Code::E005,
                    "unexpected indentation".to_string(),
                    Some("indent lines only inside a block (after a line ending with `:`) or under a session for its properties".to_string()),
                ),
                Tok::Dedent | Tok::Newline => (
                    Code::E005,
                    format!("unexpected {}", tok.describe()),
                    None,
                ),
                _ => (Code::E004, format!("unexpected {}", tok.describe()), None),
            };
            // Layout tokens point at a position, not at text.
            let (l, r) = if matches!(tok, Tok::Newline | Tok::Dedent | Tok::Indent) {
                (l.min(src.len()), l.min(src.len()))
            } else {
                (l, r)
            };
            let mut d = Diagnostic::new(code, file, Span::new(l, r), message).with_label(expected);
            if let Some(h) = help {
                d = d.with_help(h);
            }
            if let Some(&end) = triple_ends.iter().rev().find(|&&end| end <= l) {
                let between = &src[end..l.min(src.len())];
                if !between.contains('\n') {
                    d = d.with_help(
                        "a `\"\"\"` inside a multi-line string ends it; the text after it was read as code. Escape inner quotes as `\\\"` or avoid three in a row",
                    );
                }
            }
            d
        }
        ParseError::UnrecognizedEof { location, expected } => {
            let at = location.min(src.len());
            Diagnostic::new(
                Code::E005,
                file,
                Span::new(at, at),
                "unexpected end of file",
            )
            .with_label(expected_list(&expected))
        }
        ParseError::InvalidToken { location } => Diagnostic::new(
            Code::E004,
            file,
            Span::new(location, location + 1),
            "invalid token",
        ),
        ParseError::ExtraToken { token: (l, tok, r) } => Diagnostic::new(
            Code::E004,
            file,
            Span::new(l, r),
            format!("unexpected {}", tok.describe()),
        ),
        ParseError::User { error } => match error {},
    }
}
