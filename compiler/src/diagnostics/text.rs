//! Diagnostics as rustc-style text:
//!
//! ```text
//! error[E007]: undefined agent `reviewr`
//!   --> review.prose:9:10
//!   |
//! 9 | session: reviewr
//!   |          ^^^^^^^
//!   |
//!   = help: define it: `agent reviewr:` with a `model:` and a `prompt:`
//! ```
//!
//! Every position comes from the file's line index, built once, and a line longer than
//! [`MAX_WIDTH`] columns is shown as a window around its labels: rendering a diagnostic
//! costs the same on a megabyte-long line as on a short one.

use super::{Diagnostic, Severity};
use crate::source::{SourceFile, SourceMap};
use crate::span::Span;
use rayon::prelude::*;
use std::io;
use termcolor::{Buffer, Color, ColorSpec, WriteColor};
use unicode_width::UnicodeWidthChar;

/// Widest source line shown whole; longer ones are cut to a window around their labels.
pub const MAX_WIDTH: usize = 160;
/// Columns of context kept on each side of the labels in a cut line.
const CONTEXT: usize = 40;
/// Columns a tab takes.
const TAB: usize = 4;
/// Lines shown between the first and last line of a multi-line label before the rest are
/// elided.
const MIDDLE_LINES: usize = 4;

/// Writes `diags` as rustc-style snippets: code, message, `file:line:col`, the source lines
/// with the labels underlined, and the help line.
/// The text is rendered into memory and written at once: `out` may be an unbuffered
/// terminal stream, where every small write would be a system call.
///
/// Many diagnostics are rendered side by side, in runs of [`RUN`], and written in order.
pub fn render_text(
    out: &mut dyn WriteColor,
    sources: &SourceMap,
    diags: &[Diagnostic],
) -> io::Result<()> {
    let color = out.supports_color();
    let render = |run: &[Diagnostic]| -> io::Result<Buffer> {
        let mut buf = if color {
            Buffer::ansi()
        } else {
            Buffer::no_color()
        };
        for d in run {
            render_one(&mut buf, sources, d)?;
        }
        Ok(buf)
    };
    let runs: Vec<io::Result<Buffer>> = if diags.len() > RUN {
        crate::threads::pool().install(|| diags.par_chunks(RUN).map(render).collect())
    } else {
        vec![render(diags)]
    };
    for buf in runs {
        out.write_all(buf?.as_slice())?;
    }
    out.flush()
}

/// Diagnostics rendered by one thread at a time.
const RUN: usize = 256;

/// A label resolved against its file.
struct Mark<'a> {
    primary: bool,
    message: &'a str,
    /// 0-based lines of its first and last character.
    first: usize,
    last: usize,
    /// Byte offsets of its start and end (end exclusive, at least one past the start
    /// unless at the end of the text).
    start: usize,
    end: usize,
}

fn styles(severity: Severity) -> (ColorSpec, ColorSpec, ColorSpec, ColorSpec) {
    let color = match severity {
        Severity::Error => Color::Red,
        Severity::Warning => Color::Yellow,
    };
    let mut header = ColorSpec::new();
    header.set_fg(Some(color)).set_intense(true).set_bold(true);
    let mut message = ColorSpec::new();
    message.set_bold(true);
    let mut gutter = ColorSpec::new();
    gutter.set_fg(Some(Color::Cyan));
    let mut primary = ColorSpec::new();
    primary.set_fg(Some(color)).set_intense(true);
    (header, message, gutter, primary)
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn line_end(file: &SourceFile, line: usize) -> usize {
    if line + 1 < file.lines().len() {
        file.lines().line_start(line + 1)
    } else {
        file.text.len()
    }
}

/// The line's text without its line break.
fn line_text(file: &SourceFile, line: usize) -> &str {
    let start = file.lines().line_start(line);
    let text = &file.text[start..line_end(file, line)];
    text.trim_end_matches('\n').trim_end_matches('\r')
}

fn mark<'a>(file: &SourceFile, span: Span, message: &'a str, primary: bool) -> Mark<'a> {
    let text = &file.text;
    let start = floor_boundary(text, span.start as usize);
    let mut end = floor_boundary(text, (span.end as usize).max(start));
    let first = file.lines().line_of(start);
    // A span ending right after a line break ends on the line it breaks.
    let mut last = file.lines().line_of(end);
    if last > first && end == file.lines().line_start(last) {
        last -= 1;
        end = start.max(end - 1);
    }
    Mark {
        primary,
        message,
        first,
        last,
        start,
        end,
    }
}

