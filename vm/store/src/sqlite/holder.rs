//! Who holds a run of the SQLite store: a process of this machine, named by its host, its
//! pid and its start time (so a pid the system gave again to another process is not taken
//! for the holder). A holder is alive while a process with that pid and start time runs.

use std::fmt;

/// A process holding a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The machine it runs on.
    pub host: String,
    /// Its process id.
    pub pid: i64,
    /// When it started, in clock ticks since boot (`/proc/PID/stat`).
    pub start: i64,
}

impl Holder {
    /// This process.
    pub fn me() -> Holder {
        let pid = i64::from(std::process::id());
        Holder {
            host: host(),
            pid,
            start: start_ticks(pid).unwrap_or(0),
        }
    }

    /// The holder a row names, if it names one.
    pub fn from_columns(
        host: Option<String>,
        pid: Option<i64>,
        start: Option<i64>,
    ) -> Option<Holder> {
        Some(Holder {
            host: host?,
            pid: pid?,
            start: start?,
        })
    }

    /// Whether it still runs. A holder on another machine cannot be looked at, and is taken
    /// to be alive.
    pub fn alive(&self) -> bool {
        if self.host != host() {
            return true;
        }
        start_ticks(self.pid) == Some(self.start)
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host == host() {
            write!(f, "pid {}", self.pid)
        } else {
            write!(f, "pid {} on {}", self.pid, self.host)
        }
    }
}

/// This machine's name.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// When process `pid` started (field 22 of `/proc/PID/stat`), if it runs.
fn start_ticks(pid: i64) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: the fields after it are counted
    // from its closing parenthesis (the state is field 3).
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_stranger_with_its_pid_is_not() {
        let me = Holder::me();
        assert!(me.start > 0, "{me:?}");
        assert!(me.alive());
        let reused = Holder {
            start: me.start + 1,
            ..me.clone()
        };
        assert!(!reused.alive(), "a pid given again is another process");
        let gone = Holder {
            pid: i64::from(i32::MAX),
            ..me.clone()
        };
        assert!(!gone.alive());
        assert_eq!(me.to_string(), format!("pid {}", me.pid));
    }
}
