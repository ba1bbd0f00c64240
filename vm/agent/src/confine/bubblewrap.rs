//! Commands confined by bubblewrap (`bwrap`), where it is installed and can create its
//! namespaces.
//!
//! A command sees the whole file system read-only, except:
//!
//! - its **write roots** (the directories the agent's `write` patterns name, or the working
//!   directory when it has none) are writable;
//! - the **protected** places inside them (`super::super::protected`) stay read-only: an
//!   existing `.git` or `prose.toml` is bound read-only over itself, and a missing one gets a
//!   read-only placeholder for the command's lifetime (removed after), so it cannot be
//!   created either; the directories leading to a protected path are bound over themselves,
//!   which makes them mount points that cannot be renamed or removed to take the path away;
//! - the **state directories** are replaced by empty read-only directories (hidden);
//! - `/tmp` is a private, empty tmpfs, `/dev` holds only the basic devices, and `/proc` is
//!   the sandbox's own; when the working directory lies under `/tmp`, the directory of
//!   `/tmp` that holds it is bound read-only into the private one
//!   (`shared_tmp_tree`), so the working directory and the tree around it look as
//!   they would anywhere else (read-only but for the write roots), while the rest of `/tmp`
//!   stays out of sight.
//!
//! It runs in its own user, PID, IPC and (unless the agent has the network) network
//! namespaces, with no capabilities and no way to create further user namespaces: the VM and
//! every other process are invisible, and when the command's shell exits, or the VM kills
//! the sandbox, the kernel kills everything left inside. It is a new session, so it cannot
//! push input into the VM's terminal.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::super::beneath::{is_link_error, Mode, Root, Strategy};
use super::{shared_tmp_tree, Plan};

/// The bubblewrap program looked for on `PATH`.
pub const BWRAP: &str = "bwrap";

