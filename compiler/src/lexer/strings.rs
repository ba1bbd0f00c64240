//! Lexing of string literals, discretion text and `{interpolation}` groups.

use super::{is_name_char, is_name_start, LexProblem, Lexer, Tok};
use crate::ast::{Interp, PathSeg, StrLit, StrPart};
use crate::diagnostics::Code;
use crate::span::Span;

/// Accumulates the parts of a string literal.
struct PartsBuilder {
    parts: Vec<StrPart>,
    text: String,
}

impl PartsBuilder {
    fn new() -> Self {
        PartsBuilder {
            parts: Vec::new(),
            text: String::new(),
        }
    }

    fn interp(&mut self, i: Interp) {
        if !self.text.is_empty() {
            self.parts
                .push(StrPart::Text(std::mem::take(&mut self.text)));
        }
        self.parts.push(StrPart::Interp(Box::new(i)));
    }

    fn finish(mut self) -> Vec<StrPart> {
        if !self.text.is_empty() || self.parts.is_empty() {
            self.parts.push(StrPart::Text(self.text));
        }
        self.parts
    }
}

/// Tries to read a `{root.path[0]}` group at `at` (which holds `{`). Returns the group and
/// the offset after its closing brace.
fn scan_interp(src: &str, at: usize) -> Option<(Interp, usize)> {
    let bytes = src.as_bytes();
    let mut i = at + 1;
    let name = |i: &mut usize| -> Option<String> {
        let start = *i;
        let first = src[*i..].chars().next()?;
        if !is_name_start(first) {
            return None;
        }
        let mut chars = src[*i..].char_indices().peekable();
        let mut end = 0;
        while let Some((k, c)) = chars.next() {
            if is_name_char(c) {
                end = k + c.len_utf8();
            } else if c == '-' && end == k {
                match chars.peek() {
                    Some(&(_, n)) if is_name_char(n) => continue,
                    _ => break,
                }
            } else {
                break;
            }
        }
        *i = start + end;
        Some(src[start..start + end].to_string())
    };
    let root = name(&mut i)?;
    let mut path = Vec::new();
    loop {
        match bytes.get(i)? {
            b'}' => break,
            b'.' => {
                i += 1;
                path.push(PathSeg::Field(name(&mut i)?));
            }
            b'[' => {
                i += 1;
                let start = i;
                while bytes.get(i)?.is_ascii_digit() {
                    i += 1;
                }
                let n: u32 = src[start..i].parse().ok()?;
                if bytes.get(i)? != &b']' {
                    return None;
                }
                i += 1;
                path.push(PathSeg::Index(n));
            }
            _ => return None,
        }
    }
    let end = i + 1;
    Some((
        Interp {
            root,
            path,
            span: Span::new(at, end),
            raw: src[at..end].to_string(),
        },
        end,
    ))
}

