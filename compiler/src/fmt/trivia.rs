//! The trivia side-table: what lies between two tokens. The lexer drops comments and blank
//! lines; the formatter reads them back from the gaps between token spans, so there is one
//! lexer and no second parser.

/// One piece of a gap between tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trivia<'s> {
    /// A line break.
    Newline,
    /// A `#` comment (its text, `#` included, trailing spaces removed) and the column it
    /// started at.
    Comment(&'s str, usize),
}

/// The line breaks and comments in `src[start..end]`, a gap between two tokens (which holds
/// nothing else: spaces, tabs, carriage returns, form feeds, line breaks and comments).
pub fn scan(src: &str, start: usize, end: usize) -> Vec<Trivia<'_>> {
    let mut out = Vec::new();
    let bytes = src.as_bytes();
    let mut i = start;
    while i < end {
        match bytes[i] {
            b'\n' => {
                out.push(Trivia::Newline);
                i += 1;
            }
            b'#' => {
                let stop = src[i..end].find('\n').map_or(end, |n| i + n);
                let line_start = src[..i].rfind('\n').map_or(0, |n| n + 1);
                out.push(Trivia::Comment(src[i..stop].trim_end(), i - line_start));
                i = stop;
            }
            _ => i += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_breaks_in_order() {
        let src = "a  # one \n\n  # two\r\nb";
        assert_eq!(
            scan(src, 1, src.len() - 1),
            [
                Trivia::Comment("# one", 3),
                Trivia::Newline,
                Trivia::Newline,
                Trivia::Comment("# two", 2),
                Trivia::Newline,
            ]
        );
    }
}
