//! Keywords written wrong: `sesion "x"`, `paralel:`, `paralel ("all"):`, `loop untill done:`,
//! `let r = repaet 3:`. The parser sees a name where a keyword belongs and fails a token or
//! two later; these find the word, so the error names it with a did-you-mean, and so an
//! error of this kind is never taken for a consequence of an earlier one. Also a modifier or
//! named argument without its colon (`(max 3)`).

use super::cascade::starts_statement;
use crate::diagnostics::closest;
use crate::lexer::{Tok, KEYWORDS};
use crate::span::Span;

/// A word where a keyword should be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Misspelt<'s> {
    /// The word.
    pub span: Span,
    /// The word as written.
    pub word: &'s str,
    /// The keyword it is likely a misspelling of.
    pub keyword: &'static str,
}

/// Keywords that continue a statement on a line of their own.
const CLAUSES: [&str; 5] = ["elif", "else", "catch", "finally", "option"];

/// Statement keywords that cannot start a value (after `=`).
const NOT_VALUES: [&str; 10] = [
    "use", "import", "input", "output", "agent", "let", "const", "block", "throw", "assert",
];

/// The keywords a word at `head` (the text before it on its line, trimmed) may stand for:
/// at the start of a line, those that start a statement or a clause; after `=`, those that
/// start a value; after `loop`, its conditions.
fn candidates(head: &str) -> Option<Vec<&'static str>> {
    let starts = |w: &&str| Tok::keyword(w).is_some_and(|t| starts_statement(&t));
    if head.is_empty() {
        Some(
            KEYWORDS
                .iter()
                .copied()
                .filter(|w| starts(w) || CLAUSES.contains(w))
                .collect(),
        )
    } else if head.ends_with('=') {
        Some(
            KEYWORDS
                .iter()
                .copied()
                .filter(|w| starts(w) && !NOT_VALUES.contains(w))
                .collect(),
        )
    } else if head == "loop" {
        Some(vec!["until", "while"])
    } else {
        None
    }
}

/// Whether `c` can be part of a name.
fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

