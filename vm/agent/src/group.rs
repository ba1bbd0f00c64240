//! The process groups of the commands a run starts (the command driver's, the `bash`
//! tool's): each is killed when its owner lets go of it, and every one still alive is killed
//! when the process has to end at once ([`kill_all`], a second Ctrl-C), since exiting runs
//! no destructors and a group of its own outlives its parent.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The groups alive now, by id.
static LIVE: Mutex<BTreeSet<libc::pid_t>> = Mutex::new(BTreeSet::new());

fn live() -> std::sync::MutexGuard<'static, BTreeSet<libc::pid_t>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A process group a command leads (it was started with `process_group(0)`): killed with
/// SIGKILL when dropped, unless disarmed.
pub struct ProcessGroup {
    pgid: Option<libc::pid_t>,
}

impl ProcessGroup {
    /// The group led by process `pid` (none when `pid` is unknown: the child was reaped).
    pub fn led_by(pid: Option<u32>) -> ProcessGroup {
        let pgid = pid.and_then(|p| libc::pid_t::try_from(p).ok());
        if let Some(pgid) = pgid {
            live().insert(pgid);
        }
        ProcessGroup { pgid }
    }

    /// Kills every process left in the group, once.
    pub fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // SAFETY: killpg(2) has no memory-safety preconditions; the group is the one the
            // command was started in, and it is signalled at most once here.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
            live().remove(&pgid);
        }
    }

    /// Leaves the group alone from now on (its command ended as it should).
    pub fn disarm(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            live().remove(&pgid);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Kills every group still alive: for a process about to exit without unwinding.
pub fn kill_all() {
    for pgid in std::mem::take(&mut *live()) {
        // SAFETY: as in `ProcessGroup::kill`.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    fn gone(pgid: u32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            // SAFETY: signal 0 only checks that the group has a member.
            if unsafe { libc::killpg(pgid as libc::pid_t, 0) } != 0 {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    // `kill_all` is tested from outside (vm/tests/signals.rs): here it would kill the groups
    // of other tests running in this process.
    #[test]
    fn a_group_dies_with_its_owner_unless_disarmed() {
        let start = || {
            std::process::Command::new("sh")
                .args(["-c", "sleep 30 & wait"])
                .process_group(0)
                .spawn()
                .expect("sh")
        };
        let (mut a, mut b) = (start(), start());
        drop(ProcessGroup::led_by(Some(a.id())));
        a.wait().expect("a");
        assert!(gone(a.id()), "the group (its sleep) outlived its owner");
        assert!(!live().contains(&(a.id() as libc::pid_t)));
        let mut kept = ProcessGroup::led_by(Some(b.id()));
        assert!(live().contains(&(b.id() as libc::pid_t)));
        kept.disarm();
        drop(kept);
        assert!(!live().contains(&(b.id() as libc::pid_t)));
        assert!(
            b.try_wait().expect("b").is_none(),
            "a disarmed group was killed"
        );
        drop(ProcessGroup::led_by(Some(b.id())));
        b.wait().expect("b");
    }
}