impl Lexer<'_> {
    /// Lexes `"..."` or `"""..."""` at `self.pos`.
    pub(super) fn lex_string(&mut self) {
        let start = self.pos;
        if self.src[start..].starts_with("\"\"\"") {
            self.lex_triple(start)
        } else {
            self.lex_single(start)
        }
    }

    fn lex_single(&mut self, start: usize) {
        let src = self.src;
        let bytes = src.as_bytes();
        let mut b = PartsBuilder::new();
        let mut i = start + 1;
        let end;
        loop {
            let Some(c) = src[i..].chars().next() else {
                self.problem(
                    Code::E001,
                    Span::new(start, i),
                    "unterminated string literal",
                );
                end = i;
                break;
            };
            match c {
                '"' => {
                    end = i + 1;
                    break;
                }
                '\n' | '\r' => {
                    self.problems.push(LexProblem {
                        code: Code::E001,
                        span: Span::new(start, i),
                        message: "unterminated string literal".into(),
                        help: Some("close the string with `\"` on the same line, or use `\"\"\"` for text spanning lines".into()),
                    });
                    end = i;
                    break;
                }
                '\\' => {
                    let next = src[i + 1..].chars().next();
                    match next.and_then(escape) {
                        Some(e) => {
                            b.text.push(e);
                            i += 2;
                        }
                        None => match next {
                            None | Some('\n') | Some('\r') => {
                                b.text.push('\\');
                                i += 1;
                            }
                            Some(n) => {
                                let len = 1 + n.len_utf8();
                                self.problems.push(LexProblem {
                                    code: Code::E002,
                                    span: Span::new(i, i + len),
                                    message: format!("unknown escape sequence `\\{n}`"),
                                    help: Some("known escapes: \\\\ \\\" \\n \\t \\{ \\}; write `\\\\` for a backslash".into()),
                                });
                                b.text.push(n);
                                i += len;
                            }
                        },
                    }
                }
                '{' => match scan_interp(src, i) {
                    Some((interp, next)) => {
                        b.interp(interp);
                        i = next;
                    }
                    None => {
                        b.text.push('{');
                        i += 1;
                    }
                },
                _ => {
                    let end = run_end(bytes, i, b"\"\\{\n\r");
                    b.text.push_str(&src[i..end]);
                    i = end;
                }
            }
        }
        self.pos = end;
        let lit = StrLit {
            parts: b.finish(),
            triple: false,
            span: Span::new(start, end),
        };
        self.push(start, Tok::Str(lit), end);
    }

    fn lex_triple(&mut self, start: usize) {
        let src = self.src;
        let mut b = PartsBuilder::new();
        let mut i = start + 3;
        // The line break right after the opening delimiter is not content.
        if src[i..].starts_with("\r\n") {
            i += 2;
        } else if src[i..].starts_with('\n') {
            i += 1;
        }
        let end;
        loop {
            if src[i..].starts_with("\"\"\"") {
                end = i + 3;
                break;
            }
            let Some(c) = src[i..].chars().next() else {
                self.problems.push(LexProblem {
                    code: Code::E001,
                    span: Span::new(start, start + 3),
                    message: "unterminated multi-line string".into(),
                    help: Some("close it with `\"\"\"`".into()),
                });
                end = i;
                break;
            };
            match c {
                '\r' if src[i + 1..].starts_with('\n') => {
                    b.text.push('\n');
                    i += 2;
                }
                '\\' => {
                    // Known escapes apply; any other backslash is kept as written.
                    match src[i + 1..].chars().next().and_then(escape) {
                        Some(e) => {
                            b.text.push(e);
                            i += 2;
                        }
                        None => {
                            b.text.push('\\');
                            i += 1;
                        }
                    }
                }
                '{' => match scan_interp(src, i) {
                    Some((interp, next)) => {
                        b.interp(interp);
                        i = next;
                    }
                    None => {
                        b.text.push('{');
                        i += 1;
                    }
                },
                '"' => {
                    b.text.push('"');
                    i += 1;
                }
                _ => {
                    let end = run_end(src.as_bytes(), i, b"\"\\{\r");
                    b.text.push_str(&src[i..end]);
                    i = end;
                }
            }
        }
        self.pos = end;
        self.triple_ends.push(end);
        let lit = StrLit {
            parts: b.finish(),
            triple: true,
            span: Span::new(start, end),
        };
        self.push(start, Tok::Str(lit), end);
    }

    /// Lexes `**text**` (one line) or `***text***` (may span lines) at `self.pos`.
    pub(super) fn lex_discretion(&mut self) {
        let src = self.src;
        let start = self.pos;
        let triple = src[start..].starts_with("***");
        let delim = if triple { "***" } else { "**" };
        let mut b = PartsBuilder::new();
        let mut i = start + delim.len();
        let end;
        loop {
            if src[i..].starts_with(delim) {
                end = i + delim.len();
                break;
            }
            let c = src[i..].chars().next();
            let at_line_end = matches!(c, Some('\n') | Some('\r')) && !triple;
            if c.is_none() || at_line_end {
                self.problems.push(LexProblem {
                    code: Code::E133,
                    span: Span::new(start, start + delim.len()),
                    message: format!("unterminated discretion marker `{delim}`"),
                    help: Some(if triple {
                        "close the condition with `***`".into()
                    } else {
                        "close the condition with `**` on the same line, or use `***` for text spanning lines".into()
                    }),
                });
                end = i;
                break;
            }
            let c = c.unwrap_or(' ');
            match c {
                '\r' if src[i + 1..].starts_with('\n') => {
                    b.text.push('\n');
                    i += 2;
                }
                '{' => match scan_interp(src, i) {
                    Some((interp, next)) => {
                        b.interp(interp);
                        i = next;
                    }
                    None => {
                        b.text.push('{');
                        i += 1;
                    }
                },
                '*' => {
                    b.text.push('*');
                    i += 1;
                }
                _ => {
                    let end = run_end(src.as_bytes(), i, b"*{\n\r");
                    b.text.push_str(&src[i..end]);
                    i = end;
                }
            }
        }
        self.pos = end;
        let mut parts = b.finish();
        trim_parts(&mut parts);
        let lit = StrLit {
            parts,
            triple,
            span: Span::new(start, end),
        };
        self.push(start, Tok::Discretion(lit), end);
    }
}