/// The misspelt keyword ending at `end` (after trailing spaces and colons), if the word
/// there starts its statement, follows `=`, or follows `loop`.
fn word_before(src: &str, end: usize) -> Option<Misspelt<'_>> {
    let before =
        src[..end.min(src.len())].trim_end_matches(|c: char| c.is_whitespace() || c == ':');
    let start = before
        .char_indices()
        .rev()
        .find(|&(_, c)| !word_char(c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let word = &before[start..];
    // Keywords are lower case; a capitalised word is more likely prose outside a string.
    if word.len() < 2
        || Tok::keyword(word).is_some()
        || word.chars().any(|c| !c.is_ascii_lowercase())
    {
        return None;
    }
    let head = src[..start].rsplit('\n').next().unwrap_or("").trim();
    let keyword = closest(word, candidates(head)?)?;
    Some(Misspelt {
        span: Span::new(start, start + word.len()),
        word,
        keyword,
    })
}

/// The misspelt keyword a syntax error at token `tok` (from `l` to `r`) comes from, if any.
pub fn at_error<'s>(src: &'s str, tok: &'s Tok, l: usize, r: usize) -> Option<Misspelt<'s>> {
    let line_start = src[..l.min(src.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = &src[line_start..l.min(src.len())];
    match tok {
        // `loop untill done:`: the word after `loop` is the error itself.
        Tok::Ident(w) if line.trim() == "loop" => {
            let keyword = closest(w, ["until", "while"])?;
            Some(Misspelt {
                span: Span::new(l, r),
                word: w,
                keyword,
            })
        }
        // `paralel ("all"):` reads as a call until its `:`: the word before the brackets.
        Tok::Colon if line.trim_end().ends_with(')') => {
            let open = line.find('(')?;
            word_before(src, line_start + open)
        }
        _ => word_before(src, l),
    }
}

/// A modifier or named argument written without its colon (`(max 3)`, `(count 2)`): for a
/// syntax error at a value token from `l` to `r`, the span from the name to the value and
/// the text it should be.
pub fn missing_colon(src: &str, tok: &Tok, l: usize, r: usize) -> Option<(Span, String)> {
    if !matches!(
        tok,
        Tok::Int(_) | Tok::Float(_) | Tok::Str(_) | Tok::Ident(_) | Tok::Discretion(_)
    ) {
        return None;
    }
    let before = &src[..l.min(src.len())];
    let name_end = before.trim_end_matches([' ', '\t']).len();
    if name_end == before.len() {
        return None;
    }
    let name_start = before[..name_end]
        .char_indices()
        .rev()
        .find(|&(_, c)| !word_char(c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let name = &before[name_start..name_end];
    let opener = before[..name_start]
        .trim_end_matches([' ', '\t'])
        .chars()
        .last();
    if name.is_empty() || Tok::keyword(name).is_some() || !matches!(opener, Some('(' | ',')) {
        return None;
    }
    let value = src.get(l..r)?;
    Some((Span::new(name_start, r), format!("{name}: {value}")))
}

/// Statement heads a condition follows.
const CONDITION_HEADS: [&str; 5] = ["loop until ", "loop while ", "if ", "elif ", "assert "];

/// A condition written in plain words (`loop until the draft is good (max: 3):`, `if the
/// tests pass:`) where one in `**` was meant: for a syntax error at a word from `l`, inside a
/// condition of two or more plain words, the condition's span and the line as it should read.
pub fn plain_condition(src: &str, l: usize) -> Option<(Span, String)> {
    // The error is at a word (a name or a keyword), not at a bracket or an operator.
    if !src.get(l..)?.starts_with(|c: char| c.is_alphabetic()) {
        return None;
    }
    let line_start = src[..l.min(src.len())].rfind('\n').map_or(0, |i| i + 1);
    let line_end = src[l.min(src.len())..]
        .find('\n')
        .map_or(src.len(), |i| l + i);
    let line = &src[line_start..line_end];
    let indent = line.len() - line.trim_start().len();
    let head = CONDITION_HEADS
        .iter()
        .find(|h| line[indent..].starts_with(**h))?;
    let start = line_start + indent + head.len();
    // The condition ends at the line's `:` (before a modifier group such as `(max: 3)`).
    let rest = src[start..line_end].trim_end();
    let body = rest.strip_suffix(':').unwrap_or(rest);
    let cond = match body.rfind(" (") {
        Some(i) if body.ends_with(')') => &body[..i],
        _ => body,
    };
    let cond = cond.trim_end();
    let end = start + cond.len();
    let plain = cond.split_whitespace().all(|w| {
        w.chars()
            .all(|c| word_char(c) || matches!(c, '\'' | ',' | '?' | '.'))
    });
    if l < start || l >= end || cond.split_whitespace().count() < 2 || !plain {
        return None;
    }
    let fixed = format!("{}{head}**{cond}**{}", &line[..indent], &src[end..line_end]);
    Some((Span::new(start, end), fixed.trim_end().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::Lexer;

    /// The misspelling found at the first token of `src` that is `at`.
    fn found(src: &str, at: &str) -> Option<(String, &'static str)> {
        let tokens = Lexer::new(src).run().tokens;
        let l = src.find(at).expect("marker");
        let (l, tok, r) = tokens.iter().find(|t| t.0 == l).expect("token at marker");
        at_error(src, tok, *l, *r).map(|m| (m.word.to_string(), m.keyword))
    }

    #[test]
    fn the_word_before_the_error_at_the_start_of_a_statement() {
        assert_eq!(
            found("sesion \"x\"\n", "\"x\""),
            Some(("sesion".into(), "session"))
        );
        assert_eq!(
            found("paralel:\n  session \"x\"\n", ":"),
            Some(("paralel".into(), "parallel"))
        );
        assert_eq!(
            found("let r = repaet 3:\n  session \"x\"\n", "3"),
            Some(("repaet".into(), "repeat"))
        );
    }

    #[test]
    fn the_word_before_modifiers() {
        assert_eq!(
            found("paralel (\"all\"):\n  session \"x\"\n", ":"),
            Some(("paralel".into(), "parallel"))
        );
    }

    #[test]
    fn after_loop() {
        assert_eq!(
            found("loop untill done:\n  session \"x\"\n", "untill"),
            Some(("untill".into(), "until"))
        );
    }

    #[test]
    fn a_modifier_without_its_colon() {
        let src = "loop until **done** (max 3):\n  session \"x\"\n";
        let tokens = Lexer::new(src).run().tokens;
        let (l, tok, r) = tokens.iter().find(|t| t.1 == Tok::Int(3)).expect("3");
        let (span, fix) = missing_colon(src, tok, *l, *r).expect("found");
        assert_eq!((&src[span.range()], fix.as_str()), ("max 3", "max: 3"));
        // A value after a value is another mistake.
        let src = "let x = [1 2]\n";
        let tokens = Lexer::new(src).run().tokens;
        let (l, tok, r) = tokens.iter().find(|t| t.1 == Tok::Int(2)).expect("2");
        assert_eq!(missing_colon(src, tok, *l, *r), None);
    }

    #[test]
    fn only_keywords_that_fit_the_place() {
        // `not` starts no statement: `note:` is not taken for it.
        assert_eq!(found("note: the plan\n", ":"), None);
        // A value cannot be `agent ...`.
        assert_eq!(found("let a = agnet x\n", "x"), None);
        // Prose outside a string, capitalised.
        assert_eq!(found("Sesion \"x\"\n", "\"x\""), None);
    }

    #[test]
    fn a_condition_in_plain_words() {
        let src = "let d = 1\nloop until the draft is good (max: 3):\n  d = 2\n";
        let l = src.find("draft is").unwrap();
        let (span, fixed) = plain_condition(src, l).expect("found");
        assert_eq!(
            &src[span.start as usize..span.end as usize],
            "the draft is good"
        );
        assert_eq!(fixed, "loop until **the draft is good** (max: 3):");
        let src = "if the tests pass:\n  session \"x\"\n";
        let (_, fixed) = plain_condition(src, src.find("tests").unwrap()).expect("found");
        assert_eq!(fixed, "if **the tests pass**:");
        // One word is a variable; a comparison is code.
        assert_eq!(plain_condition("if done:\n", 3), None);
        let src = "if a == b c:\n";
        assert_eq!(plain_condition(src, src.find('c').unwrap()), None);
    }
}
