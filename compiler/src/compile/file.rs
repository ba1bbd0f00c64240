//! One file's own work, which needs nothing from other files but its imports' contracts:
//! decoding and parsing ([`Front`]), then analysis, the filtering of consequences of
//! earlier errors, and the lint levels ([`finish`]). Diagnostics are made against
//! [`PENDING`] and given the file's id when the file takes its place in the compilation.

use crate::ast::{Program, StmtKind};
use crate::diagnostics::{self, Code, Diagnostic};
use crate::lints::{self, Levels};
use crate::parser::{self, Parsed};
use crate::sema::{self, Analysis, ImportStatus};
use crate::source::{FileId, SourceFile};
use crate::span::Span;
use std::collections::HashMap;
use std::path::PathBuf;

/// The file id of diagnostics made before the file has its place in the source map.
pub const PENDING: FileId = FileId::MAX;

/// A file read, decoded and parsed.
pub struct Front {
    /// How the user named it.
    pub display: String,
    /// Its canonical path (or the name given for in-memory sources).
    pub canonical: PathBuf,
    /// Whether a `prose.toml` above it counts (the file is on disk).
    pub on_disk: bool,
    /// The text (undecodable bytes as `?`).
    pub text: String,
    /// The parse, or the first undecodable byte and why.
    pub parsed: Result<Parsed, (usize, String)>,
}

impl Front {
    /// Decodes and parses a file's bytes.
    pub fn from_bytes(display: String, canonical: PathBuf, on_disk: bool, bytes: Vec<u8>) -> Front {
        match crate::decode_source(bytes) {
            Ok(text) => Front::from_text(display, canonical, on_disk, text),
            Err((at, msg, text)) => Front {
                display,
                canonical,
                on_disk,
                text,
                parsed: Err((at, msg)),
            },
        }
    }

    /// Parses a file's text.
    pub fn from_text(display: String, canonical: PathBuf, on_disk: bool, text: String) -> Front {
        let parsed = parser::parse(PENDING, &text);
        Front {
            display,
            canonical,
            on_disk,
            text,
            parsed: Ok(parsed),
        }
    }

    /// The `use` paths the file imports (valid ones, each once, in order).
    pub fn uses(&self) -> Vec<(String, Span)> {
        let Ok(parsed) = &self.parsed else {
            return Vec::new();
        };
        let mut out: Vec<(String, Span)> = Vec::new();
        for stmt in &parsed.program.stmts {
            if let StmtKind::Use { path, .. } = &stmt.kind {
                let text = path.raw_text();
                if sema::valid_use_path(&text) && !out.iter().any(|(t, _)| *t == text) {
                    out.push((text, path.span));
                }
            }
        }
        out
    }
}

/// A file analysed: what the compilation keeps of it.
pub struct Finished {
    /// Its canonical path.
    pub canonical: PathBuf,
    /// Its text, indexed, under the name the user gave.
    pub source: SourceFile,
    /// Its analysis (the diagnostics moved out).
    pub analysis: Analysis,
    /// Its diagnostics, against [`PENDING`], sorted, with their final severities.
    pub diagnostics: Vec<Diagnostic>,
}

