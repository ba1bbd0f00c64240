//! The programs of the workspace an editor has: its open documents (the editor's text, saved
//! or not) and the `.prose` files on disk under the folder it opened. A document is analysed
//! with the open documents standing for the files they are, so a program importing one the
//! editor has changed sees the change before it is saved; and the programs that import one
//! are found here, for references and rename across files.

use super::document::{canonical, path_uri, uri_path, Document};
use lsp_types::Uri;
use rustc_hash::FxHashMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// The open documents and the folder they belong to.
#[derive(Default)]
pub struct Workspace {
    /// The open documents, by URI.
    docs: FxHashMap<String, Document>,
    /// The folder the editor opened, if any.
    root: Option<PathBuf>,
}

/// A program of the workspace: an open document, or a file analysed from disk.
pub enum Program<'w> {
    /// Open in the editor.
    Open(&'w Document),
    /// Not open: read from disk (with the open documents standing for their files).
    Disk(Box<Document>),
}

impl Deref for Program<'_> {
    type Target = Document;
    fn deref(&self) -> &Document {
        match self {
            Program::Open(d) => d,
            Program::Disk(d) => d,
        }
    }
}

impl Workspace {
    /// A workspace of the folder `root` (none: only the open documents).
    pub fn new(root: Option<PathBuf>) -> Workspace {
        Workspace {
            docs: FxHashMap::default(),
            root,
        }
    }

    /// An open document.
    pub fn document(&self, uri: &Uri) -> Option<&Document> {
        self.docs.get(uri.as_str())
    }

    /// The editor's texts of the open documents other than `except`, by canonical path.
    fn overlay(&self, except: &Path) -> FxHashMap<PathBuf, String> {
        self.docs
            .values()
            .filter(|d| d.canonical != except)
            .map(|d| (d.canonical.clone(), d.text.clone()))
            .collect()
    }

    /// Analyses `text` as the document `uri` with the other open documents standing for
    /// their files.
    fn analyse(&self, uri: Uri, text: String) -> Document {
        let path = uri_path(&uri).unwrap_or_else(|| PathBuf::from(uri.as_str()));
        let overlay = self.overlay(&canonical(&path));
        Document::with_overlay(uri, path, text, overlay)
    }

    /// Opens (or changes) a document; returns the URIs of the documents analysed again: it,
    /// then the open documents that import it, directly or not, which see its new text.
    pub fn open(&mut self, uri: Uri, text: String) -> Vec<Uri> {
        let doc = self.analyse(uri.clone(), text);
        let changed = doc.canonical.clone();
        self.docs.insert(uri.as_str().to_string(), doc);
        let mut out = vec![uri];
        out.extend(self.reanalyse_importers(&changed));
        out
    }

    /// Closes a document: the open documents that import it read its file again. Returns
    /// their URIs.
    pub fn close(&mut self, uri: &Uri) -> Vec<Uri> {
        match self.docs.remove(uri.as_str()) {
            Some(doc) => self.reanalyse_importers(&doc.canonical),
            None => Vec::new(),
        }
    }

    /// Analyses again each open document whose compilation includes the program at `path`.
    fn reanalyse_importers(&mut self, path: &Path) -> Vec<Uri> {
        let stale: Vec<(Uri, String)> = self
            .docs
            .values()
            .filter(|d| d.canonical != path && d.comp.modules.iter().any(|m| m.path == path))
            .map(|d| (d.uri.clone(), d.text.clone()))
            .collect();
        let mut out = Vec::with_capacity(stale.len());
        for (uri, text) in stale {
            let doc = self.analyse(uri.clone(), text);
            self.docs.insert(uri.as_str().to_string(), doc);
            out.push(uri);
        }
        out
    }

    /// The program at canonical path `path`: its open document, else its file read from
    /// disk.
    pub fn program(&self, path: &Path) -> Option<Program<'_>> {
        if let Some(d) = self.docs.values().find(|d| d.canonical == path) {
            return Some(Program::Open(d));
        }
        let text = std::fs::read_to_string(path).ok()?;
        let uri = path_uri(path)?;
        Some(Program::Disk(Box::new(self.analyse(uri, text))))
    }

    /// The `.prose` files under the workspace folder (what `.gitignore` and `.ignore` files
    /// leave out, and hidden directories, are skipped).
    fn files(&self) -> Vec<PathBuf> {
        let Some(root) = &self.root else {
            return Vec::new();
        };
        crate::walk::prose_files_under(root)
    }

    /// The programs of the workspace that import the program at canonical path `path`
    /// directly: open documents, and files under the workspace folder.
    pub fn importers(&self, path: &Path) -> Vec<Program<'_>> {
        let imports = |d: &Document| {
            d.canonical != path
                && d.comp.modules[d.module]
                    .imports
                    .values()
                    .any(|&m| d.comp.modules[m].path == path)
        };
        let mut out: Vec<Program<'_>> = self
            .docs
            .values()
            .filter(|d| imports(d))
            .map(Program::Open)
            .collect();
        out.sort_by(|a, b| a.canonical.cmp(&b.canonical));
        // A file that imports this one names it in a `use`: files that never mention its
        // name are not analysed.
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for file in self.files() {
            let file = canonical(&file);
            if file == path || self.docs.values().any(|d| d.canonical == file) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            if !text.contains("use") || !text.contains(stem.as_str()) {
                continue;
            }
            let Some(uri) = path_uri(&file) else {
                continue;
            };
            let doc = self.analyse(uri, text);
            if imports(&doc) {
                out.push(Program::Disk(Box::new(doc)));
            }
        }
        out
    }
}
