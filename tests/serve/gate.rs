//! A driver the test holds back: `--driver command` with a shell command that answers a
//! session with the first line of its task (`re: Step one about tides`), but only once the
//! test lets that request through, or opens the gate to all. A run driven by it cannot end,
//! or get past a given request, before the test allows it: a test that needs a run still
//! going (to kill its server, cancel it, watch it progress) says so instead of hoping that a
//! slow mock is still at it when the test gets there.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest a test waits for a run to ask its next request: far more than it needs.
const ASKS_WITHIN: Duration = Duration::from_secs(120);

/// A gate in a directory of its own: `asked` lists the ids of the requests asked, one a
/// line, in order; `open` lets every request through; `pass-ID` lets request `ID` through.
pub struct Gate {
    dir: PathBuf,
}

impl Gate {
    /// A closed gate in `dir`'s `name/` (emptied first).
    pub fn new(dir: &Path, name: &str) -> Gate {
        let dir = dir.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("gate dir");
        Gate { dir }
    }

    /// An open gate in `dir`'s `name/`: its driver answers at once.
    pub fn opened(dir: &Path, name: &str) -> Gate {
        let gate = Gate::new(dir, name);
        gate.open();
        gate
    }

    /// The shell command of the driver.
    pub fn command(&self) -> String {
        let d = self.dir.display();
        format!(
            "first=$(head -n 1); echo \"$PROSE_REQUEST_ID\" >> \"{d}/asked\"; \
             while [ ! -e \"{d}/open\" ] && [ ! -e \"{d}/pass-$PROSE_REQUEST_ID\" ]; do sleep 0.05; done; \
             echo \"re: $first\""
        )
    }

    /// The flags that make `prosevm` use this driver.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--driver".into(),
            "command".into(),
            "--command".into(),
            self.command(),
        ]
    }

    /// Lets every request through, from now on.
    pub fn open(&self) {
        std::fs::write(self.dir.join("open"), "").expect("open the gate");
    }

    /// Holds every request asked from now on again: the gate is closed, and the requests
    /// let through one by one are no longer (request ids repeat from one run to the next).
    pub fn close(&self) {
        for entry in std::fs::read_dir(&self.dir).expect("gate dir").flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == "open" || name.starts_with("pass-") {
                std::fs::remove_file(entry.path()).expect("close the gate");
            }
        }
    }

    /// Lets request `id` through (of every run: ids repeat from one run to the next).
    pub fn let_through(&self, id: &str) {
        std::fs::write(self.dir.join(format!("pass-{id}")), "").expect("let through");
    }

    /// The ids of the requests asked so far, in order (a request asked again is there
    /// twice). Whole lines only: one being written is not yet an id.
    pub fn asked(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir.join("asked")).unwrap_or_default();
        text[..text.rfind('\n').map_or(0, |end| end + 1)]
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Waits until `n` requests have been asked in all; returns their ids.
    pub fn wait_asked(&self, n: usize) -> Vec<String> {
        let started = Instant::now();
        loop {
            let asked = self.asked();
            if asked.len() >= n {
                return asked;
            }
            assert!(
                started.elapsed() < ASKS_WITHIN,
                "{} request(s) asked, not {n}: {asked:?}",
                asked.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Lets the requests asked after the first `from` through one at a time as they are
    /// asked, `n` of them (of a run asking one at a time); returns their ids.
    pub fn let_through_next(&self, from: usize, n: usize) -> Vec<String> {
        (from..from + n)
            .map(|i| {
                let id = self.wait_asked(i + 1)[i].clone();
                self.let_through(&id);
                id
            })
            .collect()
    }
}
