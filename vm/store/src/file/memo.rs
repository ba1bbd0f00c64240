//! The file store's memo: one file per answer under `{state_dir}/memo/`, named by its key
//! (`memo/ab/cdef...`, the first two hex digits a directory, as Git keeps objects), written
//! atomically under a temporary name of its own. Entries are not synced: one a crash cut short fails
//! its checksum and is a miss.

use crate::fs;
use crate::BoxFuture;
use prose_runtime::memo::{MemoKey, MemoSize, MemoStore};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The memo in a directory.
#[derive(Clone, Debug)]
pub struct FileMemo {
    dir: PathBuf,
}

impl FileMemo {
    /// The memo in `dir`.
    pub fn new(dir: PathBuf) -> FileMemo {
        FileMemo { dir }
    }

    /// Where the entry for `key` is.
    fn path(&self, key: &MemoKey) -> PathBuf {
        let hex = key.hex();
        self.dir.join(&hex[..2]).join(&hex[2..])
    }

    /// Every entry's file, as `(path, bytes)`: those named as an entry of their directory
    /// (temporary files and anything else are left alone).
    fn entries(&self) -> std::io::Result<Vec<(PathBuf, u64)>> {
        let mut found = Vec::new();
        let top = match std::fs::read_dir(&self.dir) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(e),
        };
        for sub in top {
            let sub = sub?;
            let prefix = sub.file_name().to_string_lossy().into_owned();
            if !sub.file_type()?.is_dir() || prefix.len() != 2 {
                continue;
            }
            for e in std::fs::read_dir(sub.path())? {
                let e = e?;
                let name = e.file_name().to_string_lossy().into_owned();
                if e.file_type()?.is_file() && MemoKey::parse(&format!("{prefix}{name}")).is_some()
                {
                    found.push((e.path(), e.metadata()?.len()));
                }
            }
        }
        Ok(found)
    }
}

/// `e` about `path`, for a warning.
fn said(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

impl MemoStore for FileMemo {
    fn place(&self) -> String {
        self.dir.display().to_string()
    }

    fn get<'a>(&'a self, key: &'a MemoKey) -> BoxFuture<'a, Result<Option<Vec<u8>>, String>> {
        Box::pin(async move {
            let path = self.path(key);
            match fs::read(&path) {
                Ok(bytes) => Ok(Some(bytes)),
                // No entry, or no directory for it (where one is a file, nothing was kept).
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                    ) =>
                {
                    Ok(None)
                }
                Err(e) => Err(said(&path, e)),
            }
        })
    }

    fn put<'a>(&'a self, key: &'a MemoKey, entry: Vec<u8>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let path = self.path(key);
            if let Some(dir) = path.parent() {
                fs::ensure_dir(dir).map_err(|e| e.to_string())?;
            }
            // A name of its own for each write: two runs may keep the same answer at once.
            static WRITES: AtomicU64 = AtomicU64::new(0);
            let tmp = path.with_file_name(format!(
                ".{}.{}.{}.tmp",
                key.hex(),
                std::process::id(),
                WRITES.fetch_add(1, Ordering::Relaxed)
            ));
            let written = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .and_then(|mut f| f.write_all(&entry))
                .and_then(|()| std::fs::rename(&tmp, &path));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(said(&path, e));
            }
            Ok(())
        })
    }

    fn size(&self) -> BoxFuture<'_, Result<MemoSize, String>> {
        Box::pin(async move {
            let entries = self.entries().map_err(|e| said(&self.dir, e))?;
            Ok(MemoSize {
                entries: entries.len() as u64,
                bytes: entries.iter().map(|(_, n)| n).sum(),
            })
        })
    }

    fn clear(&self) -> BoxFuture<'_, Result<MemoSize, String>> {
        Box::pin(async move {
            let entries = self.entries().map_err(|e| said(&self.dir, e))?;
            let mut cleared = MemoSize::default();
            for (path, bytes) in entries {
                std::fs::remove_file(&path).map_err(|e| said(&path, e))?;
                cleared.entries += 1;
                cleared.bytes += bytes;
                if let Some(dir) = path.parent() {
                    // Gone once its last entry is (a directory still holding something
                    // stays).
                    let _ = std::fs::remove_dir(dir);
                }
            }
            Ok(cleared)
        })
    }
}