/// Display columns of `text` (tabs expanded).
fn width(text: &str) -> usize {
    text.chars()
        .map(|c| {
            if c == '\t' {
                TAB
            } else {
                c.width().unwrap_or(0)
            }
        })
        .sum()
}

/// Writes `text` with tabs expanded.
fn write_expanded(out: &mut dyn WriteColor, text: &str) -> io::Result<()> {
    let mut rest = text;
    while let Some(i) = rest.find('\t') {
        out.write_all(&rest.as_bytes()[..i])?;
        out.write_all(&[b' '; TAB])?;
        rest = &rest[i + 1..];
    }
    out.write_all(rest.as_bytes())
}

/// Whether `text` takes more than `limit` columns (looking at no more of it than needed).
fn wider_than(text: &str, limit: usize) -> bool {
    let mut w = 0;
    for c in text.chars() {
        w += if c == '\t' {
            TAB
        } else {
            c.width().unwrap_or(0)
        };
        if w > limit {
            return true;
        }
    }
    false
}

/// The part of a line shown: byte range within the line, and whether it was cut at either
/// end. `focus` is the byte range (within the line) the labels cover. The cost is bounded
/// by the width shown, not the line's length.
fn window(line: &str, focus: (usize, usize)) -> (usize, usize, bool, bool) {
    if !wider_than(line, MAX_WIDTH) {
        return (0, line.len(), false, false);
    }
    // About CONTEXT columns before the focus...
    let mut from = floor_boundary(line, focus.0);
    let mut w = 0;
    for c in line[..from].chars().rev() {
        w += if c == '\t' {
            TAB
        } else {
            c.width().unwrap_or(0)
        };
        if w > CONTEXT {
            break;
        }
        from -= c.len_utf8();
    }
    // ...then up to MAX_WIDTH columns in all.
    let mut to = from;
    let mut w = 0;
    for c in line[from..].chars() {
        w += if c == '\t' {
            TAB
        } else {
            c.width().unwrap_or(0)
        };
        if w > MAX_WIDTH && to >= focus.1.min(line.len()) {
            break;
        }
        if w > 2 * MAX_WIDTH {
            break;
        }
        to += c.len_utf8();
    }
    (from, to, from > 0, to < line.len())
}

fn render_one(out: &mut dyn WriteColor, sources: &SourceMap, d: &Diagnostic) -> io::Result<()> {
    let (header, message, gutter, primary_style) = styles(d.severity);
    let mut secondary_style = ColorSpec::new();
    secondary_style.set_fg(Some(Color::Cyan));
    out.set_color(&header)?;
    let word = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    write!(out, "{word}[{}]", d.code)?;
    out.set_color(&message)?;
    writeln!(out, ": {}", d.message)?;
    out.reset()?;
    // Labels by file, the primary's file first.
    let mut files = vec![d.file];
    for l in &d.secondary {
        if !files.contains(&l.file) {
            files.push(l.file);
        }
    }
    let mut gutter_width = 1;
    let mut groups = Vec::new();
    for &f in &files {
        let file = sources.get(f);
        let mut marks = Vec::new();
        if f == d.file {
            marks.push(mark(file, d.span, &d.label, true));
        }
        marks.extend(
            d.secondary
                .iter()
                .filter(|l| l.file == f)
                .map(|l| mark(file, l.span, &l.message, false)),
        );
        let lines = shown_lines(&marks);
        if let Some(&(last, _)) = lines.last() {
            gutter_width = gutter_width.max((last + 1).to_string().len());
        }
        groups.push((file, marks, lines));
    }
    let pad = " ".repeat(gutter_width + 1);
    for (file, marks, lines) in &groups {
        out.set_color(&gutter)?;
        write!(out, "{pad}--> ")?;
        out.reset()?;
        let lc = file.line_col(marks.first().map_or(0, |m| m.start));
        writeln!(out, "{}:{}:{}", file.path, lc.line, lc.column)?;
        out.set_color(&gutter)?;
        writeln!(out, "{pad}|")?;
        out.reset()?;
        let styles = Styles {
            gutter: &gutter,
            primary: &primary_style,
            secondary: &secondary_style,
        };
        render_lines(out, file, marks, lines, gutter_width, &styles)?;
    }
    if let Some(help) = &d.help {
        out.set_color(&gutter)?;
        writeln!(out, "{pad}|")?;
        write!(out, "{pad}= ")?;
        out.reset()?;
        writeln!(out, "help: {help}")?;
    }
    writeln!(out)
}

