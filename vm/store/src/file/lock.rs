//! A run's lock: what makes one process the only writer of a run directory. The writer holds
//! an exclusive lock on the run's `lock` file and writes its pid there; the kernel releases
//! the lock when the writer dies, so taking it is one atomic step and a crash frees the run.
//!
//! On Linux the lock is an open file description lock (`fcntl(F_OFD_SETLK)`), which a
//! reader can test for (`F_OFD_GETLK`) without taking anything, so `runs`, `inspect` and
//! `report` never stand in a writer's way. Elsewhere it is a `flock`, and the test is a
//! shared lock taken and dropped at once.
//!
//! A writer that finds the run locked names the holder by the pid in the file, once it has
//! seen that pid alive: a holder that has just taken the lock may not have written its pid
//! yet (the file still names the crashed process before it), and a holder may have let go
//! in the meantime, in which case the lock is tried again. When the pid is the writer's own,
//! it tries for a moment too: a child forked by another of its threads holds the lock that
//! was let go of until the child execs.

use crate::{fs, StoreError};
use std::fs::File;
use std::io::{Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a writer refused by a holder it cannot name (no live pid in the file yet) keeps
/// trying before it gives up without naming it.
const SETTLE: Duration = Duration::from_millis(500);

/// A held run lock; dropping it (closing the file) releases the run.
pub struct Lock {
    _file: File,
}

/// Takes the lock of run `id` (its lock file at `path`, created if needed) for this
/// process, or says which live process holds it.
pub fn take(path: &Path, id: &str) -> Result<Lock, StoreError> {
    let io = |e| StoreError::Io(path.to_path_buf(), e);
    let mut file = fs::open_rw(path).map_err(io)?;
    let deadline = Instant::now() + SETTLE;
    loop {
        if sys::try_exclusive(&file).map_err(io)? {
            file.set_len(0).map_err(io)?;
            file.rewind().map_err(io)?;
            write!(file, "{}", std::process::id()).map_err(io)?;
            return Ok(Lock { _file: file });
        }
        let pid = written_pid(&mut file, path).filter(|&pid| alive(pid));
        // This process's own pid is waited on: a lock it has just let go of is still held
        // while a child that another thread forked keeps a copy of the descriptor, until
        // that child execs.
        let ours = pid == Some(std::process::id());
        if (pid.is_some() && !ours) || Instant::now() >= deadline {
            return Err(StoreError::Held(format!(
                "run {id} is being run by another process{}",
                pid.map_or(String::new(), |pid| format!(" (pid {pid})"))
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether a process holds the lock file at `path`, found without taking it (and without
/// creating or writing the file).
pub fn held(path: &Path) -> bool {
    fs::open_read(path).is_ok_and(|file| sys::locked(&file))
}

/// The most read of a lock file: a pid is at most ten digits, so anything longer holds none.
const MAX_PID_TEXT: u64 = 64;

/// The pid written in the lock file `file` (at `path`), if it holds one.
fn written_pid(file: &mut File, path: &Path) -> Option<u32> {
    file.rewind().ok()?;
    let bytes = bytecode_spec::bounded::read_from(file, MAX_PID_TEXT, path).ok()?;
    std::str::from_utf8(&bytes).ok()?.trim().parse().ok()
}

/// Whether process `pid` is alive (a zombie, dead but not yet reaped, is not).
fn alive(pid: u32) -> bool {
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 sends nothing; it only checks that the process exists.
    let rc = unsafe { libc::kill(raw, 0) };
    let exists = rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && !sys::zombie(pid)
}

#[cfg(target_os = "linux")]
mod sys {
    use super::AsRawFd;
    use std::fs::File;

    /// A lock description covering the whole file.
    fn whole_file(kind: libc::c_int) -> libc::flock {
        // SAFETY: `flock` is a plain C struct for which all zeroes is a valid value.
        let mut l: libc::flock = unsafe { std::mem::zeroed() };
        l.l_type = kind as libc::c_short;
        l.l_whence = libc::SEEK_SET as libc::c_short;
        l
    }

    /// Takes an exclusive lock on `file` if nobody holds one; `false` if somebody does.
    pub fn try_exclusive(file: &File) -> std::io::Result<bool> {
        let mut l = whole_file(libc::F_WRLCK);
        // SAFETY: fcntl(2) on a descriptor `file` owns, with a pointer to a live `flock`.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &mut l) };
        if rc == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EACCES) => Ok(false),
            _ => Err(e),
        }
    }

    /// Whether another open file description holds a lock on `file`; tests, takes nothing.
    pub fn locked(file: &File) -> bool {
        let mut l = whole_file(libc::F_WRLCK);
        // SAFETY: fcntl(2) on a descriptor `file` owns, with a pointer to a live `flock`.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut l) };
        rc == 0 && l.l_type != libc::F_UNLCK as libc::c_short
    }

    /// Whether process `pid` is a zombie (its state in `/proc/PID/stat` is `Z`).
    pub fn zombie(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            // The state follows the command name, which is in parentheses and may hold any
            // character: it is the first field after the last `)`.
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use super::AsRawFd;
    use std::fs::File;

    fn flock(file: &File, op: libc::c_int) -> std::io::Result<bool> {
        // SAFETY: flock(2) on a descriptor `file` owns; no memory is shared.
        if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => Ok(false),
            _ => Err(e),
        }
    }

    /// Takes an exclusive lock on `file` if nobody holds one; `false` if somebody does.
    pub fn try_exclusive(file: &File) -> std::io::Result<bool> {
        flock(file, libc::LOCK_EX)
    }

    /// Whether another process holds the lock on `file` (tested with a shared lock, which
    /// goes when `file` is closed).
    pub fn locked(file: &File) -> bool {
        flock(file, libc::LOCK_SH).is_ok_and(|taken| !taken)
    }

    /// Zombies are not told apart here.
    pub fn zombie(_pid: u32) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("prose-lock-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        dir.join("lock")
    }

    /// The pid of a process that has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = child.id();
        child.wait().expect("wait");
        pid
    }

    #[test]
    fn a_dead_holders_pid_left_in_the_file_does_not_hold_the_run() {
        let path = scratch("dead");
        std::fs::write(&path, dead_pid().to_string()).expect("write");
        assert!(!held(&path));
        let lock = take(&path, "r").expect("taken");
        assert!(held(&path), "a held run shows as held");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            std::process::id().to_string()
        );
        drop(lock);
        assert!(!held(&path));
    }

    #[test]
    fn a_lock_file_is_read_no_further_than_a_pid_can_be() {
        let path = scratch("long");
        std::fs::write(&path, "7".repeat(1 << 20)).expect("write");
        let mut file = File::open(&path).expect("open");
        assert_eq!(written_pid(&mut file, &path), None);
        assert_eq!(file.stream_position().expect("position"), MAX_PID_TEXT + 1);
        std::fs::write(&path, format!(" {}\n", std::process::id())).expect("write");
        let mut file = File::open(&path).expect("open");
        assert_eq!(written_pid(&mut file, &path), Some(std::process::id()));
    }

    #[test]
    fn a_lock_let_go_while_a_forked_child_keeps_a_copy_is_taken_once_the_child_is_gone() {
        let path = scratch("forked");
        let lock = take(&path, "r").expect("taken");
        // As another thread's spawn would: a child holding a copy of every descriptor.
        // SAFETY: the child only sleeps and exits, both async-signal-safe.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 150_000_000,
            };
            // SAFETY: as above.
            unsafe {
                libc::nanosleep(&pause, std::ptr::null_mut());
                libc::_exit(0);
            }
        }
        assert!(child > 0, "fork");
        drop(lock);
        let again = take(&path, "r");
        // SAFETY: reaps the child forked above.
        unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
        again.expect("taken once the child let go");
    }

    #[test]
    fn a_refusal_names_the_live_holder_and_never_a_dead_one() {
        let path = scratch("named");
        let first = take(&path, "r").expect("taken");
        let Err(StoreError::Held(m)) = take(&path, "r") else {
            panic!("a held run was taken twice");
        };
        assert_eq!(
            m,
            format!(
                "run r is being run by another process (pid {})",
                std::process::id()
            )
        );
        drop(first);
        // A holder that took the lock but has not written its pid yet: the file still names
        // the crashed process before it. That pid is not named; the refusal waits for the
        // holder's and, not seeing it, names nobody.
        std::fs::write(&path, dead_pid().to_string()).expect("write");
        let holder = fs::open_rw(&path).expect("open");
        assert!(sys::try_exclusive(&holder).expect("lock"));
        let Err(StoreError::Held(m)) = take(&path, "r") else {
            panic!("a held run was taken twice");
        };
        assert_eq!(m, "run r is being run by another process");
    }

    #[test]
    fn testing_whether_a_run_is_held_takes_nothing() {
        let path = scratch("probe");
        assert!(!held(&path), "no lock file: not held");
        assert!(!path.exists(), "a reader created the lock file");
        let lock = take(&path, "r").expect("taken");
        // Readers testing the lock many times over never make a writer's attempt fail.
        for _ in 0..1000 {
            assert!(held(&path));
        }
        drop(lock);
        let probe = fs::open_read(&path).expect("open");
        assert!(!sys::locked(&probe));
        let _lock = take(&path, "r").expect("taken while a reader has the file open");
    }

    #[test]
    fn zombies_are_not_alive() {
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = child.id();
        // Not reaped yet: a zombie once it exits.
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) {
            assert!(Instant::now() < deadline, "a zombie counted as alive");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.wait().expect("wait");
        assert!(alive(std::process::id()));
    }
}
