//! File access inside run directories. Nothing here follows a symbolic link in the last
//! component of a path (`O_NOFOLLOW`), directories are created only where nothing, or a
//! real directory, stands, and a run directory holding a link anywhere is refused, so a
//! planted link can neither redirect a write nor truncate a file elsewhere. File names
//! derived from data come from [`file_name`], the one place that decides whether a name may
//! become a path.

use super::StoreError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

fn io<T>(path: &Path, r: std::io::Result<T>) -> Result<T, StoreError> {
    r.map_err(|e| StoreError::Io(path.to_path_buf(), e))
}

/// `name` as a file name in a run directory, or an error saying why it cannot be one: it
/// must be a single path component (see [`bytecode_spec::names::is_file_name`]). Every
/// name that comes from a program, its inputs or a driver goes through here before it is
/// joined to a path.
pub fn file_name(name: &str) -> Result<&str, StoreError> {
    if bytecode_spec::names::is_file_name(name) {
        Ok(name)
    } else {
        let shown: String = name.chars().take(64).collect();
        Err(StoreError::Invalid(format!(
            "{shown:?} cannot be a file name (it must be one path component, without `/` or `..`)"
        )))
    }
}

/// `base` joined with the relative directory `rel` (a `persist: "dir"` value), each of
/// whose components must be a [`file_name`]; an absolute path or one climbing with `..` is
/// refused.
pub fn relative_dir(base: &Path, rel: &str) -> Result<PathBuf, StoreError> {
    let parts = bytecode_spec::names::relative_components(rel).ok_or_else(|| {
        StoreError::Invalid(format!(
            "persist path {rel:?} must be relative and may not contain `..`"
        ))
    })?;
    Ok(parts.iter().fold(base.to_path_buf(), |p, c| p.join(c)))
}

/// Options that open `path` without following a link in its last component.
fn nofollow() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    o
}

/// Opens an existing file for reading, not through a link.
pub fn open_read(path: &Path) -> std::io::Result<File> {
    nofollow().read(true).open(path)
}

/// The bytes of the file at `path`, not read through a link.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = open_read(path)?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The text of the file at `path`, not read through a link.
pub fn read_to_string(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read(path)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Opens (creating if needed) the file at `path` for appending, not through a link.
pub fn open_append(path: &Path) -> std::io::Result<File> {
    nofollow().create(true).append(true).open(path)
}

/// Opens (creating if needed) the file at `path` for reading and writing without
/// truncating it, not through a link.
pub fn open_rw(path: &Path) -> std::io::Result<File> {
    nofollow().read(true).write(true).create(true).open(path)
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a reader never sees
/// half a file; with `durable`, the file is synced before the rename (for records the run
/// trusts; the views, rebuilt from the journal, skip it). A link at `path` is replaced, not
/// followed; a link at the temporary name is refused.
fn write_replacing(path: &Path, bytes: &[u8], durable: bool) -> Result<(), StoreError> {
    let tmp = path.with_extension("tmp");
    let mut f = io(
        &tmp,
        nofollow()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp),
    )?;
    io(&tmp, f.write_all(bytes))?;
    if durable {
        io(&tmp, f.sync_all())?;
    }
    io(path, std::fs::rename(&tmp, path))
}

/// Writes a new file at `path`, which must not exist (not even as a link), without a
/// temporary name: for files in a directory nobody else sees yet (a new run's, built under
/// a temporary name and renamed into place whole).
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut f = io(path, nofollow().write(true).create_new(true).open(path))?;
    io(path, f.write_all(bytes))
}

/// Writes a record the run depends on (`run.json`, the artifact, agent memory): atomically
/// and synced.
pub fn write_durable(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_replacing(path, bytes, true)
}

/// Writes a file atomically without syncing it: a view (a binding file, `state.md`), which
/// resuming rebuilds from the journal, or a new run's files, which the journal's first sync
/// makes durable ([`super::journal::Journal::sync_first`]).
pub fn write_unsynced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_replacing(path, bytes, false)
}

/// Makes the file or directory at `path` durable (a directory: the names in it).
pub fn sync_path(path: &Path) -> std::io::Result<()> {
    open_read(path)?.sync_all()
}

/// Makes `files` (written with [`write_unsynced`]) and their names durable together, at the
/// cost of one sync, not one per file: on Linux one `syncfs(2)` per file system holding
/// them (which also writes what other processes left unsynced there); elsewhere each file
/// and then each directory holding one is synced.
pub fn sync_together(files: &std::collections::BTreeSet<PathBuf>) -> Result<(), StoreError> {
    let dirs: std::collections::BTreeSet<&Path> = files.iter().filter_map(|f| f.parent()).collect();
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let mut devices = std::collections::BTreeSet::new();
        for dir in dirs {
            let d = io(dir, open_read(dir))?;
            if !devices.insert(io(dir, d.metadata())?.dev()) {
                continue;
            }
            // SAFETY: syncfs(2) on a descriptor `d` owns; no memory is shared.
            if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
                return Err(StoreError::Io(
                    dir.to_path_buf(),
                    std::io::Error::last_os_error(),
                ));
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        for f in files {
            io(f, sync_path(f))?;
        }
        for dir in dirs {
            io(dir, sync_path(dir))?;
        }
    }
    Ok(())
}