/// The lines to show (0-based), each with whether it is the first of a run after a gap
/// (`true` when lines were skipped before it).
fn shown_lines(marks: &[Mark]) -> Vec<(usize, bool)> {
    let mut lines = Vec::new();
    for m in marks {
        lines.push(m.first);
        lines.push(m.last);
        if m.last > m.first {
            let middle = m.last - m.first - 1;
            let shown = if middle <= MIDDLE_LINES {
                middle
            } else {
                MIDDLE_LINES / 2
            };
            lines.extend((1..=shown).map(|k| m.first + k));
        }
    }
    lines.sort_unstable();
    lines.dedup();
    let mut out = Vec::with_capacity(lines.len());
    let mut prev: Option<usize> = None;
    for l in lines {
        out.push((l, prev.is_some_and(|p| l > p + 1)));
        prev = Some(l);
    }
    out
}

struct Styles<'a> {
    gutter: &'a ColorSpec,
    primary: &'a ColorSpec,
    secondary: &'a ColorSpec,
}

fn render_lines(
    out: &mut dyn WriteColor,
    file: &SourceFile,
    marks: &[Mark],
    lines: &[(usize, bool)],
    gutter_width: usize,
    styles: &Styles,
) -> io::Result<()> {
    let pad = " ".repeat(gutter_width + 1);
    // The first multi-line label is drawn with a bar down the left; others are shown on
    // their first line.
    let multi = marks.iter().position(|m| m.last > m.first);
    let indent = if multi.is_some() { "  " } else { "" };
    for &(line, gap) in lines {
        if gap {
            out.set_color(styles.gutter)?;
            writeln!(out, "{pad}.")?;
            out.reset()?;
        }
        let text = line_text(file, line);
        let line_start = file.lines().line_start(line);
        // The byte range the labels cover on this line.
        let on_line: Vec<&Mark> = marks
            .iter()
            .enumerate()
            .filter(|(i, m)| {
                if Some(*i) == multi {
                    m.first == line || m.last == line
                } else {
                    m.first == line
                }
            })
            .map(|(_, m)| m)
            .collect();
        let focus = on_line.iter().fold((text.len(), 0), |(a, b), m| {
            let s = m.start.saturating_sub(line_start).min(text.len());
            let e = if m.last == line && m.first == line {
                m.end.saturating_sub(line_start).min(text.len())
            } else if m.first == line {
                s + 1
            } else {
                m.end.saturating_sub(line_start).min(text.len())
            };
            (a.min(s), b.max(e))
        });
        let focus = if focus.0 > focus.1 { (0, 0) } else { focus };
        let (from, to, cut_left, cut_right) = window(text, focus);
        let shown = &text[from..to];
        let lead = if cut_left { 3 } else { 0 };
        // Display column (within the shown text) of a byte offset of the file.
        let col = |at: usize| -> usize {
            let rel = at.saturating_sub(line_start).clamp(from, to);
            lead + width(&text[from..floor_boundary(text, rel)])
        };
        // The bar of the multi-line label, left of the text.
        let bar = match multi.map(|i| &marks[i]) {
            Some(m) if m.first < line && line <= m.last => "| ",
            _ => indent,
        };
        out.set_color(styles.gutter)?;
        write!(out, "{:>w$} | ", line + 1, w = gutter_width)?;
        out.reset()?;
        if let Some(m) = multi.map(|i| &marks[i]) {
            if m.first < line && line <= m.last {
                out.set_color(if m.primary {
                    styles.primary
                } else {
                    styles.secondary
                })?;
                write!(out, "{bar}")?;
                out.reset()?;
            } else {
                write!(out, "{bar}")?;
            }
        }
        if cut_left {
            write!(out, "...")?;
        }
        write_expanded(out, shown)?;
        if cut_right {
            write!(out, "...")?;
        }
        writeln!(out)?;
        // The multi-line label's start and end markers.
        if let Some(m) = multi.map(|i| &marks[i]) {
            let style = if m.primary {
                styles.primary
            } else {
                styles.secondary
            };
            let tip = if m.primary { '^' } else { '-' };
            if m.first == line {
                out.set_color(styles.gutter)?;
                write!(out, "{pad}| ")?;
                out.set_color(style)?;
                writeln!(out, "/{}{tip}", "-".repeat(col(m.start) + 1))?;
                out.reset()?;
            }
            if m.last == line {
                let last_char = floor_boundary(&file.text, m.end.saturating_sub(1)).max(line_start);
                out.set_color(styles.gutter)?;
                write!(out, "{pad}| ")?;
                out.set_color(style)?;
                write!(out, "\\{}{tip}", "-".repeat(col(last_char) + 1))?;
                if !m.message.is_empty() {
                    write!(out, " {}", m.message)?;
                }
                writeln!(out)?;
                out.reset()?;
            }
        }
        // Single-line labels starting here (and other multi-line ones, on their first line).
        let mut singles: Vec<(usize, usize, &Mark)> = marks
            .iter()
            .enumerate()
            .filter(|(i, m)| Some(*i) != multi && m.first == line)
            .map(|(_, m)| {
                let s = col(m.start);
                let e = if m.last == line {
                    col(m.end).max(s + 1)
                } else {
                    col(line_start + text.len()).max(s + 1)
                };
                (s, e, m)
            })
            .collect();
        if singles.is_empty() {
            continue;
        }
        singles.sort_by_key(|(s, _, _)| *s);
        out.set_color(styles.gutter)?;
        write!(out, "{pad}| {indent}")?;
        out.reset()?;
        let mut at = 0;
        for (s, e, m) in &singles {
            if *s < at {
                continue;
            }
            write!(out, "{}", " ".repeat(s - at))?;
            out.set_color(if m.primary {
                styles.primary
            } else {
                styles.secondary
            })?;
            let tip = if m.primary { "^" } else { "-" };
            write!(out, "{}", tip.repeat(e - s))?;
            out.reset()?;
            at = *e;
        }
        // The rightmost label's message on the underline; the others below it.
        let (_, _, last) = singles[singles.len() - 1];
        if !last.message.is_empty() {
            out.set_color(if last.primary {
                styles.primary
            } else {
                styles.secondary
            })?;
            write!(out, " {}", last.message)?;
            out.reset()?;
        }
        writeln!(out)?;
        for (s, _, m) in singles[..singles.len() - 1].iter().rev() {
            if m.message.is_empty() {
                continue;
            }
            out.set_color(styles.gutter)?;
            write!(out, "{pad}| {indent}")?;
            out.set_color(if m.primary {
                styles.primary
            } else {
                styles.secondary
            })?;
            writeln!(out, "{}{}", " ".repeat(*s), m.message)?;
            out.reset()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::Code;
    use termcolor::NoColor;

    fn render(text: &str, diags: impl Fn(usize) -> Vec<Diagnostic>) -> String {
        let mut sm = SourceMap::new();
        let f = sm.add("m.prose", text);
        let mut out = NoColor::new(Vec::new());
        render_text(&mut out, &sm, &diags(f)).expect("render");
        String::from_utf8(out.into_inner()).expect("utf-8")
    }

    #[test]
    fn a_label_with_help() {
        let text = "agent reviewer:\n  model: sonnet\nsession: reviewr\n";
        let at = text.find("reviewr\n").expect("name");
        let got = render(text, |f| {
            vec![Diagnostic::new(
                Code::E007,
                f,
                Span::new(at, at + 7),
                "undefined agent `reviewr`",
            )
            .with_help("did you mean `reviewer`?")]
        });
        assert_eq!(
            got,
            "error[E007]: undefined agent `reviewr`\n  --> m.prose:3:10\n  |\n3 | session: reviewr\n  |          ^^^^^^^\n  |\n  = help: did you mean `reviewer`?\n\n"
        );
    }

    #[test]
    fn a_secondary_label_far_above() {
        let text = "let a = 1\n2\n3\n4\n5\n6\n7\n8\n9\nlet a = 2\n";
        let second = text.rfind("a =").expect("second");
        let got = render(text, |f| {
            vec![Diagnostic::new(
                Code::E019,
                f,
                Span::new(second, second + 1),
                "`a` is declared twice",
            )
            .with_secondary(Span::new(4, 5), "first declared here")]
        });
        assert_eq!(
            got,
            "error[E019]: `a` is declared twice\n   --> m.prose:10:5\n   |\n 1 | let a = 1\n   |     - first declared here\n   .\n10 | let a = 2\n   |     ^\n\n"
        );
    }

    #[test]
    fn a_label_over_several_lines() {
        let text = "let r = {\n  a: 1,\n  b: 2\n}\n";
        let got = render(text, |f| {
            vec![Diagnostic::new(Code::E148, f, Span::new(8, 26), "too large").with_label("here")]
        });
        assert_eq!(
            got,
            "error[E148]: too large\n  --> m.prose:1:9\n  |\n1 |   let r = {\n  | /---------^\n2 | |   a: 1,\n3 | |   b: 2\n4 | | }\n  | \\-^ here\n\n"
        );
    }

    #[test]
    fn long_lines_are_cut_to_a_window_around_the_label() {
        let text = format!("let x = [{}]\n", "1, ".repeat(100_000));
        let at = text.len() / 2;
        let got = render(&text, |f| {
            vec![Diagnostic::new(Code::E004, f, Span::new(at, at + 1), "here").with_label("this")]
        });
        let longest = got.lines().map(str::len).max().unwrap_or(0);
        assert!(longest < 2 * MAX_WIDTH, "a line of {longest} bytes:\n{got}");
        let source = got.lines().nth(3).expect("source line");
        let underline = got.lines().nth(4).expect("underline");
        assert!(
            source.contains("...") && source.ends_with("..."),
            "{source}"
        );
        let caret = underline.find('^').expect("caret");
        assert_eq!(&source[caret..caret + 1], &text[at..at + 1]);
    }

    #[test]
    fn many_diagnostics_come_out_in_order() {
        let text = "session \"x\"\n".repeat(1000);
        let make = |f: usize| -> Vec<Diagnostic> {
            (0..1000)
                .map(|i| {
                    let at = i * 12;
                    Diagnostic::new(Code::W116, f, Span::new(at, at + 7), format!("number {i}"))
                })
                .collect()
        };
        let together = render(&text, make);
        let one_by_one: String = (0..1000)
            .map(|i| render(&text, |f| vec![make(f).swap_remove(i)]))
            .collect();
        assert_eq!(together, one_by_one);
    }

    #[test]
    fn tabs_and_wide_characters_keep_carets_aligned() {
        let text = "\tlet 名前 = {x}\n";
        let at = text.find("{x}").expect("x");
        let got = render(text, |f| {
            vec![Diagnostic::new(
                Code::E140,
                f,
                Span::new(at, at + 3),
                "not a variable",
            )]
        });
        assert!(
            got.contains("1 |     let 名前 = {x}\n  |                ^^^\n"),
            "{got}"
        );
    }
}
