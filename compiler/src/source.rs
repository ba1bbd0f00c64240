//! Source files loaded for one compilation, addressed by [`FileId`].

use crate::span::{LineCol, LineIndex};
use codespan_reporting::files::{self, Files};
use std::ops::Range;

/// Index of a file in a [`SourceMap`].
pub type FileId = usize;

/// One source file: its display path, its text and its line index.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Path as given by the user (used in diagnostics).
    pub path: String,
    /// The text (valid UTF-8; see [`crate::decode_source`]).
    pub text: String,
    lines: LineIndex,
}

impl SourceFile {
    /// A file from its path and text.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let text = text.into();
        let lines = LineIndex::new(&text);
        SourceFile {
            path: path.into(),
            text,
            lines,
        }
    }

    /// The 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: usize) -> LineCol {
        self.lines.line_col(&self.text, offset)
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
        self.files.push(SourceFile::new(path, text));
        self.files.len() - 1
    }

    /// Replaces the text of file `id` (used when a file's id is reserved before its text is
    /// stored).
    pub(crate) fn set_text(&mut self, id: FileId, text: String) {
        let path = std::mem::take(&mut self.files[id].path);
        self.files[id] = SourceFile::new(path, text);
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

impl<'a> Files<'a> for SourceMap {
    type FileId = FileId;
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, id: FileId) -> Result<&'a str, files::Error> {
        self.files
            .get(id)
            .map(|f| f.path.as_str())
            .ok_or(files::Error::FileMissing)
    }

    fn source(&'a self, id: FileId) -> Result<&'a str, files::Error> {
        self.files
            .get(id)
            .map(|f| f.text.as_str())
            .ok_or(files::Error::FileMissing)
    }

    fn line_index(&'a self, id: FileId, byte_index: usize) -> Result<usize, files::Error> {
        let f = self.files.get(id).ok_or(files::Error::FileMissing)?;
        Ok(f.lines.line_of(byte_index.min(f.text.len())))
    }

    fn line_range(&'a self, id: FileId, line_index: usize) -> Result<Range<usize>, files::Error> {
        let f = self.files.get(id).ok_or(files::Error::FileMissing)?;
        if line_index >= f.lines.len() {
            return Err(files::Error::LineTooLarge {
                given: line_index,
                max: f.lines.len() - 1,
            });
        }
        let start = f.lines.line_start(line_index);
        let end = if line_index + 1 < f.lines.len() {
            f.lines.line_start(line_index + 1)
        } else {
            f.text.len()
        };
        Ok(start..end)
    }
}
