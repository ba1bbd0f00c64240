//! Parsing: runs the lexer and the generated LALRPOP parser, recovers after syntax errors,
//! and turns every problem into a [`Diagnostic`].

pub(crate) mod actions;
mod cascade;
mod misspelt;

use crate::ast::{PipeStage, Program, Property};
use crate::diagnostics::{Code, Diagnostic};
use crate::lexer::{Lexer, Tok};
use crate::source::FileId;
use crate::span::{LineIndex, Span};
use lalrpop_util::{ErrorRecovery, ParseError};
use std::cell::RefCell;

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
    /// The parser's states at each syntax error, for the expected-token lists.
    pub expected: DeferredExpected,
}

/// What could have come next at each syntax error, worked out only for the errors that are
/// reported. The generated parser (as `build.rs` changes it) hands its state stack here at
/// each error and puts a stand-in naming the record in the error's expected list; working
/// out the real list simulates the parse once per terminal, too costly for the many
/// cascades that are dropped.
#[derive(Default)]
pub struct DeferredExpected(RefCell<Vec<Box<[i16]>>>);

/// Starts a stand-in expected list (no terminal's name starts with a NUL).
const DEFERRED: &str = "\0deferred:";

impl DeferredExpected {
    /// Keeps `states` and returns the stand-in list that names them.
    pub(crate) fn defer(&self, states: &[i16]) -> Vec<String> {
        let mut all = self.0.borrow_mut();
        all.push(states.into());
        vec![format!("{DEFERRED}{}", all.len() - 1)]
    }

