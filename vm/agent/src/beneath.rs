//! Opening files beneath a directory without following any symbolic link, atomically: what
//! the file tools use once the sandbox has checked a path, so that nothing swapped in between
//! the check and the use (a directory replaced by a link to `/`, say) can lead them outside.
//!
//! On Linux 5.6 and later this is one `openat2` call with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`; elsewhere (older kernels, or where a seccomp filter refuses
//! `openat2`) the path is walked one component at a time, each directory opened with
//! `O_NOFOLLOW` relative to the one before. Either way a symbolic link anywhere on the path,
//! the last component included, is an error (`ELOOP`, or `EXDEV` for a path leaving the
//! directory), and `..` is refused before anything is opened.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether `openat2` was found missing (ENOSYS) once: then every later open walks.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// How to open a file beneath a [`Root`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// For reading (a file or a directory).
    Read,
    /// For reading and writing an existing file.
    ReadWrite,
    /// Create a new file for writing; fails if anything exists at the path.
    CreateNew,
    /// A handle to the file or directory itself (`O_PATH`), to hand to another program: it
    /// grants no access by itself.
    Handle,
}

impl Mode {
    fn flags(self) -> libc::c_int {
        match self {
            // Non-blocking, so that opening a FIFO cannot hang the tool (it is refused
            // afterwards, as nothing but files and directories is); no effect on files.
            Mode::Read => libc::O_RDONLY | libc::O_NONBLOCK,
            Mode::ReadWrite => libc::O_RDWR | libc::O_NONBLOCK,
            Mode::CreateNew => libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            Mode::Handle => libc::O_PATH,
        }
    }
}

/// The resolution strategy, chosen per call (tests force the walk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// `openat2` when the kernel has it, else the walk.
    Best,
    /// The component-by-component walk with `O_NOFOLLOW`.
    Walk,
}

/// A directory files are opened beneath, held open: renaming or replacing its path later
/// does not change what it refers to.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

