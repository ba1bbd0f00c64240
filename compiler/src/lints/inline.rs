//! `# prose: allow(CODE, ...)` comments: silence lints for one statement.
//!
//! A comment after code applies to its own line; a comment on a line of its own applies to
//! the next line that holds code. Either way it covers that line and every statement that
//! starts on it, whole: its indented block or properties, and any multi-line string in it.
//!
//! ```prose
//! # prose: allow(E140)
//! session "Fill in {placeholder} for the reader"
//!
//! let draft = session "Draft {section}"   # prose: allow(E140, W109)
//! ```

use crate::ast::{walk_stmts, Program, Stmt, StmtKind};
use crate::diagnostics::Code;
use crate::span::{LineIndex, Span};

/// The ranges of a file where some lints are allowed by comments.
#[derive(Debug, Default)]
pub struct Allows {
    ranges: Vec<(Span, Vec<Code>)>,
}

impl Allows {
    /// Reads the allow comments at `directives` (spans of `# prose: ...` comments) of
    /// `src`, parsed as `program`. Returns the allows, and each comment that could not be
    /// read with why.
    pub fn new(src: &str, directives: &[Span], program: &Program) -> (Allows, Vec<(Span, String)>) {
        let mut allows = Allows::default();
        let mut problems = Vec::new();
        if directives.is_empty() {
            return (allows, problems);
        }
        let lines = LineIndex::new(src);
        let stmts = statement_spans(program);
        for &d in directives {
            let codes = match codes(&src[d.range()]) {
                Ok(codes) => codes,
                Err(why) => {
                    problems.push((d, why));
                    continue;
                }
            };
            let Some(line) = target_line(src, &lines, d) else {
                continue;
            };
            let start = lines.line_start(line);
            let end = if line + 1 < lines.len() {
                lines.line_start(line + 1)
            } else {
                src.len()
            };
            // Statements starting on the line, whole.
            let first = stmts.partition_point(|s| (s.start as usize) < start);
            let covered = stmts[first..]
                .iter()
                .take_while(|s| (s.start as usize) < end)
                .map(|s| s.end as usize)
                .fold(end, usize::max);
            allows.ranges.push((Span::new(start, covered), codes));
        }
        (allows, problems)
    }

    /// Whether a comment allows `code` at offset `at`.
    pub fn allows(&self, code: Code, at: u32) -> bool {
        self.ranges
            .iter()
            .any(|(span, codes)| span.start <= at && at < span.end && codes.contains(&code))
    }
}

/// The codes of a `# prose: allow(...)` comment.
fn codes(comment: &str) -> Result<Vec<Code>, String> {
    let usage = "write `# prose: allow(CODE, ...)`".to_string();
    let rest = comment
        .trim_start_matches('#')
        .trim_start()
        .strip_prefix("prose:")
        .ok_or_else(|| usage.clone())?
        .trim();
    let list = rest
        .strip_prefix("allow")
        .map(str::trim_start)
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.trim_end().strip_suffix(')'))
        .ok_or_else(|| usage.clone())?;
    let mut out = Vec::new();
    for word in list.split(',').map(str::trim) {
        let code = Code::parse(word).ok_or_else(|| format!("`{word}` is not a diagnostic code"))?;
        if !code.is_lint() {
            return Err(format!("{code} cannot be allowed: it is not a lint"));
        }
        out.push(code);
    }
    Ok(out)
}

/// The line a comment applies to: its own when it follows code, else the next line that
/// holds code.
fn target_line(src: &str, lines: &LineIndex, comment: Span) -> Option<usize> {
    let line = lines.line_of(comment.start as usize);
    let start = lines.line_start(line);
    if !src[start..comment.start as usize].trim().is_empty() {
        return Some(line);
    }
    (line + 1..lines.len()).find(|&l| {
        let from = lines.line_start(l);
        let to = if l + 1 < lines.len() {
            lines.line_start(l + 1)
        } else {
            src.len()
        };
        let text = src[from..to].trim();
        !text.is_empty() && !text.starts_with('#')
    })
}

/// The spans of every statement, at any depth, by start.
fn statement_spans(program: &Program) -> Vec<Span> {
    fn visit(stmts: &[Stmt], out: &mut Vec<Span>) {
        walk_stmts(stmts, &mut |s| {
            out.push(s.span);
            if let StmtKind::BlockDef(b) = &s.kind {
                visit(&b.body.stmts, out);
            }
        });
    }
    let mut out = Vec::new();
    visit(&program.stmts, &mut out);
    out.sort_by_key(|s| s.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_read() {
        assert_eq!(codes("# prose: allow(E140)"), Ok(vec![Code::E140]));
        assert_eq!(
            codes("#prose:allow( e140 , W104 )"),
            Ok(vec![Code::E140, Code::W104])
        );
        assert!(codes("# prose: alow(E140)").is_err());
        assert!(codes("# prose: allow(E999)").is_err());
        assert!(codes("# prose: allow(E007)").is_err());
        assert!(codes("# prose: allow E140").is_err());
    }
}