    /// The real expected list for an error's list (a stand-in or already real).
    fn resolve(&self, expected: Vec<String>) -> Vec<String> {
        let index = match expected.as_slice() {
            [one] => one
                .strip_prefix(DEFERRED)
                .and_then(|i| i.parse::<usize>().ok()),
            _ => None,
        };
        let all = self.0.borrow();
        match index.and_then(|i| all.get(i)) {
            Some(states) => generated::__parse__Program::__expected_tokens_from_states(
                states,
                std::marker::PhantomData,
            ),
            None => expected,
        }
    }
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
    let mut syntax: Vec<ParseError<usize, Tok, NoLexError>> =
        cx.errors.drain(..).map(|e| e.error).collect();
    let program = match result {
        Ok(p) => p,
        Err(e) => {
            syntax.push(e);
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
    let mut code = None;
    let mut cascades: Vec<Span> = Vec::new();
    let mut explained = None;
    let mut brackets: Option<Vec<(usize, usize)>> = None;
    // Where the last reported error is.
    let mut reported = 0;
    for e in syntax {
        let layout = cascade::error_layout(&e);
        let at = error_offset(&e).min(src.len());
        let end = regions.end(at, layout).min(src.len()).max(at);
        // A misspelt keyword on a line after the last reported error is a mistake of its
        // own, even in the block under a broken line (`paralel:`'s branches) or after lines
        // of prose: never a consequence.
        let own = misspelling(src, &e).is_some_and(|m| {
            m.span.start as usize >= reported && src[reported..m.span.start as usize].contains('\n')
        });
        let mut nested = false;
        if let Some(last) = cascades.last_mut() {
            // Where statements that look like code start (only needed after a first error).
            let code = code.get_or_insert_with(|| cascade::code_starts(&program));
            let next_code = code.partition_point(|&c| c < last.end as usize);
            let follows = at < last.end as usize
                || (code.get(next_code).is_none_or(|&c| c >= at) && !regions.line_is_code(at));
            if own && at < last.end as usize {
                // Inside the region of an earlier error: reported, and the region goes on.
                *last = last.to(Span::new(at, end));
                nested = true;
            } else if !own && (follows || layout == cascade::Layout::Dedent) {
                *last = last.to(Span::new(at, end));
                continue;
            }
        }
        if !nested {
            cascades.push(Span::new(at, end));
        }
        reported = at;
        // Only the errors reported are described (a file of errors has many cascades).
        let d = syntax_error(file, src, &lexer.triple_ends, &regions, &cx.expected, e);
        // An error on a later line inside an open bracket: the bracket is the mistake.
        let pairs = brackets.get_or_insert_with(|| bracket_pairs(src));
        let d = match pairs
            .iter()
            .rev()
            .find(|&&(open, close)| open < at && close > at)
            .filter(|&&(open, _)| src[open..at].contains('\n'))
        {
            Some(&(open, _)) => {
                let c = &src[open..open + 1];
                let closer = match c {
                    "(" => ")",
                    "[" => "]",
                    _ => "}",
                };
                Diagnostic::new(
                    d.code,
                    file,
                    Span::new(open, open + 1),
                    format!("`{c}` is never closed"),
                )
                .with_label("opened here")
                .with_secondary(
                    Span::new(at, at.max(d.span.end as usize)),
                    "the statement goes on here",
                )
                .with_help(format!("close it with `{closer}` where its contents end"))
            }
            None => d,
        };
        // A lexical problem already explains this.
        let explained = explained
            .get_or_insert_with(|| Explained::new(src, &diagnostics[..lexical]))
            .explains(&d);
        if !explained {
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

/// Which syntax errors the lexical problems already explain: an error inside malformed
/// text, or after text the lexer swallowed or dropped on the same line (an unterminated
/// literal, an invalid character), or at the end of a file that an unterminated multi-line
/// literal ran into. Each question costs a few binary searches, however many problems.
struct Explained {
    lines: LineIndex,
    /// The problems' starts, sorted.
    starts: Vec<u32>,
    /// The furthest end among the problems up to each one.
    reach: Vec<u32>,
    /// How many of the problems up to each one explain errors later on their line.
    same_line: Vec<u32>,
    /// Whether an unterminated literal runs to the end of the file.
    to_end: bool,
    len: usize,
}

impl Explained {
    fn new(src: &str, lexical: &[Diagnostic]) -> Explained {
        let mut problems: Vec<(u32, u32, Code)> = lexical
            .iter()
            .map(|d| (d.span.start, d.span.end, d.code))
            .collect();
        problems.sort_unstable_by_key(|p| p.0);
        let mut reach = Vec::with_capacity(problems.len());
        let mut same_line = Vec::with_capacity(problems.len());
        let (mut far, mut count) = (0u32, 0u32);
        for &(_, end, code) in &problems {
            far = far.max(end);
            count += u32::from(matches!(code, Code::E001 | Code::E133 | Code::E134));
            reach.push(far);
            same_line.push(count);
        }
        Explained {
            lines: LineIndex::new(src),
            starts: problems.iter().map(|p| p.0).collect(),
            reach,
            same_line,
            to_end: problems
                .iter()
                .any(|p| matches!(p.2, Code::E001 | Code::E133)),
            len: src.len(),
        }
    }

    fn explains(&self, syntax: &Diagnostic) -> bool {
        let at = syntax.span.start;
        // The problems starting at or before the error.
        let upto = self.starts.partition_point(|&s| s <= at);
        if upto == 0 {
            return false;
        }
        if self.reach[upto - 1] >= at || (at as usize >= self.len && self.to_end) {
            return true;
        }
        // The problems on the error's line, before it.
        let line_start = self.lines.line_start(self.lines.line_of(at as usize)) as u32;
        let from = self.starts.partition_point(|&s| s < line_start);
        let before = if from == 0 {
            0
        } else {
            self.same_line[from - 1]
        };
        self.same_line[upto - 1] > before
    }
}

/// The misspelt keyword a parse error comes from, if any.
fn misspelling<'s>(
    src: &'s str,
    e: &'s ParseError<usize, Tok, NoLexError>,
) -> Option<misspelt::Misspelt<'s>> {
    match e {
        ParseError::UnrecognizedToken {
            token: (l, tok, r), ..
        } => misspelt::at_error(src, tok, (*l).min(src.len()), (*r).min(src.len())),
        _ => None,
    }
}

/// Where a parse error is, as its diagnostic will say.
fn error_offset(e: &ParseError<usize, Tok, NoLexError>) -> usize {
    match e {
        ParseError::UnrecognizedToken { token: (l, ..), .. }
        | ParseError::ExtraToken { token: (l, ..) } => *l,
        ParseError::UnrecognizedEof { location, .. } | ParseError::InvalidToken { location } => {
            *location
        }
        ParseError::User { error } => match *error {},
    }
}

/// Code, message and help for an `elif` or `else` the grammar could not attach to an `if`:
/// it follows an `else` (E131 for a second `else`), or no `if` at all.
fn misplaced_clause(
    regions: &cascade::Regions,
    tok: &Tok,
    at: usize,
) -> (Code, &'static str, &'static str) {
    let after_else = regions.follows_else(at);
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

/// Every bracket's offset and its closer's (`usize::MAX` when never closed), by opening
/// offset; worked out only when a syntax error is reported.
fn bracket_pairs(src: &str) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    for (s, t, _) in Lexer::new(src).run().tokens {
        match t {
            Tok::LParen | Tok::LBracket | Tok::LBrace => {
                open.push(pairs.len());
                pairs.push((s, usize::MAX));
            }
            Tok::RParen | Tok::RBracket | Tok::RBrace => {
                if let Some(i) = open.pop() {
                    pairs[i].1 = s;
                }
            }
            _ => {}
        }
    }
    pairs
}

fn syntax_error(
    file: FileId,
    src: &str,
    triple_ends: &[usize],
    regions: &cascade::Regions,
    deferred: &DeferredExpected,
    e: ParseError<usize, Tok, NoLexError>,
) -> Diagnostic {
    match e {
        ParseError::UnrecognizedToken {
            token: (l, tok, r),
            expected,
        } => {
            let expected = expected_list(&deferred.resolve(expected));
            let (code, message, help) = match &tok {
                Tok::Elif | Tok::Else => {
                    let (code, message, help) = misplaced_clause(regions, &tok, l);
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
            let misspelt = misspelt::at_error(src, &tok, l, r);
            let colon = misspelt::missing_colon(src, &tok, l, r);
            let plain = misspelt::plain_condition(src, l);
            let mut d = match (misspelt, colon) {
                // `loop until the draft is good:`: a condition in words goes between `**`.
                (None, None) if plain.is_some() => {
                    let (span, fixed) = plain.expect("matched");
                    Diagnostic::new(code, file, span, "a condition in plain words is not code")
                        .with_label("read as names and operators")
                        .with_help(format!(
                            "a condition the model judges is written between `**`: `{}`",
                            fixed.trim()
                        ))
                }
                // `sesion "x"`, `loop untill done:`, `paralel:`: the word, not parser jargon.
                (Some(m), _) => Diagnostic::new(
                    code,
                    file,
                    m.span,
                    format!("unknown word `{}` where a keyword is expected", m.word),
                )
                .with_label("not a keyword")
                .with_help(format!("did you mean `{}`?", m.keyword)),
                // `(max 3)`
                (None, Some((span, fix))) => {
                    Diagnostic::new(code, file, span, "a name and its value without `:`")
                        .with_label("expected `:` between them")
                        .with_help(format!("did you mean `{fix}`?"))
                }
                (None, None) => {
                    let d =
                        Diagnostic::new(code, file, Span::new(l, r), message).with_label(expected);
                    match help {
                        Some(h) => d.with_help(h),
                        None => d,
                    }
                }
            };
            let before = triple_ends.partition_point(|&end| end <= l);
            if let Some(&end) = before.checked_sub(1).and_then(|i| triple_ends.get(i)) {
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
            .with_label(expected_list(&deferred.resolve(expected)))
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