impl Root {
    /// Opens the directory `path` (which must not itself be a symbolic link).
    pub fn open(path: &Path) -> io::Result<Root> {
        let c = cstring(path.as_os_str().as_bytes())?;
        // SAFETY: `c` is a valid NUL-terminated string; the returned descriptor is checked
        // and then owned.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        Ok(Root {
            fd: owned(fd)?,
            path: path.to_path_buf(),
        })
    }

    /// The directory's path as opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens `rel` beneath this directory in `mode` (new files get mode 0666 less the
    /// umask, as `std::fs::write` gives them), refusing any symbolic link on the way and any
    /// `..`.
    pub fn open_file(&self, rel: &Path, mode: Mode, strategy: Strategy) -> io::Result<File> {
        let file = self.open_unchecked(rel, mode, strategy)?;
        // `O_PATH | O_NOFOLLOW` opens a link itself rather than failing.
        if mode == Mode::Handle && file.metadata()?.file_type().is_symlink() {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        Ok(file)
    }

    fn open_unchecked(&self, rel: &Path, mode: Mode, strategy: Strategy) -> io::Result<File> {
        let parts = components(rel)?;
        if parts.is_empty() {
            return if matches!(mode, Mode::Read | Mode::Handle) {
                // The root itself.
                dup(&self.fd).map(File::from)
            } else {
                Err(io::Error::from_raw_os_error(libc::EISDIR))
            };
        }
        // openat2 refuses flags that mean nothing with O_PATH, such as O_NOCTTY.
        let tty = if mode == Mode::Handle {
            0
        } else {
            libc::O_NOCTTY
        };
        let flags = mode.flags() | libc::O_CLOEXEC | libc::O_NOFOLLOW | tty;
        if strategy == Strategy::Best && !NO_OPENAT2.load(Ordering::Relaxed) {
            match openat2(&self.fd, rel, flags) {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                }
                // A seccomp filter that refuses the call (containers): walk this time.
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
                other => return other.map(File::from),
            }
        }
        let (last, dirs) = parts.split_last().expect("not empty");
        let dir = self.walk(dirs, false)?;
        openat(&dir, last, flags).map(File::from)
    }

    /// Creates the directories of `rel` that do not exist, beneath this directory, without
    /// following symbolic links (an existing link on the way is an error).
    pub fn create_dirs(&self, rel: &Path) -> io::Result<()> {
        let parts = components(rel)?;
        self.walk(&parts, true).map(drop)
    }

    /// Removes `rel` beneath this directory if it is an empty directory (`dir`) or an empty
    /// regular file, following no link; anything else is left alone (and not an error).
    pub fn remove_if_empty(&self, rel: &Path, dir: bool) -> io::Result<()> {
        let parts = components(rel)?;
        let Some((last, dirs)) = parts.split_last() else {
            return Ok(());
        };
        let parent = self.walk(dirs, false)?;
        // SAFETY: `stat` is plain data; zeroed is a valid value for fstatat to fill in.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open directory, a valid C string and a valid `stat` to write.
        let found = unsafe {
            libc::fstatat(
                parent.as_raw_fd(),
                last.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if found != 0 {
            return Ok(());
        }
        let kind = st.st_mode & libc::S_IFMT;
        let flags = if dir && kind == libc::S_IFDIR {
            libc::AT_REMOVEDIR
        } else if !dir && kind == libc::S_IFREG && st.st_size == 0 {
            0
        } else {
            return Ok(());
        };
        // SAFETY: an open directory and a valid C string; a directory that is not empty is
        // not removed (the call fails, which is fine).
        unsafe {
            libc::unlinkat(parent.as_raw_fd(), last.as_ptr(), flags);
        }
        Ok(())
    }

    /// Removes `rel` beneath this directory whatever it is (a directory with everything in
    /// it), following no link: a link is removed itself, never what it leads to. Nothing
    /// there is not an error.
    pub fn remove_tree(&self, rel: &Path) -> io::Result<()> {
        let parts = components(rel)?;
        let Some((last, dirs)) = parts.split_last() else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        let parent = self.walk(dirs, false)?;
        // SAFETY: `stat` is plain data; zeroed is a valid value for fstatat to fill in.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open directory, a valid C string and a valid `stat` to write.
        let found = unsafe {
            libc::fstatat(
                parent.as_raw_fd(),
                last.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if found != 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            };
        }
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            // The parent held open, named through its descriptor: std's removal opens each
            // directory without following links from there.
            let here = Path::new("/proc/self/fd")
                .join(parent.as_raw_fd().to_string())
                .join(std::ffi::OsStr::from_bytes(last.as_bytes()));
            return std::fs::remove_dir_all(here);
        }
        // SAFETY: an open directory and a valid C string.
        if unsafe { libc::unlinkat(parent.as_raw_fd(), last.as_ptr(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Opens the directories `parts` one after the other with `O_NOFOLLOW`, creating those
    /// missing when `create` is set.
    fn walk(&self, parts: &[CString], create: bool) -> io::Result<OwnedFd> {
        let mut dir = dup(&self.fd)?;
        for part in parts {
            let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            dir = match openat(&dir, part, flags) {
                Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                    // SAFETY: `dir` is an open directory and `part` a valid C string.
                    let made = unsafe { libc::mkdirat(dir.as_raw_fd(), part.as_ptr(), 0o755) };
                    if made != 0 {
                        let e = io::Error::last_os_error();
                        if e.kind() != io::ErrorKind::AlreadyExists {
                            return Err(e);
                        }
                    }
                    openat(&dir, part, flags)?
                }
                // A link where a directory is expected fails with ENOTDIR (O_DIRECTORY is
                // checked first): report it as the link it is.
                Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) && is_link(&dir, part) => {
                    return Err(io::Error::from_raw_os_error(libc::ELOOP))
                }
                other => other?,
            };
        }
        Ok(dir)
    }
}

/// What an [`Entry`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory.
    Dir,
    /// A symbolic link.
    Link,
    /// Anything else: a file, a device, a socket, a FIFO.
    Other,
}

/// One entry of a directory, opened as a handle (`O_PATH`) without following it.
#[derive(Debug)]
pub struct Entry {
    /// Its name in the directory.
    pub name: std::ffi::OsString,
    /// The handle: it grants no access by itself.
    pub handle: OwnedFd,
    /// What it is.
    pub kind: EntryKind,
}

/// The entries of the directory `dir` (open, or a handle), each opened as a handle relative
/// to it without following links; an entry removed meanwhile is left out.
pub fn entries(dir: &OwnedFd) -> io::Result<Vec<Entry>> {
    let listed = std::fs::read_dir(Path::new("/proc/self/fd").join(dir.as_raw_fd().to_string()))?;
    let mut found = Vec::new();
    for item in listed {
        let name = item?.file_name();
        let c = cstring(name.as_bytes())?;
        let handle = match openat(dir, &c, libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) {
            Ok(h) => h,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let kind = File::from(handle.try_clone()?).metadata()?.file_type();
        let kind = if kind.is_dir() {
            EntryKind::Dir
        } else if kind.is_symlink() {
            EntryKind::Link
        } else {
            EntryKind::Other
        };
        found.push(Entry { name, handle, kind });
    }
    Ok(found)
}

/// A handle (`O_PATH`) to the absolute path `path`, whose last component is not followed
/// if it is a link.
pub fn handle(path: &Path) -> io::Result<OwnedFd> {
    let c = cstring(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a valid NUL-terminated string; the returned descriptor is checked and
    // then owned.
    owned(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })
}

/// The normal components of `rel` as C strings; `..`, a root or a prefix is an error.
fn components(rel: &Path) -> io::Result<Vec<CString>> {
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => parts.push(cstring(n.as_bytes())?),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "only relative paths without `..` are opened beneath a directory",
                ))
            }
        }
    }
    Ok(parts)
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel, is open, and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn dup(fd: &OwnedFd) -> io::Result<OwnedFd> {
    fd.try_clone()
}

