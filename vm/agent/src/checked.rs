//! Paths the sandbox has checked ([`CheckedPath`]), and the only way tools open them:
//! beneath the directory they were checked against, following no symbolic link
//! (`super::beneath`), so that a link swapped in after the check leads nowhere; refusing
//! a file with other hard links unless this session created it, since one of its other names
//! may be outside the working directory; and refusing to overwrite or edit a file that
//! existed before the session unless the session has read it, since a model that never
//! looked at a file writes what it guesses the file holds.

use std::collections::HashSet;
use std::fs::{File, Metadata};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::beneath::{is_link_error, Mode, Root, Strategy};

/// Files by device and inode.
#[derive(Debug, Default)]
struct Inodes(Mutex<HashSet<(u64, u64)>>);

impl Inodes {
    fn insert(&self, meta: &Metadata) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((meta.dev(), meta.ino()));
    }

    fn contains(&self, meta: &Metadata) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&(meta.dev(), meta.ino()))
    }
}

/// What one session's file tools did with files: those it created (the only files with
/// several hard links it may use) and those it read (with the created ones, the only
/// non-empty files it may overwrite or edit).
#[derive(Debug, Default)]
pub(crate) struct SessionFiles {
    created: Inodes,
    read: Inodes,
}

impl SessionFiles {
    /// Whether the session may change the file `meta` describes: it created or read it,
    /// or it is empty (there is nothing in it to guess).
    fn may_change(&self, meta: &Metadata) -> bool {
        meta.len() == 0 || self.created.contains(meta) || self.read.contains(meta)
    }
}

/// A path the sandbox has checked: canonical, and allowed for the action it was checked for.
/// Tools get paths to touch only in this form, and open them only through it.
#[derive(Clone, Debug)]
pub struct CheckedPath {
    path: PathBuf,
    display: String,
    reason: String,
    /// The directory it was checked against (the working directory or a skill's), held
    /// open.
    base: Arc<Root>,
    /// The canonical path relative to `base` (none if it is not beneath it, which the
    /// sandbox never hands out: such a path opens nothing).
    rel: Option<PathBuf>,
    files: Arc<SessionFiles>,
}

/// Why a file tool does not act on a file: the text the model reads.
type Refused = String;

impl CheckedPath {
    pub(crate) fn new(
        path: PathBuf,
        display: String,
        reason: String,
        base: Arc<Root>,
        files: Arc<SessionFiles>,
    ) -> CheckedPath {
        let rel = path.strip_prefix(base.path()).map(Path::to_path_buf).ok();
        CheckedPath {
            path,
            display,
            reason,
            base,
            rel,
            files,
        }
    }

    /// The canonical absolute path (for a file not created yet: its canonical parent joined
    /// with the rest).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path as tools show it: relative to the working directory, or absolute inside a
    /// skill's directory.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The rule that allowed it.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// Opens the file (or directory) for reading.
    pub fn open_read(&self) -> Result<(File, Metadata), Refused> {
        self.open(Mode::Read)
    }

    /// Notes that the session has read the file `meta` (opened by [`CheckedPath::open_read`])
    /// and shown it to the model: from now on it may overwrite or edit it.
    pub fn note_read(&self, meta: &Metadata) {
        self.files.read.insert(meta);
    }

    /// Opens the existing file for reading and writing (to change it in place): only a
    /// file this session created or read, or an empty one.
    pub fn open_edit(&self) -> Result<(File, Metadata), Refused> {
        let (file, meta) = self.open(Mode::ReadWrite)?;
        self.only_files(&meta)?;
        if !self.files.may_change(&meta) {
            return Err(format!(
                "`{}` already exists and you have not read it: read it with read_file first, \
                 then write or edit it, so that what you write starts from what it holds",
                self.display
            ));
        }
        Ok((file, meta))
    }

    /// Creates the file with `content`, or replaces an existing file's content, creating
    /// missing parent directories; `Ok(true)` if it existed.
    pub fn write(&self, content: &[u8]) -> Result<bool, Refused> {
        let rel = self.rel()?;
        if let Some(parent) = rel.parent() {
            self.base
                .create_dirs(parent)
                .map_err(|e| self.io_error(&e, "written"))?;
        }
        let (mut file, existed) = match self.base.open_file(rel, Mode::CreateNew, Strategy::Best) {
            Ok(file) => {
                let meta = file.metadata().map_err(|e| self.io_error(&e, "written"))?;
                self.files.created.insert(&meta);
                (file, false)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let (file, _) = self.open_edit()?;
                file.set_len(0).map_err(|e| self.io_error(&e, "written"))?;
                (file, true)
            }
            Err(e) => return Err(self.io_error(&e, "written")),
        };
        file.write_all(content)
            .map_err(|e| self.io_error(&e, "written"))?;
        Ok(existed)
    }

    fn open(&self, mode: Mode) -> Result<(File, Metadata), Refused> {
        let what = if mode == Mode::Read {
            "read"
        } else {
            "written"
        };
        let file = self
            .base
            .open_file(self.rel()?, mode, Strategy::Best)
            .map_err(|e| self.io_error(&e, what))?;
        let meta = file.metadata().map_err(|e| self.io_error(&e, what))?;
        if !meta.is_file() && !meta.is_dir() {
            return Err(format!(
                "`{}` is not a regular file (a pipe, socket or device); file tools work on \
                 files",
                self.display
            ));
        }
        if meta.is_file() && meta.nlink() > 1 && !self.files.created.contains(&meta) {
            return Err(format!(
                "`{}` has {} hard links: another of its names may be outside the working \
                 directory, so file tools use a file with several names only if this session \
                 created it",
                self.display,
                meta.nlink()
            ));
        }
        Ok((file, meta))
    }

    fn rel(&self) -> Result<&Path, Refused> {
        self.rel.as_deref().ok_or_else(|| {
            format!(
                "`{}` is not beneath the directory it was checked against",
                self.display
            )
        })
    }

    fn only_files(&self, meta: &Metadata) -> Result<(), Refused> {
        if meta.is_dir() {
            Err(format!("`{}` is a directory", self.display))
        } else {
            Ok(())
        }
    }

    fn io_error(&self, e: &io::Error, what: &str) -> Refused {
        let shown = &self.display;
        if e.kind() == io::ErrorKind::NotFound {
            format!("`{shown}` does not exist")
        } else if e.raw_os_error() == Some(libc::EISDIR) {
            format!("`{shown}` is a directory")
        } else if is_link_error(e) {
            format!(
                "`{shown}` was not {what}: a symbolic link is on its path that was not there \
                 when it was checked, and file tools never follow one"
            )
        } else {
            format!("`{shown}`: {e}")
        }
    }
}
