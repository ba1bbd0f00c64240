//! Source files loaded for one compilation, addressed by [`FileId`].

use crate::span::{LineCol, LineIndex};
use std::sync::OnceLock;

/// Index of a file in a [`SourceMap`].
pub type FileId = usize;

/// One source file: its display path, its text and its line index.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Path as given by the user (used in diagnostics).
    pub path: String,
    /// The text (valid UTF-8; see [`crate::decode_source`]).
    pub text: String,
    /// The line index, built the first time a position is asked for (most files checked
    /// have nothing to report).
    lines: OnceLock<LineIndex>,
}

impl SourceFile {
    /// A file from its path and text.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> SourceFile {
        SourceFile {
            path: path.into(),
            text: text.into(),
            lines: OnceLock::new(),
        }
    }

    /// The 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: usize) -> LineCol {
        self.lines().line_col(&self.text, offset)
    }

    /// The file's line index.
    pub fn lines(&self) -> &LineIndex {
        self.lines.get_or_init(|| LineIndex::new(&self.text))
    }
}

/// All files of one compilation.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, path: impl Into<String>, text: impl Into<String>) -> FileId {
        self.push(SourceFile::new(path, text))
    }

    /// Adds a file already indexed and returns its id.
    pub fn push(&mut self, file: SourceFile) -> FileId {
        self.files.push(file);
        self.files.len() - 1
    }

    /// The file with id `id`.
    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id]
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when no file was added.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}
