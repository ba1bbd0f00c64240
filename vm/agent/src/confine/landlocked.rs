//! Commands confined by Landlock and seccomp, for where bubblewrap is missing or cannot run
//! (no user namespaces): nothing to install, the kernel's own rules (Landlock ABI 6, Linux
//! 6.12, or later).
//!
//! The command's process applies them to itself between fork and exec (`super::child`): a new
//! session and process group, death with the VM, no capabilities, no new privileges, the
//! Landlock ruleset built here, then the seccomp filters (`super::seccomp`). The ruleset
//! gives the reads and writes bubblewrap's mounts give, as far as rules on directory trees
//! can (`super::access`); its scopes keep the command's signals to its own processes and,
//! without the network, its abstract UNIX sockets too; without the network it also handles
//! TCP with no port allowed. From ABI 9 it says which named UNIX sockets a command may
//! connect to (those where it may read, as bubblewrap's mounts show them); before, no UNIX
//! socket can be made at all (`super::seccomp`). Its temporary directory is its own, made for
//! the command and removed after, and named by `TMPDIR`.
//!
//! What bubblewrap gives that this cannot (documented in docs/tools.md and SECURITY.md,
//! and each held to by a test under both confinements):
//!
//! - **No fixed view of the file system.** Landlock refuses access; it does not hide or
//!   remap. The names in the state directories, `/tmp` and `/dev` can be listed (their
//!   contents cannot be read), and `/tmp` itself is not writable: `TMPDIR` is.
//! - **A directory that holds a protected place is pinned**: the working directory always
//!   (its `.prose/`, `.git` and `prose.toml` are looked for there), and any directory on the
//!   way to an existing protected place. Its files can be changed, but nothing can be
//!   created, removed or renamed directly in it, since a right to do that would reach the
//!   protected place too. Its other subdirectories, and write paths below it, are writable
//!   whole.
//! - **A missing protected name in a write path** (`out/.git`, `out/prose.toml`) can be
//!   created while the command runs: when the call ends, whatever is there (but a bubblewrap
//!   placeholder of this process) is removed ([`Confinement::settle`]), and the output says
//!   so.
//! - **No PID namespace**: other processes are visible (their command lines too, not their
//!   environment or memory, which Landlock keeps from a sandboxed process, nor their
//!   signals); `$PPID` is the VM; a command cannot start a new session or process group
//!   (`setsid` and `setpgid` fail), so that everything it starts dies with the call; a
//!   process of the command outlives a VM killed with `SIGKILL` (the shell itself does
//!   not).
//! - **No network namespace**: without the network no socket but a UNIX one can be made (no
//!   loopback either).
//! - **UNIX sockets only from ABI 9**: before, a command can make none (`socketpair` works),
//!   since it could otherwise connect to any named socket it can name, the host's `/tmp`
//!   included.
//! - **No IPC namespace**: System V IPC is refused.
//! - **Metadata is not guarded**: Landlock does not govern a file's mode, times or
//!   attributes, so a command can change those of a file the user owns outside its write
//!   paths (not its contents, name or place).

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};
use seccompiler::BpfProgram;

use super::super::beneath::Root;
use super::access::{Grant, Sets};
use super::{child, seccomp, shared_tmp_tree, Plan};

/// The oldest Landlock ABI commands run under: 6 (Linux 6.12) scopes signals and abstract
/// UNIX sockets; 3 and later refuse truncating a protected file.
pub const MIN_ABI: i32 = 6;

/// The first Landlock ABI that says which named UNIX sockets a command may connect to;
/// before it, commands make no UNIX socket.
pub const UNIX_SOCKETS_ABI: i32 = 9;

/// What a command's sockets may be under ABI `abi`.
fn sockets(abi: i32, network: bool) -> seccomp::Sockets {
    seccomp::Sockets {
        network,
        unix: abi >= UNIX_SOCKETS_ABI,
    }
}