/// Makes sure `dir` is a directory, creating it and its missing parents; refuses a link
/// where a directory should be.
pub fn ensure_dir(dir: &Path) -> Result<(), StoreError> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(StoreError::Invalid(format!(
            "{} should be a directory, and is a link or a file",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                ensure_dir(parent)?;
            }
            match std::fs::create_dir(dir) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => ensure_dir(dir),
                r => io(dir, r),
            }
        }
        Err(e) => Err(StoreError::Io(dir.to_path_buf(), e)),
    }
}

/// Refuses `dir` if it, or anything under it, is a symbolic link. Walks without recursion
/// and without following links.
pub fn refuse_links(dir: &Path) -> Result<(), StoreError> {
    let link = |p: &Path| {
        Err(StoreError::Invalid(format!(
            "{} is a symbolic link; a run directory may not hold links",
            p.display()
        )))
    };
    let meta = io(dir, std::fs::symlink_metadata(dir))?;
    if meta.file_type().is_symlink() {
        return link(dir);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in io(&d, std::fs::read_dir(&d))? {
            let entry = io(&d, entry)?;
            let kind = io(&entry.path(), entry.file_type())?;
            if kind.is_symlink() {
                return link(&entry.path());
            }
            if kind.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("prosevm-fs-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    #[test]
    fn a_new_file_is_never_written_over_a_file_or_through_a_link() {
        let dir = temp("new");
        let outside = dir.join("outside");
        std::fs::write(&outside, "keep").expect("write");
        symlink(&outside, dir.join("link")).expect("link");
        std::fs::write(dir.join("taken"), "keep").expect("write");
        assert!(write_new(&dir.join("link"), b"x").is_err());
        assert!(write_new(&dir.join("taken"), b"x").is_err());
        assert_eq!(std::fs::read_to_string(&outside).expect("read"), "keep");
        assert_eq!(
            std::fs::read_to_string(dir.join("taken")).expect("read"),
            "keep"
        );
        write_new(&dir.join("fresh"), b"new").expect("a fresh name is written");
        assert_eq!(std::fs::read(dir.join("fresh")).expect("read"), b"new");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn writes_replace_a_planted_link_instead_of_following_it() {
        let dir = temp("replace");
        let outside = dir.join("outside.txt");
        std::fs::write(&outside, "keep").expect("outside");
        let run = dir.join("run");
        std::fs::create_dir(&run).expect("run");
        symlink(&outside, run.join("state.md")).expect("link");
        write_unsynced(&run.join("state.md"), b"view").expect("written");
        sync_path(&run.join("state.md")).expect("synced");
        sync_path(&run).expect("a directory syncs too");
        assert_eq!(std::fs::read_to_string(&outside).expect("outside"), "keep");
        assert_eq!(
            read_to_string(&run.join("state.md")).expect("state"),
            "view"
        );
        // A link at the temporary name is refused.
        symlink(&outside, run.join("run.tmp")).expect("link");
        assert!(write_durable(&run.join("run.json"), b"{}").is_err());
        assert_eq!(std::fs::read_to_string(&outside).expect("outside"), "keep");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn files_are_synced_together_and_a_missing_directory_is_an_error() {
        let dir = temp("together");
        let files: std::collections::BTreeSet<PathBuf> = (1..=3)
            .map(|i| dir.join(format!("keeper-00{i}.md")))
            .collect();
        for f in &files {
            write_unsynced(f, b"segment").expect("written");
        }
        sync_together(&files).expect("synced");
        sync_together(&Default::default()).expect("nothing to sync");
        let gone = [dir.join("gone").join("memory.md")].into();
        assert!(sync_together(&gone).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn links_are_neither_read_nor_appended_through() {
        let dir = temp("open");
        let outside = dir.join("outside.txt");
        std::fs::write(&outside, "secret").expect("outside");
        symlink(&outside, dir.join("journal.log")).expect("link");
        assert!(read(&dir.join("journal.log")).is_err());
        assert!(open_append(&dir.join("journal.log")).is_err());
        assert!(open_rw(&dir.join("journal.log")).is_err());
        assert_eq!(
            std::fs::read_to_string(&outside).expect("outside"),
            "secret"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn directories_are_made_only_where_no_link_stands() {
        let dir = temp("dirs");
        ensure_dir(&dir.join("a/b/c")).expect("made");
        assert!(dir.join("a/b/c").is_dir());
        ensure_dir(&dir.join("a/b")).expect("already there");
        let elsewhere = dir.join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("elsewhere");
        symlink(&elsewhere, dir.join("bindings")).expect("link");
        assert!(ensure_dir(&dir.join("bindings")).is_err());
        assert!(ensure_dir(&dir.join("bindings/deeper")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_link_anywhere_in_a_run_is_found() {
        let dir = temp("walk");
        ensure_dir(&dir.join("imports/local--x/bindings")).expect("dirs");
        std::fs::write(dir.join("imports/local--x/bindings/a.md"), "a").expect("file");
        refuse_links(&dir).expect("no links yet");
        symlink("/etc/passwd", dir.join("imports/local--x/bindings/b.md")).expect("link");
        let e = refuse_links(&dir).expect_err("link found");
        assert!(e.to_string().contains("b.md is a symbolic link"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names_and_relative_dirs() {
        assert_eq!(file_name("plan.md").expect("ok"), "plan.md");
        for bad in ["../x.md", "/abs", "a/b", "..", ""] {
            assert!(file_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            relative_dir(Path::new("/p"), ".prose/shared/log/").expect("ok"),
            Path::new("/p/.prose/shared/log")
        );
        assert!(relative_dir(Path::new("/p"), "../up").is_err());
        assert!(relative_dir(Path::new("/p"), "/etc").is_err());
    }
}
