//! What a command's process does to itself under Landlock, between fork and exec (in
//! `pre_exec`, so only system calls on data prepared before the fork: no allocation, no
//! lock), in this order:
//!
//! 1. a new session and process group (`setsid`), which the VM kills whole when the call
//!    ends; the seccomp filter then keeps every process of the command in it;
//! 2. death with the VM's thread that started it (`PR_SET_PDEATHSIG`), as bubblewrap's
//!    `--die-with-parent` does;
//! 3. no capabilities, even when the VM runs as root: the bounding set emptied where that is
//!    allowed (a privileged process), then every set cleared;
//! 4. no new privileges (`PR_SET_NO_NEW_PRIVS`), then the Landlock ruleset;
//! 5. the seccomp filters, last, since they refuse `setsid`.

use std::io;
use std::os::fd::RawFd;

use seccompiler::BpfProgram;

/// Registers the steps above to run in `cmd`'s child, enforcing the Landlock ruleset
/// `ruleset` (kept open by the caller until the command has started) and `filters`.
pub(super) fn confine(cmd: &mut std::process::Command, ruleset: RawFd, filters: Vec<BpfProgram>) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec. It allocates nothing and
    // takes no lock: it makes system calls on values prepared before the fork (the ruleset's
    // descriptor, the filters' instructions), and builds errors from errno only.
    unsafe {
        cmd.pre_exec(move || confine_self(parent, ruleset, &filters));
    }
}

/// The steps, in the child.
fn confine_self(parent: libc::pid_t, ruleset: RawFd, filters: &[BpfProgram]) -> io::Result<()> {
    // SAFETY (every block below): system calls with integer arguments, or pointers to
    // values that live on this stack frame or in `filters`, which the caller keeps alive.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // The VM may have ended before the signal was asked for.
    if unsafe { libc::getppid() } != parent {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    drop_capabilities()?;
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    for filter in filters {
        seccompiler::apply_filter(filter).map_err(|e| match e {
            seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
            _ => io::Error::from_raw_os_error(libc::EINVAL),
        })?;
    }
    Ok(())
}

/// The header of `capset(2)`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// One half of `capset(2)`'s data (two of them: capabilities 0-31, then 32-63).
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Empties the bounding set where that is allowed (it needs `CAP_SETPCAP`, which a process
/// without capabilities does not have, and does not need: with no new privileges it gains
/// none from a program), then clears the ambient, effective, permitted and inheritable sets.
fn drop_capabilities() -> io::Result<()> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            match io::Error::last_os_error().raw_os_error() {
                // Past the last capability, or not allowed to: done.
                Some(libc::EINVAL) | Some(libc::EPERM) => break,
                _ => return Err(io::Error::last_os_error()),
            }
        }
    }
    // SAFETY: prctl with integer arguments; kernels before 4.3 lack ambient sets (EINVAL).
    if unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    } != 0
        && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
    {
        return Err(io::Error::last_os_error());
    }
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let none = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset(2) with a valid header and two valid data structures, as version 3
    // takes them.
    if unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, none.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