/// The Landlock ABI of this kernel, if commands can run under it: it is at least
/// [`MIN_ABI`], and a trial command goes through every step; otherwise why not.
pub(super) fn probe() -> Result<i32, String> {
    if !cfg!(target_os = "linux") {
        return Err("Landlock needs Linux".into());
    }
    seccomp::arch()?;
    // SAFETY: landlock_create_ruleset(2) asking for the ABI version: no pointer is read.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if abi < 0 {
        return Err(match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EOPNOTSUPP) => {
                "Landlock is turned off in this kernel (`landlock` must be in its `lsm=` boot \
                 parameter)"
                    .into()
            }
            _ => "this kernel has no Landlock".into(),
        });
    }
    let abi = i32::try_from(abi).unwrap_or(i32::MAX);
    if abi < MIN_ABI {
        return Err(format!(
            "this kernel's Landlock (ABI {abi}) is older than ABI {MIN_ABI} (Linux 6.12), which \
             keeps a command's signals and sockets to itself"
        ));
    }
    trial(abi).map(|()| abi)
}

/// Runs `sh -c :` through every step, reading `/` only.
fn trial(abi: i32) -> Result<(), String> {
    let root = super::super::beneath::handle(Path::new("/")).map_err(|e| format!("`/`: {e}"))?;
    let ruleset = ruleset(
        abi,
        false,
        vec![(root, AccessFs::from_read(ABI::from(abi)))],
    )?;
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", ":"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    child::confine(
        &mut cmd,
        ruleset.as_raw_fd(),
        seccomp::filters(sockets(abi, false))?,
    );
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("a trial command under Landlock failed ({s})")),
        Err(e) => Err(format!(
            "a trial command under Landlock could not start: {e}"
        )),
    }
}

/// The file rights the ruleset handles at `abi`: all the kernel knows.
fn handled(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_all(abi)
}

/// The Landlock ruleset of `grants` at `abi` (every right it asks for supported, or an
/// error), as the descriptor `landlock_restrict_self` takes.
fn ruleset(abi: i32, network: bool, grants: Vec<Grant>) -> Result<OwnedFd, String> {
    let fail = |e: landlock::RulesetError| format!("the Landlock ruleset: {e}");
    let abi = ABI::from(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled(abi))
        .map_err(fail)?;
    ruleset = if network {
        ruleset.scope(Scope::Signal)
    } else {
        ruleset
            .scope(Scope::Signal | Scope::AbstractUnixSocket)
            .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
    }
    .map_err(fail)?;
    let mut created = ruleset.create().map_err(fail)?;
    for (handle, rights) in grants {
        created = created
            .add_rule(PathBeneath::new(handle, rights))
            .map_err(fail)?;
    }
    Option::<OwnedFd>::from(created).ok_or_else(|| "the Landlock ruleset was not created".into())
}

/// What a command may touch under Landlock, kept until the command has ended.
#[derive(Debug)]
pub struct Confinement {
    workdir: PathBuf,
    /// The working directory, held open, for removing what a command made.
    base: Arc<Root>,
    /// The ruleset's descriptor, open until the command has started.
    ruleset: OwnedFd,
    filters: Vec<BpfProgram>,
    /// The command's own temporary directory, removed when this is dropped.
    tmp: PathBuf,
    /// Protected names that were missing where a command can create them.
    watched: Vec<PathBuf>,
    /// Where a command can create files, as the model is told.
    room: String,
}

impl Confinement {
    /// The confinement of `plan` under Landlock ABI `abi`.
    pub fn new(plan: Plan<'_>, abi: i32) -> Result<Confinement, String> {
        let workdir = plan.workdir.path().to_path_buf();
        let roots = plan.roots();
        let hidden = plan.existing_hidden();
        let inside = |p: &Path| roots.iter().any(|r| p.starts_with(r));
        let kept: Vec<PathBuf> = plan
            .protect
            .iter()
            .map(|(p, _)| p)
            .chain(&hidden)
            .filter(|p| inside(p) && std::fs::symlink_metadata(p).is_ok())
            .cloned()
            .collect();
        let tmp = private_tmp()?;
        let mut unreadable = hidden.clone();
        unreadable.push(PathBuf::from("/dev"));
        let mut read_roots = vec![PathBuf::from("/")];
        match shared_tmp_tree(&workdir) {
            Some(tree) if tree == Path::new("/tmp") => {}
            Some(tree) => {
                unreadable.push(PathBuf::from("/tmp"));
                read_roots.push(tree);
            }
            None => unreadable.push(PathBuf::from("/tmp")),
        }
        let mut write_roots = roots.clone();
        write_roots.push(tmp.clone());
        let sets = Sets {
            read_roots,
            unreadable,
            write_roots,
            kept,
            pinned: vec![workdir.clone()],
        };
        let made = (|| {
            let grants = sets.grants(plan.workdir, handled(ABI::from(abi)))?;
            Ok::<_, String>((
                ruleset(abi, plan.network, grants)?,
                seccomp::filters(sockets(abi, plan.network))?,
            ))
        })();
        let (ruleset, filters) = match made {
            Ok(made) => made,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let is_dir = |p: &Path| p.is_dir();
        let watched = plan
            .protect
            .iter()
            .map(|(p, _)| p)
            .chain(&plan.hidden)
            .filter(|p| inside(p) && std::fs::symlink_metadata(p).is_err())
            .filter(|p| p.parent().is_some_and(|d| sets.creates_in(d, is_dir)))
            .cloned()
            .collect();
        let room = room(&workdir, &roots, |r| sets.creates_in(r, is_dir));
        Ok(Confinement {
            workdir,
            base: plan.workdir.clone(),
            ruleset,
            filters,
            tmp,
            watched,
            room,
        })
    }

    /// The command that runs `program` with `args` under this confinement, its own session
    /// and process group, `TMPDIR` its own temporary directory.
    pub fn command(&self, program: &OsStr, args: &[OsString]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args).env("TMPDIR", &self.tmp);
        child::confine(
            cmd.as_std_mut(),
            self.ruleset.as_raw_fd(),
            self.filters.clone(),
        );
        cmd
    }