/// Analyses a parsed file whose imports are resolved (`statuses`, and `diags` from
/// resolving them), keeping the diagnostics that are not consequences of earlier ones, at
/// the levels `levels` gives. With `check_only`, the resolved program is not kept.
pub fn finish(
    front: Front,
    statuses: &HashMap<String, ImportStatus>,
    mut diags: Vec<Diagnostic>,
    levels: &Levels,
    check_only: bool,
) -> Finished {
    let Front {
        display,
        canonical,
        text,
        parsed,
        ..
    } = front;
    let parsed = match parsed {
        Ok(p) => p,
        Err((at, msg)) => {
            // A file that is not text is not checked further: one error, at the first bad
            // byte (the text has `?` for each bad byte, so offsets are the file's).
            let d = Diagnostic::new(Code::E135, PENDING, Span::new(at, at + 1), msg)
                .with_help("save the file as UTF-8; nothing else in it was checked");
            return Finished {
                canonical,
                source: SourceFile::new(display, text),
                analysis: Analysis::default(),
                diagnostics: vec![d],
            };
        }
    };
    // Text already reported as malformed (an oversized number read as 0, an unterminated
    // string), or made not code by a syntax error: semantic checks that look inside it only
    // see the lexer's stand-in or the parser's guess.
    let malformed = Covered::new(
        parsed
            .diagnostics
            .iter()
            .map(|d| d.span)
            .filter(|s| s.start < s.end)
            .chain(parsed.cascades.iter().copied())
            .collect(),
    );
    diags.extend(parsed.diagnostics);
    let program: Program = parsed.program;
    let mut analysis = sema::analyze(PENDING, &program, statuses);
    // A name reported as undefined may be declared by a statement that failed to parse.
    let unparsed: Vec<&str> = sema::unparsed_spans(&program)
        .into_iter()
        .filter_map(|s| text.get(s.range()))
        .collect();
    diags.extend(
        std::mem::take(&mut analysis.diagnostics)
            .into_iter()
            .filter(|d| !malformed.covers(d.span))
            .filter(|d| {
                !matches!(
                    d.code,
                    Code::E007 | Code::E025 | Code::E105 | Code::E108 | Code::E140
                ) || !text
                    .get(d.span.range())
                    // `{name.path}` of E140: the variable is `name`.
                    .map(|t| {
                        t.trim_start_matches('{')
                            .split(['.', '[', '}'])
                            .next()
                            .unwrap_or(t)
                    })
                    .is_some_and(|name| unparsed.iter().any(|u| mentions(u, name)))
            }),
    );
    let (allows, bad) = lints::inline::Allows::new(&text, &parsed.directives, &program);
    for (span, why) in bad {
        diags.push(
            Diagnostic::new(
                Code::W120,
                PENDING,
                span,
                "this lint comment is not understood",
            )
            .with_help(why),
        );
    }
    diags.retain_mut(|d| {
        if d.code.is_lint() && allows.allows(d.code, d.span.start) {
            return false;
        }
        match levels.severity(d.code) {
            Some(severity) => {
                d.severity = severity;
                true
            }
            None => false,
        }
    });
    diagnostics::sort(&mut diags);
    if check_only {
        analysis.program = Default::default();
    }
    let source = SourceFile::new(display, text);
    if !diags.is_empty() {
        // Index the lines here, on this thread, for reporting.
        source.lines();
    }
    Finished {
        canonical,
        source,
        analysis,
        diagnostics: diags,
    }
}

/// Spans of text, asked whether one of them covers a span: a binary search, however many.
struct Covered {
    /// The spans, by start.
    spans: Vec<Span>,
    /// The furthest end among the spans up to each one.
    reach: Vec<u32>,
}

impl Covered {
    fn new(mut spans: Vec<Span>) -> Covered {
        spans.sort_unstable_by_key(|s| s.start);
        let mut far = 0;
        let reach = spans
            .iter()
            .map(|s| {
                far = far.max(s.end);
                far
            })
            .collect();
        Covered { spans, reach }
    }

    /// Whether one span starts at or before `span` and ends at or after it.
    fn covers(&self, span: Span) -> bool {
        let upto = self.spans.partition_point(|s| s.start <= span.start);
        upto > 0 && self.reach[upto - 1] >= span.end
    }
}

/// Whether `text` contains `name` as a whole word (names may contain `-` and `_`).
fn mentions(text: &str, name: &str) -> bool {
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    !name.is_empty()
        && text.match_indices(name).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + name.len()..].chars().next();
            !before.is_some_and(is_name_char) && !after.is_some_and(is_name_char)
        })
}