/// Whether `name` in `dir` is a symbolic link.
fn is_link(dir: &OwnedFd, name: &CString) -> bool {
    // SAFETY: `stat` is plain data; zeroed is a valid value for fstatat to fill in.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: an open directory, a valid C string and a valid `stat` to write.
    let done = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    done == 0 && st.st_mode & libc::S_IFMT == libc::S_IFLNK
}

fn openat(dir: &OwnedFd, name: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `dir` is an open directory, `name` a valid C string; the mode is read only
    // with O_CREAT.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, 0o666 as libc::c_uint) };
    owned(fd)
}

#[cfg(target_os = "linux")]
fn openat2(dir: &OwnedFd, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let path = cstring(rel.as_os_str().as_bytes())?;
    // SAFETY: `open_how` is plain data; zeroed is a valid value, then filled in.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.mode = if flags & libc::O_CREAT != 0 { 0o666 } else { 0 };
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: the arguments are an open directory, a valid C string, a valid `open_how` and
    // its size, as openat2(2) takes them.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    owned(fd as libc::c_int)
}

#[cfg(not(target_os = "linux"))]
fn openat2(_: &OwnedFd, _: &Path, _: libc::c_int) -> io::Result<OwnedFd> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// Whether an error from [`Root::open_file`] means a symbolic link was on the path (or the
/// path left the directory).
pub fn is_link_error(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::EXDEV))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("prosevm-beneath-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn links_anywhere_on_the_path_are_refused_by_both_strategies() {
        let root = scratch("links");
        let work = root.join("work");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::fs::write(root.join("secret"), "secret").unwrap();
        std::fs::write(work.join("sub/file"), "inside").unwrap();
        symlink(&root, work.join("up")).unwrap();
        symlink(root.join("secret"), work.join("sub/link")).unwrap();
        let r = Root::open(&work).unwrap();
        for strategy in [Strategy::Best, Strategy::Walk] {
            let mut text = String::new();
            r.open_file(Path::new("sub/file"), Mode::Read, strategy)
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
            assert_eq!(text, "inside");
            for path in ["up/secret", "sub/link", "up/work/sub/file"] {
                let e = r
                    .open_file(Path::new(path), Mode::Read, strategy)
                    .unwrap_err();
                assert!(is_link_error(&e), "{strategy:?} {path}: {e}");
            }
            let e = r
                .open_file(Path::new("up/new"), Mode::CreateNew, strategy)
                .unwrap_err();
            assert!(is_link_error(&e), "{e}");
            assert!(r
                .open_file(Path::new("../secret"), Mode::Read, strategy)
                .is_err());
        }
        assert!(!root.join("new").exists());
        assert!(r.create_dirs(Path::new("up/made")).is_err());
        assert!(!root.join("made").exists());
        r.create_dirs(Path::new("a/b/c")).unwrap();
        let mut f = r
            .open_file(Path::new("a/b/c/new.txt"), Mode::CreateNew, Strategy::Walk)
            .unwrap();
        f.write_all(b"made").unwrap();
        assert_eq!(
            std::fs::read_to_string(work.join("a/b/c/new.txt")).unwrap(),
            "made"
        );
        assert!(r
            .open_file(Path::new("a/b/c/new.txt"), Mode::CreateNew, Strategy::Best)
            .is_err());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn handles_refuse_links_and_placeholders_are_removed_only_when_empty() {
        let root = scratch("handles");
        let work = root.join("work");
        std::fs::create_dir_all(work.join("d")).unwrap();
        std::fs::write(work.join("full"), "x").unwrap();
        std::fs::write(work.join("empty"), "").unwrap();
        std::fs::write(root.join("outside-empty"), "").unwrap();
        symlink(root.join("outside-empty"), work.join("link")).unwrap();
        let r = Root::open(&work).unwrap();
        for strategy in [Strategy::Best, Strategy::Walk] {
            assert!(r.open_file(Path::new("d"), Mode::Handle, strategy).is_ok());
            assert!(r.open_file(Path::new(""), Mode::Handle, strategy).is_ok());
            let e = r
                .open_file(Path::new("link"), Mode::Handle, strategy)
                .unwrap_err();
            assert!(is_link_error(&e), "{strategy:?}: {e}");
        }
        for (path, dir) in [
            ("full", false),
            ("link", false),
            ("d", false),
            ("empty", true),
        ] {
            r.remove_if_empty(Path::new(path), dir).unwrap();
            assert!(
                std::fs::symlink_metadata(work.join(path)).is_ok(),
                "{path} was removed"
            );
        }
        std::fs::write(work.join("d/x"), "").unwrap();
        r.remove_if_empty(Path::new("d"), true).unwrap();
        assert!(
            work.join("d/x").exists(),
            "a directory with something in it stays"
        );
        r.remove_if_empty(Path::new("d/x"), false).unwrap();
        r.remove_if_empty(Path::new("d"), true).unwrap();
        r.remove_if_empty(Path::new("empty"), false).unwrap();
        assert!(!work.join("d").exists() && !work.join("empty").exists());
        assert!(root.join("outside-empty").exists());
        let _ = std::fs::remove_dir_all(&root);
    }
}