    /// Removes whatever is now at a protected name that was missing when the command
    /// started, even an empty file (an empty `prose.toml` would hide a parent directory's),
    /// but a placeholder a bubblewrap sandbox of this process holds there; one line for each.
    pub fn settle(&mut self) -> Vec<String> {
        let mut said = Vec::new();
        for path in std::mem::take(&mut self.watched) {
            if std::fs::symlink_metadata(&path).is_err() || super::bubblewrap::holds(&path) {
                continue;
            }
            let Ok(rel) = path.strip_prefix(&self.workdir) else {
                continue;
            };
            let shown = rel.display();
            said.push(match self.base.remove_tree(rel) {
                Ok(()) => format!("[removed `{shown}`, which commands may not make]"),
                Err(e) => format!("[could not remove `{shown}`, which commands may not make: {e}]"),
            });
        }
        said
    }

    /// Where a command can create files, for the model.
    pub fn where_to_write(&self) -> String {
        self.room.clone()
    }
}

impl Drop for Confinement {
    fn drop(&mut self) {
        self.settle();
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// A new empty directory of the VM's temporary directory, readable by its owner only.
fn private_tmp() -> Result<PathBuf, String> {
    let template = std::env::temp_dir().join("prosevm-cmd-XXXXXX");
    let mut bytes = template.as_os_str().as_bytes().to_vec();
    bytes.push(0);
    let mut c = CString::from_vec_with_nul(bytes)
        .map_err(|_| "the temporary directory's path holds a NUL byte".to_string())?
        .into_bytes_with_nul();
    // SAFETY: `c` is a writable, NUL-terminated template ending in XXXXXX, as mkdtemp(3)
    // takes it; it rewrites the Xs in place.
    let made = unsafe { libc::mkdtemp(c.as_mut_ptr().cast()) };
    if made.is_null() {
        return Err(format!(
            "could not make a temporary directory in `{}`: {}",
            std::env::temp_dir().display(),
            std::io::Error::last_os_error()
        ));
    }
    c.pop();
    Ok(PathBuf::from(OsStr::from_bytes(&c)))
}

/// Where commands can create files, said for the model: the write roots where they can
/// (`creates`), and the subdirectories of the others.
fn room(workdir: &Path, roots: &[PathBuf], creates: impl Fn(&Path) -> bool) -> String {
    let shown = |r: &Path| match r.strip_prefix(workdir) {
        Ok(rel) if rel.as_os_str().is_empty() => "the working directory".to_string(),
        Ok(rel) => format!("`{}/`", rel.display()),
        Err(_) => format!("`{}`", r.display()),
    };
    let mut places: Vec<String> = roots
        .iter()
        .map(|r| {
            if creates(r) {
                shown(r)
            } else {
                format!("the subdirectories already in {}", shown(r))
            }
        })
        .collect();
    places.push("`$TMPDIR`".into());
    format!(
        "[the sandbox (Landlock) lets commands create files only in {}; nothing can be created \
         directly in the working directory, which holds protected places]",
        places.join(", ")
    )
}
