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

/// Bytes between two character-count checkpoints of a line holding non-ASCII text.
const STRIDE: usize = 256;

/// Start offsets of every line of a source text, and for lines holding non-ASCII text,
/// character counts every few hundred bytes: any position's line and column cost a binary
/// search and at most a few hundred bytes of counting, however long the line.
#[derive(Clone, Debug)]
pub struct LineIndex {
    starts: Vec<u32>,
    /// `(line, checkpoints)` for each line with non-ASCII text, by line; a checkpoint is a
    /// byte offset in the line (on a character boundary) and the characters before it.
    wide: Vec<(u32, Vec<(u32, u32)>)>,
}

impl LineIndex {
    /// Indexes the line starts of `text` (LF and CRLF both end a line).
    pub fn new(text: &str) -> LineIndex {
        let mut starts = Vec::with_capacity(text.len() / 32 + 1);
        starts.push(0u32);
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i as u32 + 1));
        let mut wide = Vec::new();
        if !text.is_ascii() {
            for (line, w) in starts
                .windows(2)
                .map(|w| (w[0], w[1]))
                .chain(std::iter::once((
                    *starts.last().unwrap_or(&0),
                    text.len() as u32,
                )))
                .enumerate()
            {
                let (from, to) = (w.0 as usize, w.1 as usize);
                let line_text = &text[from..to];
                if line_text.is_ascii() {
                    continue;
                }
                let mut checkpoints = vec![(0u32, 0u32)];
                let mut next = STRIDE;
                for (chars, (at, _)) in line_text.char_indices().enumerate() {
                    if at >= next {
                        checkpoints.push((at as u32, chars as u32));
                        next = at + STRIDE;
                    }
                }
                wide.push((line as u32, checkpoints));
            }
        }
        LineIndex { starts, wide }
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
        let column = match self.wide.binary_search_by_key(&(line as u32), |(l, _)| *l) {
            Err(_) => offset - start,
            Ok(i) => {
                let checkpoints = &self.wide[i].1;
                let k = checkpoints.partition_point(|(at, _)| (*at as usize) <= offset - start);
                let (at, chars) = checkpoints[k.saturating_sub(1)];
                let from = start + at as usize;
                chars as usize
                    + match text.get(from..offset) {
                        Some(rest) => rest.chars().count(),
                        None => offset - from,
                    }
            }
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

    #[test]
    fn columns_on_long_lines_match_counting_characters() {
        let line: String = (0..3_000)
            .map(|i| if i % 7 == 0 { "é" } else { "ab" })
            .collect();
        let text = format!("x\n{line}\ny");
        let idx = LineIndex::new(&text);
        for (offset, _) in text.char_indices() {
            let lc = idx.line_col(&text, offset);
            let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
            let expected = text[start..offset].chars().count() as u32 + 1;
            assert_eq!(lc.column, expected, "at {offset}");
        }
    }
}