/// The end of the run of bytes from `i` that contains none of `stops` (all ASCII, so the
/// result is always a character boundary). At least one byte is consumed. Searches up to
/// three stops at a time with SIMD, each search only as far as the previous one's find.
fn run_end(bytes: &[u8], i: usize, stops: &[u8]) -> usize {
    let from = (i + 1).min(bytes.len());
    let rest = &bytes[from..];
    let mut len = rest.len();
    for group in stops.chunks(3) {
        let hay = &rest[..len];
        let found = match *group {
            [a] => memchr::memchr(a, hay),
            [a, b] => memchr::memchr2(a, b, hay),
            [a, b, c] => memchr::memchr3(a, b, c, hay),
            _ => None,
        };
        if let Some(at) = found {
            len = at;
        }
    }
    let mut j = from + len;
    while j < bytes.len() && (bytes[j] & 0xC0) == 0x80 {
        j += 1;
    }
    j
}

/// The character a known escape stands for.
fn escape(c: char) -> Option<char> {
    Some(match c {
        '\\' => '\\',
        '"' => '"',
        'n' => '\n',
        't' => '\t',
        '{' => '{',
        '}' => '}',
        _ => return None,
    })
}

/// Trims surrounding whitespace of discretion text.
fn trim_parts(parts: &mut Vec<StrPart>) {
    if let Some(StrPart::Text(t)) = parts.first_mut() {
        *t = t.trim_start().to_string();
    }
    if let Some(StrPart::Text(t)) = parts.last_mut() {
        *t = t.trim_end().to_string();
    }
    if parts.len() > 1 {
        parts.retain(|p| !matches!(p, StrPart::Text(t) if t.is_empty()));
    }
}

#[cfg(test)]
mod tests {
    use super::run_end;
    use proptest::prelude::*;

    /// The byte-at-a-time definition `run_end` must agree with.
    fn naive(bytes: &[u8], i: usize, stops: &[u8]) -> usize {
        let mut j = i + 1;
        while j < bytes.len() && !stops.contains(&bytes[j]) {
            j += 1;
        }
        while j < bytes.len() && (bytes[j] & 0xC0) == 0x80 {
            j += 1;
        }
        j
    }

    proptest! {
        #[test]
        fn run_end_stops_where_a_byte_by_byte_scan_does(
            text in "[ab\"\\\\{}*\r\né€ ]{1,200}",
            at in 0usize..200,
            set in 0usize..3,
        ) {
            let stops: &[u8] = [&b"\"\\{\n\r"[..], b"\"\\{\r", b"*{\n\r"][set];
            let bytes = text.as_bytes();
            let i = at % bytes.len();
            prop_assert_eq!(run_end(bytes, i, stops), naive(bytes, i, stops));
        }
    }
}
