//! An open document: its text, positions in the editor's terms (UTF-16 columns), and the
//! analysis of the program it holds, by the compiler's own front end.

use crate::ast;
use crate::compile::{Compilation, Options};
use crate::lexer::{Lexer, Spanned};
use crate::span::Span;
use lsp_types::{Position, Range, Uri};
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};

/// How many bytes of text lie between two UTF-16 [checkpoints](Lines::checkpoints).
const CHECKPOINT: usize = 256;

/// Line starts of a text, for converting byte offsets to and from LSP positions. A position
/// costs the same wherever it is in its line: on a line of ASCII a column is a byte count,
/// and elsewhere the UTF-16 units are counted from the nearest checkpoint, not from the
/// line's start (which made a long line's every position cost its whole length).
pub struct Lines {
    starts: Vec<usize>,
    /// Whether each line is ASCII only.
    ascii: Vec<bool>,
    /// For the `k`th checkpoint, the first character boundary at or after byte
    /// `k * CHECKPOINT` and the UTF-16 units of the text before it. Empty for a text of
    /// ASCII only.
    checkpoints: Vec<(usize, usize)>,
}

impl Lines {
    /// The line starts of `text`.
    pub fn new(text: &str) -> Lines {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', bytes).map(|i| i + 1));
        let ascii: Vec<bool> = starts
            .iter()
            .enumerate()
            .map(|(line, &start)| {
                let end = starts.get(line + 1).map_or(bytes.len(), |&e| e);
                bytes[start..end].is_ascii()
            })
            .collect();
        let mut checkpoints = Vec::new();
        if ascii.iter().any(|a| !a) {
            checkpoints.reserve(text.len() / CHECKPOINT + 1);
            let mut units = 0;
            for (i, c) in text.char_indices() {
                while checkpoints.len() * CHECKPOINT <= i {
                    checkpoints.push((i, units));
                }
                units += c.len_utf16();
            }
            while checkpoints.len() * CHECKPOINT <= text.len() {
                checkpoints.push((text.len(), units));
            }
        }
        Lines {
            starts,
            ascii,
            checkpoints,
        }
    }

    /// The UTF-16 units of the text before byte `offset`, a character boundary, when the
    /// text is not ASCII only.
    fn units_before(&self, text: &str, offset: usize) -> usize {
        let (from, units) = self.checkpoints[offset / CHECKPOINT];
        units
            + text[from..offset]
                .chars()
                .map(char::len_utf16)
                .sum::<usize>()
    }

    /// The position of byte `offset` (clamped to the text, and to the start of the
    /// character it is inside).
    pub fn position(&self, text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        let col = if self.ascii[line] {
            offset - start
        } else {
            self.units_before(text, offset) - self.units_before(text, start)
        };
        Position::new(line as u32, col as u32)
    }

    /// The byte offset of `pos` (clamped to its line and to the text).
    pub fn offset(&self, text: &str, pos: Position) -> usize {
        let Some(&start) = self.starts.get(pos.line as usize) else {
            return text.len();
        };
        let end = self
            .starts
            .get(pos.line as usize + 1)
            .map_or(text.len(), |&e| e);
        let mut units = 0usize;
        for (i, c) in text[start..end].char_indices() {
            if units >= pos.character as usize || c == '\n' || c == '\r' {
                return start + i;
            }
            units += c.len_utf16();
        }
        end
    }

    /// The range of a byte span.
    pub fn range(&self, text: &str, span: Span) -> Range {
        Range::new(
            self.position(text, span.start as usize),
            self.position(text, span.end as usize),
        )
    }
}

/// The file path a `file:` URI names.
pub fn uri_path(uri: &Uri) -> Option<PathBuf> {
    let rest = uri.as_str().strip_prefix("file://")?;
    let mut bytes = Vec::with_capacity(rest.len());
    let raw = rest.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' && i + 2 < raw.len() {
            if let Ok(b) = u8::from_str_radix(&rest[i + 1..i + 3], 16) {
                bytes.push(b);
                i += 3;
                continue;
            }
        }
        bytes.push(raw[i]);
        i += 1;
    }
    String::from_utf8(bytes).ok().map(PathBuf::from)
}

/// The `file:` URI of a path.
pub fn path_uri(path: &Path) -> Option<Uri> {
    let mut s = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s.parse().ok()
}

