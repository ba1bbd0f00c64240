//! The hand-written lexer: source text to tokens with byte spans.
//!
//! Layout follows Python's tokenizer: a `Newline` ends each logical line that holds tokens,
//! `Indent`/`Dedent` track the leading spaces of the next one, blank and comment-only lines
//! are invisible, and newlines inside `()`, `[]` and `{}` are ignored (so literals and call
//! arguments may span lines). A `"""` string is one token wherever its delimiters sit.
//!
//! One leniency beyond Python: a line that dedents to a column between two open levels
//! (common in multi-line pipelines) closes the deeper level and opens a new one at that column.
//!
//! The lexer never fails: problems become diagnostics in [`Lexer::problems`] and lexing goes
//! on with a best guess, so the parser still sees a well-formed token stream.

mod strings;
mod token;

pub use token::{Tok, KEYWORDS};

use crate::diagnostics::Code;
use crate::span::Span;

/// A problem found while lexing.
#[derive(Clone, Debug, PartialEq)]
pub struct LexProblem {
    /// The diagnostic code.
    pub code: Code,
    /// Where.
    pub span: Span,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
}

/// A token with its start and end byte offsets, as LALRPOP expects.
pub type Spanned = (usize, Tok, usize);

/// The lexer; [`Lexer::run`] produces every token at once.
pub struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    indents: Vec<usize>,
    depth: usize,
    at_line_start: bool,
    line_has_tokens: bool,
    out: Vec<Spanned>,
    done: bool,
    problems: Vec<LexProblem>,
    triple_ends: Vec<usize>,
    directives: Vec<Span>,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || (!c.is_ascii() && c.is_alphabetic())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || (!c.is_ascii() && c.is_alphanumeric())
}

impl<'a> Lexer<'a> {
    /// A lexer over `src` (a leading byte-order mark is skipped).
    pub fn new(src: &'a str) -> Lexer<'a> {
        let pos = if src.starts_with('\u{feff}') { 3 } else { 0 };
        Lexer {
            src,
            pos,
            indents: vec![0],
            depth: 0,
            at_line_start: true,
            line_has_tokens: false,
            // About one token per 18 bytes in real programs.
            out: Vec::with_capacity(src.len() / 16 + 16),
            done: false,
            problems: Vec::new(),
            triple_ends: Vec::new(),
            directives: Vec::new(),
        }
    }

    fn problem(&mut self, code: Code, span: Span, message: impl Into<String>) {
        self.problems.push(LexProblem {
            code,
            span,
            message: message.into(),
            help: None,
        });
    }

    fn peek_byte(&self, ahead: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + ahead).copied()
    }

