//! Byte spans and the line index that turns them into `line:column` positions.

use serde::Serialize;

/// A half-open byte range `[start, end)` into one source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Span {
    /// Offset of the first byte.
    pub start: u32,
    /// Offset one past the last byte.
    pub end: u32,
}

impl Span {
    /// A span from two byte offsets.
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end.max(start) as u32,
        }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// The byte range, for slicing the source.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// A 1-based line and column (columns count characters, like rustc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LineCol {
    /// 1-based line number.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
}

/// Start offsets of every line of a source text.
#[derive(Clone, Debug)]
pub struct LineIndex {
    starts: Vec<u32>,
}

impl LineIndex {
    /// Indexes the line starts of `text` (LF and CRLF both end a line).
    pub fn new(text: &str) -> LineIndex {
        let mut starts = Vec::with_capacity(text.len() / 32 + 1);
        starts.push(0u32);
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i as u32 + 1));
        LineIndex { starts }
    }

    /// The 0-based line holding byte `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&(offset as u32)) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// Byte offset where 0-based `line` starts.
    pub fn line_start(&self, line: usize) -> usize {
        self.starts.get(line).copied().unwrap_or(0) as usize
    }

    /// Number of lines.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// True for an index with no lines (never: an empty text has one empty line).
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The 1-based position of byte `offset` in `text`.
    pub fn line_col(&self, text: &str, offset: usize) -> LineCol {
        let offset = offset.min(text.len());
        let line = self.line_of(offset);
        let start = self.line_start(line);
        let column = match text.get(start..offset) {
            Some(prefix) if prefix.is_ascii() => prefix.len(),
            Some(prefix) => prefix.chars().count(),
            None => offset - start,
        };
        LineCol {
            line: line as u32 + 1,
            column: column as u32 + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_from_one() {
        let text = "ab\ncé d\r\nx";
        let idx = LineIndex::new(text);
        assert_eq!(idx.line_col(text, 0), LineCol { line: 1, column: 1 });
        assert_eq!(idx.line_col(text, 3), LineCol { line: 2, column: 1 });
        // 'd' sits after a two-byte 'é'.
        assert_eq!(idx.line_col(text, 7), LineCol { line: 2, column: 4 });
        assert_eq!(idx.line_col(text, 10), LineCol { line: 3, column: 1 });
    }
}