/// The canonical form of a path (the path as given when it does not exist).
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A program as the editor has it, analysed.
pub struct Document {
    /// Its URI.
    pub uri: Uri,
    /// The file it stands for.
    pub path: PathBuf,
    /// That file's canonical path (as given when it does not exist).
    pub canonical: PathBuf,
    /// The editor's text.
    pub text: String,
    /// Its lines.
    pub lines: Lines,
    /// The syntax tree.
    pub ast: ast::Program,
    /// The tokens (for highlighting and folding).
    pub tokens: Vec<Spanned>,
    /// The compilation of this text and what it imports.
    pub comp: Compilation,
    /// This text's module in [`Document::comp`].
    pub module: usize,
}

impl Document {
    /// Analyses `text` as the contents of `path`, with the programs it imports read from
    /// disk.
    pub fn new(uri: Uri, path: PathBuf, text: String) -> Document {
        Document::with_overlay(uri, path, text, FxHashMap::default())
    }

    /// Analyses `text` as the contents of `path`; an imported program whose canonical path
    /// is in `overlay` is the text there (the editor's, unsaved), the others are read from
    /// disk.
    pub fn with_overlay(
        uri: Uri,
        path: PathBuf,
        text: String,
        overlay: FxHashMap<PathBuf, String>,
    ) -> Document {
        let mut comp = Compilation::with_overlay(Options::default(), overlay);
        let module = comp.add_source(&path, &text);
        let ast = crate::parser::parse(0, &text).program;
        let tokens = Lexer::new(&text).run().tokens;
        Document {
            uri,
            canonical: canonical(&path),
            path,
            lines: Lines::new(&text),
            text,
            ast,
            tokens,
            comp,
            module,
        }
    }

    /// The analysis of this text.
    pub fn analysis(&self) -> &crate::sema::Analysis {
        &self.comp.modules[self.module].analysis
    }

    /// The range of a span of this text.
    pub fn range(&self, span: Span) -> Range {
        self.lines.range(&self.text, span)
    }

    /// The byte offset of a position in this text.
    pub fn offset(&self, pos: Position) -> usize {
        self.lines.offset(&self.text, pos)
    }

    /// The source-map id of this text.
    pub fn file(&self) -> crate::source::FileId {
        self.comp.modules[self.module].file
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_positions_round_trip() {
        let text = "let a = 1\nsession \"é😀x\"\n";
        let lines = Lines::new(text);
        let x = text.find('x').expect("x");
        let pos = lines.position(text, x);
        assert_eq!(pos, Position::new(1, 12));
        assert_eq!(lines.offset(text, pos), x);
        assert_eq!(lines.offset(text, Position::new(0, 99)), 9);
        assert_eq!(lines.offset(text, Position::new(9, 0)), text.len());
    }

    #[test]
    fn positions_are_utf16_columns_on_every_kind_of_line() {
        // Lines of ASCII, of wide characters, and a long mixed one crossing many
        // checkpoints, each position compared with a count from the line's start.
        let long: String = (0..2000)
            .map(|i| match i % 7 {
                0 => '😀',
                3 => 'é',
                _ => 'a',
            })
            .collect();
        let text = format!("plain line\n\n{long}\nsession \"é😀x\"\n{long}");
        let lines = Lines::new(&text);
        let mut line = 0;
        let mut col = 0;
        for (i, c) in text.char_indices() {
            assert_eq!(
                lines.position(&text, i),
                Position::new(line, col),
                "byte {i}"
            );
            assert_eq!(lines.offset(&text, Position::new(line, col)), i);
            if c == '\n' {
                line += 1;
                col = 0;
            } else {
                col += c.len_utf16() as u32;
            }
        }
        assert_eq!(lines.position(&text, text.len()), Position::new(line, col));
        // Inside a character: its start.
        let e = text.find('é').expect("é");
        assert_eq!(lines.position(&text, e + 1), lines.position(&text, e));
    }

    #[test]
    fn file_uris_and_paths() {
        let p = Path::new("/tmp/a dir/x.prose");
        let uri = path_uri(p).expect("uri");
        assert_eq!(uri.as_str(), "file:///tmp/a%20dir/x.prose");
        assert_eq!(uri_path(&uri).as_deref(), Some(p));
    }
}
