//! The seccomp filters a command runs under with Landlock: system calls that bubblewrap's
//! namespaces make harmless, or that Landlock does not cover, fail with `EPERM`.
//!
//! - **Namespaces and mounts**: `unshare` and `clone` with a namespace flag, `setns`,
//!   `mount` and the new mount API, `pivot_root`, `chroot`. (Landlock refuses mounts too;
//!   new user namespaces are refused outright, as bubblewrap's `--disable-userns` does.)
//!   `clone3` fails with `ENOSYS`, since its flags cannot be read by a filter: the C library
//!   then falls back to `clone`, whose flags can.
//! - **Other processes**: `ptrace`, `process_vm_readv`/`writev`, `pidfd_getfd` (Landlock
//!   already refuses them towards processes outside the sandbox).
//! - **The kernel's keys and extensions**: `keyctl`, `add_key`, `request_key` (no key of the
//!   user's keyrings reaches a command), `bpf`, `perf_event_open`, `userfaultfd`, `io_uring`,
//!   modules, `kexec`, `reboot`, swap, accounting, quotas, the kernel log, the clock, the
//!   host name, `open_by_handle_at`, I/O ports.
//! - **Leaving the call's process group**: `setsid` and `setpgid`, so that killing the group
//!   kills everything the command started (bubblewrap has a PID namespace for that).
//! - **The host's System V IPC** (shared memory, message queues, semaphores), which
//!   bubblewrap's IPC namespace makes private.
//! - **Terminal input**: `ioctl` `TIOCSTI` and `TIOCLINUX`.
//! - **The network**, when the agent may not use it: `socket` for anything but `AF_UNIX`
//!   (bubblewrap gives such a command an empty network namespace).
//! - **UNIX sockets**, where Landlock cannot say which named sockets a command may connect
//!   to (before ABI 9): `socket` for `AF_UNIX` (`socketpair` still works). Otherwise a command
//!   could connect to any socket whose path it knows, those in the host's `/tmp` too (a tmux
//!   server's, an X server's, an ssh-agent's), which bubblewrap's private `/tmp` keeps out of
//!   reach; `/proc/net/unix` lists them all.
//!
//! On x86_64 the x32 numbers of the same calls are refused too.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The calls refused whatever their arguments.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_open_by_handle_at,
    libc::SYS_setsid,
    libc::SYS_setpgid,
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
];

/// The namespace flags `clone` and `unshare` may not carry.
const NAMESPACES: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// x86_64's x32 system calls: the same numbers with this bit set.
#[cfg(target_arch = "x86_64")]
const X32: libc::c_long = 0x4000_0000;

/// What a command's sockets may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sockets {
    /// Whether it may reach the network.
    pub network: bool,
    /// Whether it may make UNIX sockets (Landlock decides which named ones it reaches).
    pub unix: bool,
}

/// The filters for a command, to apply in this order; an error on an architecture
/// seccompiler does not know.
pub(super) fn filters(sockets: Sockets) -> Result<Vec<BpfProgram>, String> {
    let arch = arch()?;
    let refused = compile(rules(sockets)?, libc::EPERM, arch)?;
    let clone3 = compile(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        libc::ENOSYS,
        arch,
    )?;
    Ok(vec![clone3, refused])
}

/// The architecture the filters are for (this one).
pub(super) fn arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        format!(
            "seccomp filters are built for x86_64, aarch64 and riscv64, not {}",
            std::env::consts::ARCH
        )
    })
}

/// The calls refused, each with the conditions of its arguments that refuse it (none: all).
fn rules(sockets: Sockets) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let bad = |e: seccompiler::BackendError| format!("the seccomp filter: {e}");
    let flag = |arg: u8, value: u64| -> Result<SeccompRule, String> {
        SeccompRule::new(vec![SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(value),
            value,
        )
        .map_err(bad)?])
        .map_err(bad)
    };
    let equal = |arg: u8, op: SeccompCmpOp, value: u64| -> Result<SeccompRule, String> {
        SeccompRule::new(vec![SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            op,
            value,
        )
        .map_err(bad)?])
        .map_err(bad)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&nr| (nr, Vec::new())).collect();
    let clone_flags: Vec<SeccompRule> = NAMESPACES
        .iter()
        .map(|&f| flag(0, f as u64))
        .collect::<Result<_, _>>()?;
    rules.insert(libc::SYS_clone, clone_flags.clone());
    let mut unshare_flags = clone_flags;
    unshare_flags.push(flag(0, libc::CLONE_NEWTIME as u64)?);
    rules.insert(libc::SYS_unshare, unshare_flags);
    // The requests' type is the C library's: an unsigned long with glibc, an int with musl.
    #[allow(clippy::unnecessary_cast)]
    let (sti, linux) = (libc::TIOCSTI as u64, libc::TIOCLINUX as u64);
    rules.insert(
        libc::SYS_ioctl,
        vec![
            equal(1, SeccompCmpOp::Eq, sti)?,
            equal(1, SeccompCmpOp::Eq, linux)?,
        ],
    );
    let unix = libc::AF_UNIX as u64;
    match (sockets.network, sockets.unix) {
        (true, true) => {}
        (true, false) => {
            rules.insert(libc::SYS_socket, vec![equal(0, SeccompCmpOp::Eq, unix)?]);
        }
        (false, true) => {
            rules.insert(libc::SYS_socket, vec![equal(0, SeccompCmpOp::Ne, unix)?]);
        }
        (false, false) => {
            rules.insert(libc::SYS_socket, Vec::new());
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        let x32: Vec<(i64, Vec<SeccompRule>)> =
            rules.iter().map(|(nr, r)| (nr | X32, r.clone())).collect();
        rules.extend(x32);
    }
    Ok(rules)
}

/// `rules` as a program that fails the calls they match with `errno`, allowing the rest.
fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: libc::c_int,
    arch: TargetArch,
) -> Result<BpfProgram, String> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .and_then(BpfProgram::try_from)
    .map_err(|e| format!("the seccomp filter: {e}"))?;
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_and_refuse_the_network_only_without_it() {
        let with = |network, unix| rules(Sockets { network, unix }).unwrap();
        let offline = with(false, true);
        let online = with(true, true);
        assert_eq!(offline[&libc::SYS_socket].len(), 1, "all but AF_UNIX");
        assert!(!online.contains_key(&libc::SYS_socket));
        assert_eq!(with(true, false)[&libc::SYS_socket].len(), 1, "AF_UNIX");
        assert!(
            with(false, false)[&libc::SYS_socket].is_empty(),
            "every socket"
        );
        for nr in [libc::SYS_setsid, libc::SYS_keyctl, libc::SYS_ptrace] {
            assert!(online.contains_key(&nr) && offline.contains_key(&nr));
        }
        #[cfg(target_arch = "x86_64")]
        for nr in [libc::SYS_setsid, libc::SYS_unshare, libc::SYS_socket] {
            assert!(offline.contains_key(&(nr | X32)), "x32 {nr}");
        }
        let sockets = Sockets {
            network: false,
            unix: true,
        };
        assert_eq!(filters(sockets).unwrap().len(), 2);
    }
}