/// Where bubblewrap is, if a trial sandbox with every namespace the real ones use starts;
/// otherwise why not.
pub(super) fn probe() -> Result<PathBuf, String> {
    if !cfg!(target_os = "linux") {
        return Err("bubblewrap needs Linux".into());
    }
    let Some(bwrap) = find_on_path(BWRAP) else {
        return Err("bubblewrap (`bwrap`) is not installed".into());
    };
    let mut cmd = std::process::Command::new(&bwrap);
    cmd.args(base_args(false, None))
        .args(["--", "sh", "-c", ":"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    match cmd.output() {
        Ok(out) if out.status.success() => Ok(bwrap),
        Ok(out) => {
            let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
            Err(format!(
                "bubblewrap cannot create a sandbox here ({}); the kernel must allow user \
                 namespaces (sysctl kernel.unprivileged_userns_clone=1, or \
                 user.max_user_namespaces above 0)",
                if why.is_empty() {
                    format!("{}", out.status)
                } else {
                    why
                }
            ))
        }
        Err(e) => Err(format!(
            "bubblewrap (`{}`) could not be started: {e}",
            bwrap.display()
        )),
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// The arguments every sandbox starts with: namespaces, no capabilities, the file system
/// read-only, private `/dev`, `/proc` and `/tmp` (with `tmp_tree`, the part of the real
/// `/tmp` holding the working directory, bound back read-only).
fn base_args(network: bool, tmp_tree: Option<&Path>) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--unshare-user",
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    if !network {
        args.push("--unshare-net".into());
    }
    for a in [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ] {
        args.push(a.into());
    }
    if let Some(tree) = tmp_tree {
        args.extend(["--ro-bind".into(), tree.into(), tree.into()]);
    }
    args
}

/// What a command may touch under bubblewrap, kept until the command has ended (dropping it
/// removes the placeholders it made).
///
/// Every path it makes writable or read-only is opened first, beneath the working directory
/// and following no link (`super::super::beneath`), and handed to bubblewrap as a descriptor
/// (`--bind-fd`, `--ro-bind-fd`): a link another process swaps in meanwhile can make the
/// sandbox fail to set up, never mount something else in its place.
#[derive(Debug)]
pub struct Confinement {
    /// The bubblewrap program.
    bwrap: PathBuf,
    workdir: PathBuf,
    network: bool,
    /// What is mounted, in order, after the base arguments.
    mounts: Vec<Mount>,
    /// The working directory, held open, for the placeholders' removal.
    base: Arc<Root>,
    /// Protected paths that did not exist: placeholders this confinement holds.
    placeholders: Vec<Placeholder>,
}

/// One mount of a confinement.
#[derive(Debug)]
enum Mount {
    /// The path `handle` was opened at, bound over itself.
    Bind {
        handle: OwnedFd,
        at: PathBuf,
        writable: bool,
    },
    /// An empty read-only directory over `at`.
    Hide(PathBuf),
}

/// A protected path that does not exist, held as an empty read-only placeholder while
/// commands run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placeholder {
    path: PathBuf,
    dir: bool,
}

/// The placeholders in use in this process, with how many confinements hold each: the last
/// to let go removes it. A placeholder found on disk but not here is taken for a real file.
fn placeholders() -> &'static Mutex<HashMap<PathBuf, usize>> {
    static HELD: OnceLock<Mutex<HashMap<PathBuf, usize>>> = OnceLock::new();
    HELD.get_or_init(Default::default)
}

/// Whether a confinement of this process holds a placeholder at `path` now.
pub(super) fn holds(path: &Path) -> bool {
    placeholders()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains_key(path)
}

impl Confinement {
    /// The confinement of `plan` run by `bwrap`: writable roots without nesting, protected
    /// paths sorted into those that exist (bound read-only) and those that do not
    /// (placeholders made now).
    pub fn new(plan: Plan<'_>, bwrap: &Path) -> Result<Confinement, String> {
        let base = plan.workdir.clone();
        let workdir = base.path().to_path_buf();
        let roots = plan.roots();
        let inside = |path: &Path| roots.iter().any(|w| path.starts_with(w));
        let hidden: Vec<PathBuf> = plan
            .hidden
            .into_iter()
            .filter(|h| h.is_dir() && !workdir.starts_with(h))
            .collect();
        let mut read_only: Vec<PathBuf> = Vec::new();
        let mut confinement = Confinement {
            bwrap: bwrap.to_path_buf(),
            workdir,
            network: plan.network,
            mounts: Vec::new(),
            base,
            placeholders: Vec::new(),
        };
        {
            let mut held = placeholders().lock().unwrap_or_else(|e| e.into_inner());
            for (path, dir) in plan.protect {
                if !inside(&path)
                    || hidden.contains(&path)
                    || read_only.contains(&path)
                    || confinement.placeholders.iter().any(|p| p.path == path)
                {
                    continue;
                }
                if let Some(count) = held.get_mut(&path) {
                    *count += 1;
                    confinement.placeholders.push(Placeholder { path, dir });
                    continue;
                }
                if std::fs::symlink_metadata(&path).is_ok() {
                    read_only.push(path);
                    continue;
                }
                if !path.parent().is_some_and(Path::is_dir) {
                    // Its directory does not exist: nothing looks for it there.
                    continue;
                }
                let rel = confinement.rel(&path)?;
                let made = if dir {
                    confinement.base.create_dirs(rel)
                } else {
                    confinement
                        .base
                        .open_file(rel, Mode::CreateNew, Strategy::Best)
                        .map(drop)
                };
                match made {
                    Ok(()) => {
                        held.insert(path.clone(), 1);
                        confinement.placeholders.push(Placeholder { path, dir });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_only.push(path),
                    Err(e) => {
                        return Err(format!(
                            "could not hold the protected path `{}` for the sandbox: {e}",
                            path.display()
                        ))
                    }
                }
            }
        }
        for w in &roots {
            confinement.bind(w, true)?;
        }
        // The directories between a writable root and a protected path become mount points
        // (bound over themselves, still writable), so they cannot be renamed away.
        let protected: Vec<PathBuf> = read_only
            .iter()
            .chain(confinement.placeholders.iter().map(|p| &p.path))
            .chain(&hidden)
            .cloned()
            .collect();
        let mut pinned: Vec<PathBuf> = Vec::new();
        for path in &protected {
            let Some(root) = roots.iter().find(|w| path.starts_with(w)) else {
                continue;
            };
            let mut dirs: Vec<&Path> = path
                .ancestors()
                .skip(1)
                .take_while(|d| d.starts_with(root) && *d != root.as_path())
                .collect();
            dirs.reverse();
            for d in dirs {
                if !pinned.iter().any(|p| p == d) {
                    pinned.push(d.to_path_buf());
                    confinement.bind(d, true)?;
                }
            }
        }
        for path in &read_only {
            confinement.bind(path, false)?;
        }
        for p in confinement.placeholders.clone() {
            if p.dir {
                confinement.mounts.push(Mount::Hide(p.path));
            } else {
                confinement.bind(&p.path, false)?;
            }
        }
        confinement
            .mounts
            .extend(hidden.into_iter().map(Mount::Hide));
        Ok(confinement)
    }

    /// `path` relative to the working directory.
    fn rel<'p>(&self, path: &'p Path) -> Result<&'p Path, String> {
        path.strip_prefix(&self.workdir).map_err(|_| {
            format!(
                "`{}` is outside the working directory `{}`",
                path.display(),
                self.workdir.display()
            )
        })
    }

    /// Adds a bind of `path` over itself, opened now beneath the working directory.
    fn bind(&mut self, path: &Path, writable: bool) -> Result<(), String> {
        let rel = self.rel(path)?;
        let handle = self
            .base
            .open_file(rel, Mode::Handle, Strategy::Best)
            .map_err(|e| {
                if is_link_error(&e) {
                    format!(
                        "`{}` became a symbolic link while the sandbox was set up",
                        path.display()
                    )
                } else {
                    format!("`{}`: {e}", path.display())
                }
            })?;
        self.mounts.push(Mount::Bind {
            handle: handle.into(),
            at: path.to_path_buf(),
            writable,
        });
        Ok(())
    }

    /// The command that runs `program` with `args` inside this confinement, inheriting the
    /// descriptors of what it binds, in a process group of its own (bubblewrap's).
    pub fn command(&self, program: &OsStr, args: &[OsString]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.bwrap);
        cmd.args(self.bwrap_args())
            .arg(program)
            .args(args)
            .process_group(0);
        let fds: Vec<RawFd> = self
            .mounts
            .iter()
            .filter_map(|m| match m {
                Mount::Bind { handle, .. } => Some(handle.as_raw_fd()),
                Mount::Hide(_) => None,
            })
            .collect();
        // SAFETY: the closure runs in the child between fork and exec; it only calls fcntl,
        // which is async-signal-safe, on descriptors this confinement keeps open until the
        // command has been started.
        unsafe {
            cmd.pre_exec(move || {
                for fd in &fds {
                    if libc::fcntl(*fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        cmd
    }

    /// The bubblewrap arguments that set up this confinement, ending with `--`; the command
    /// to run follows them.
    fn bwrap_args(&self) -> Vec<OsString> {
        let mut args = base_args(self.network, shared_tmp_tree(&self.workdir).as_deref());
        for m in &self.mounts {
            match m {
                Mount::Bind {
                    handle,
                    at,
                    writable,
                } => {
                    args.push(
                        if *writable {
                            "--bind-fd"
                        } else {
                            "--ro-bind-fd"
                        }
                        .into(),
                    );
                    args.push(handle.as_raw_fd().to_string().into());
                    args.push(at.into());
                }
                Mount::Hide(at) => {
                    args.push("--tmpfs".into());
                    args.push(at.into());
                    args.push("--remount-ro".into());
                    args.push(at.into());
                }
            }
        }
        args.push("--chdir".into());
        args.push(self.workdir.as_os_str().into());
        args.push("--".into());
        args
    }
}

impl Drop for Confinement {
    fn drop(&mut self) {
        if self.placeholders.is_empty() {
            return;
        }
        let mut held = placeholders().lock().unwrap_or_else(|e| e.into_inner());
        for p in &self.placeholders {
            let last = match held.get_mut(&p.path) {
                Some(count) if *count > 1 => {
                    *count -= 1;
                    false
                }
                Some(_) => {
                    held.remove(&p.path);
                    true
                }
                None => false,
            };
            if let (true, Ok(rel)) = (last, p.path.strip_prefix(&self.workdir)) {
                // Only an empty placeholder is removed, beneath the working directory and
                // following no link: nothing else is ever deleted here.
                let _ = self.base.remove_if_empty(rel, p.dir);
            }
        }
    }
}
