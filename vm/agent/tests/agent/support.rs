//! Helpers the agent library's tests share; the VM's tests use them too
//! (vm/tests/support/mod.rs includes this file).

use std::path::{Path, PathBuf};

/// The OS sandboxes every sandbox test runs under, one after the other: both, where they
/// can be set up. On CI (`CI=true`) both are required; elsewhere one that cannot be set up
/// here (no bubblewrap installed, a kernel without Landlock) is left out, saying why.
pub fn confinements() -> Vec<prose_agent::confine::Kind> {
    use prose_agent::confine::{support, Choice, Kind};
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    Kind::ALL
        .into_iter()
        .filter(|&kind| match support(Choice::Only(kind)).kind() {
            Some(_) => true,
            None => {
                let why = support(Choice::Only(kind)).describe();
                assert!(
                    !ci,
                    "CI runs every sandbox test under {}: {why}",
                    kind.name()
                );
                eprintln!("the {} sandbox is left out: {why}", kind.name());
                false
            }
        })
        .collect()
}

/// The host's live processes whose command line is exactly `args` (commands under
/// bubblewrap have their own PIDs, so they are found by what they run).
pub fn host_processes(args: &[&str]) -> Vec<i32> {
    let wanted: Vec<u8> = args
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            });
            alive && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted)
        })
        .collect()
}

/// A fresh, empty directory `name` under cargo's temporary directory for this target.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}
