//! Trailing comments in one column. A comment after code goes two spaces after it, except in
//! a run of trailing comments the input had aligned: comments at the same column, on lines
//! with no blank line and no comment line between them (lines of code without a comment may
//! be). The comments of such a run go to one column, two spaces after the longest code among
//! their lines, as gofmt and rustfmt align them. A run stays a run when formatted again, so
//! the layout is a fixed point.

use crate::span::LineIndex;

/// A comment after code, as printed.
#[derive(Clone, Copy, Debug)]
pub struct Trailing {
    /// Where it starts in the output (the code before it ends there).
    pub at: usize,
    /// Where it starts in the input.
    pub input: usize,
    /// Its column in the input.
    pub col: usize,
}

/// Whether the input lines strictly between `a` and `b` are all code: no blank line, no
/// comment line.
fn only_code_between(src: &str, lines: &LineIndex, a: usize, b: usize) -> bool {
    (a + 1..b).all(|l| {
        let start = lines.line_start(l);
        let end = if l + 1 < lines.len() {
            lines.line_start(l + 1)
        } else {
            src.len()
        };
        let text = src[start..end].trim();
        !text.is_empty() && !text.starts_with('#')
    })
}

/// The column of output offset `at`.
fn column(out: &str, at: usize) -> usize {
    let start = out[..at].rfind('\n').map_or(0, |n| n + 1);
    out[start..at].chars().count()
}

/// `out` with the space before each trailing comment put in: two spaces, or as many as
/// bring the comments of an aligned run to one column.
pub fn trailing_comments(src: &str, out: &str, trailing: &[Trailing]) -> String {
    if trailing.is_empty() {
        return out.to_string();
    }
    let lines = LineIndex::new(src);
    let line = |t: &Trailing| lines.line_of(t.input);
    // Each comment's run: consecutive comments join while they share the input column with
    // only code between.
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    for i in 1..=trailing.len() {
        let joins = i < trailing.len() && {
            let (a, b) = (&trailing[i - 1], &trailing[i]);
            a.col == b.col && only_code_between(src, &lines, line(a), line(b))
        };
        if !joins {
            runs.push(start..i);
            start = i;
        }
    }
    let mut result = String::with_capacity(out.len() + trailing.len() * 4);
    let mut copied = 0;
    for run in runs {
        let ends: Vec<usize> = trailing[run.clone()]
            .iter()
            .map(|t| column(out, t.at))
            .collect();
        let target = ends.iter().max().map_or(0, |m| m + 2);
        for (t, end) in trailing[run].iter().zip(ends) {
            result.push_str(&out[copied..t.at]);
            let pad = if target > 0 { target - end } else { 2 };
            result.extend(std::iter::repeat_n(' ', pad));
            copied = t.at;
        }
    }
    result.push_str(&out[copied..]);
    result
}