    fn peek_char(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn push(&mut self, start: usize, tok: Tok, end: usize) {
        self.out.push((start, tok, end));
    }

    /// Measures the indentation of the line at `self.pos`; skips it if blank or comment-only.
    /// Returns false at end of input.
    fn start_line(&mut self) -> bool {
        loop {
            let line_start = self.pos;
            let mut col = 0usize;
            let mut tab_at = None;
            while let Some(b) = self.peek_byte(0) {
                match b {
                    b' ' => col += 1,
                    b'\t' => {
                        tab_at.get_or_insert(self.pos);
                        col += 1;
                    }
                    b'\x0c' => {}
                    b'\r' if self.peek_byte(1) != Some(b'\n') => {}
                    _ => break,
                }
                self.pos += 1;
            }
            match self.peek_byte(0) {
                None => return false,
                Some(b'\n') => {
                    self.pos += 1;
                    continue;
                }
                Some(b'\r') => {
                    self.pos += 2;
                    continue;
                }
                Some(b'#') => {
                    self.skip_comment();
                    continue;
                }
                Some(_) => {}
            }
            if let Some(at) = tab_at {
                self.problems.push(LexProblem {
                    code: Code::E132,
                    span: Span::new(at, at + 1),
                    message: "tab character in indentation".into(),
                    help: Some("indent with spaces only".into()),
                });
            }
            let _ = line_start;
            let here = self.pos;
            let top = *self.indents.last().unwrap_or(&0);
            if col > top {
                self.indents.push(col);
                self.push(here, Tok::Indent, here);
            } else if col < top {
                while col < *self.indents.last().unwrap_or(&0) {
                    self.indents.pop();
                    self.push(here, Tok::Dedent, here);
                }
                if col > *self.indents.last().unwrap_or(&0) {
                    self.indents.push(col);
                    self.push(here, Tok::Indent, here);
                }
            }
            return true;
        }
    }

    /// Skips a comment, recording it if it is a `# prose: ...` directive.
    fn skip_comment(&mut self) {
        let start = self.pos;
        match self.src[self.pos..].find('\n') {
            Some(n) => {
                self.pos += n;
                if self.pos > 0 && self.src.as_bytes()[self.pos - 1] == b'\r' {
                    self.pos -= 1;
                }
            }
            None => self.pos = self.src.len(),
        }
        let text = &self.src[start + 1..self.pos];
        if text.trim_start().starts_with("prose:") {
            self.directives.push(Span::new(start, self.pos));
        }
    }

    fn finish(&mut self) {
        let end = self.src.len();
        if self.line_has_tokens {
            self.push(end, Tok::Newline, end);
            self.line_has_tokens = false;
        }
        while self.indents.len() > 1 {
            self.indents.pop();
            self.push(end, Tok::Dedent, end);
        }
        self.done = true;
    }

    /// Lexes the whole input.
    pub fn run(mut self) -> Lexed {
        while !self.done {
            if self.at_line_start && self.depth == 0 {
                self.at_line_start = false;
                if !self.start_line() {
                    self.finish();
                }
                continue;
            }
            self.lex_one();
        }
        Lexed {
            tokens: self.out,
            problems: self.problems,
            triple_ends: self.triple_ends,
            directives: self.directives,
        }
    }

    fn end_of_line(&mut self, nl_start: usize, nl_end: usize) {
        self.pos = nl_end;
        if self.depth == 0 {
            if self.line_has_tokens {
                self.push(nl_start, Tok::Newline, nl_end);
                self.line_has_tokens = false;
            }
            self.at_line_start = true;
        }
    }

    fn lex_one(&mut self) {
        // Skip horizontal whitespace.
        while let Some(b) = self.peek_byte(0) {
            match b {
                b' ' | b'\t' | b'\x0c' => self.pos += 1,
                b'\r' if self.peek_byte(1) != Some(b'\n') => self.pos += 1,
                _ => break,
            }
        }
        let start = self.pos;
        let Some(c) = self.peek_char() else {
            self.finish();
            return;
        };
        match c {
            '\n' => return self.end_of_line(start, start + 1),
            '\r' => return self.end_of_line(start, start + 2),
            '#' => return self.skip_comment(),
            _ => {}
        }
        self.line_has_tokens = true;
        let tok = match c {
            '"' => return self.lex_string(),
            '*' if self.peek_byte(1) == Some(b'*') => return self.lex_discretion(),
            c if is_name_start(c) => return self.lex_word(),
            '0'..='9' => return self.lex_number(),
            '(' | '[' | '{' => {
                self.depth += 1;
                match c {
                    '(' => Tok::LParen,
                    '[' => Tok::LBracket,
                    _ => Tok::LBrace,
                }
            }
            ')' | ']' | '}' => {
                self.depth = self.depth.saturating_sub(1);
                match c {
                    ')' => Tok::RParen,
                    ']' => Tok::RBracket,
                    _ => Tok::RBrace,
                }
            }
            ':' => Tok::Colon,
            ',' => Tok::Comma,
            '.' => Tok::Dot,
            '|' => Tok::Pipe,
            '+' => Tok::Plus,
            '-' if self.peek_byte(1) == Some(b'>') => {
                self.pos += 2;
                return self.push(start, Tok::Arrow, start + 2);
            }
            '-' => Tok::Minus,
            '=' if self.peek_byte(1) == Some(b'=') => {
                self.pos += 2;
                return self.push(start, Tok::EqEq, start + 2);
            }
            '=' => Tok::Assign,
            '!' if self.peek_byte(1) == Some(b'=') => {
                self.pos += 2;
                return self.push(start, Tok::NotEq, start + 2);
            }
            '<' if self.peek_byte(1) == Some(b'=') => {
                self.pos += 2;
                return self.push(start, Tok::Le, start + 2);
            }
            '<' => Tok::Lt,
            '>' if self.peek_byte(1) == Some(b'=') => {
                self.pos += 2;
                return self.push(start, Tok::Ge, start + 2);
            }
            '>' => Tok::Gt,
            other => {
                let len = other.len_utf8();
                self.pos += len;
                let shown = if other.is_control() {
                    format!("{:?}", other)
                } else {
                    format!("`{other}`")
                };
                self.problem(
                    Code::E134,
                    Span::new(start, start + len),
                    format!("invalid character {shown}"),
                );
                return;
            }
        };
        self.pos += 1;
        self.push(start, tok, start + 1);
    }

    fn name_char_at(&self, i: usize) -> bool {
        self.src
            .get(i..)
            .and_then(|rest| rest.chars().next())
            .is_some_and(is_name_char)
    }

    fn lex_word(&mut self) {
        let start = self.pos;
        let bytes = self.src.as_bytes();
        let mut end = start;
        loop {
            match bytes.get(end) {
                Some(b) if b.is_ascii_alphanumeric() || *b == b'_' => end += 1,
                // A hyphen between name characters belongs to the name.
                Some(b'-') if end > start && self.name_char_at(end + 1) => end += 1,
                Some(b) if *b >= 0x80 => match self.src[end..].chars().next() {
                    Some(c) if is_name_char(c) => end += c.len_utf8(),
                    _ => break,
                },
                _ => break,
            }
        }
        let word = &self.src[start..end];
        self.pos = end;
        let tok = Tok::keyword(word).unwrap_or_else(|| Tok::Ident(word.to_string()));
        self.push(start, tok, end);
    }

    fn lex_number(&mut self) {
        let start = self.pos;
        let bytes = self.src.as_bytes();
        let mut end = start;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
        }
        let is_float =
            end + 1 < bytes.len() && bytes[end] == b'.' && bytes[end + 1].is_ascii_digit();
        if is_float {
            end += 1;
            while end < bytes.len() && bytes[end].is_ascii_digit() {
                end += 1;
            }
        }
        self.pos = end;
        let text = &self.src[start..end];
        let tok = if is_float {
            Tok::Float(text.parse().unwrap_or(0.0))
        } else {
            match text.parse::<i64>() {
                Ok(v) => Tok::Int(v),
                Err(_) => {
                    self.problem(
                        Code::E136,
                        Span::new(start, end),
                        format!("integer `{text}` is too large"),
                    );
                    Tok::Int(0)
                }
            }
        };
        self.push(start, tok, end);
    }
}

/// Everything the lexer produced.
pub struct Lexed {
    /// The tokens, layout tokens included.
    pub tokens: Vec<Spanned>,
    /// Problems found.
    pub problems: Vec<LexProblem>,
    /// End offsets of every `"""` string, for hints about inner quotes.
    pub triple_ends: Vec<usize>,
    /// Spans of `# prose: ...` comments (lint directives).
    pub directives: Vec<Span>,
}

/// Lexes all of `src`, returning the tokens and the problems found.
pub fn tokenize(src: &str) -> (Vec<Spanned>, Vec<LexProblem>) {
    let lexed = Lexer::new(src).run();
    (lexed.tokens, lexed.problems)
}

#[cfg(test)]
mod tests;
