//! Helpers shared by the VM's tests (each suite uses only some of them).
#![allow(dead_code)]

pub mod billing;
pub mod browser;
pub mod pg;
pub mod provider;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Settings a `prosevm` run would take from the test's own environment (a developer's
/// provider, model or store), cleared by [`prosevm_keyed`].
const BORROWED: [&str; 5] = [
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "PROSE_STORE",
];

/// This build's `prosevm`, with nothing borrowed from the test's environment
/// ([`BORROWED`]): a developer's provider settings or store do not reach it.
pub fn prosevm() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_prosevm"));
    for var in BORROWED {
        cmd.env_remove(var);
    }
    cmd
}

/// [`prosevm`] with `key` as both APIs' key and no stdin: it talks only to the provider a
/// test names.
pub fn prosevm_keyed(key: &str) -> Command {
    let mut cmd = prosevm();
    cmd.env("OPENAI_API_KEY", key)
        .env("ANTHROPIC_API_KEY", key)
        .stdin(Stdio::null());
    cmd
}

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

/// Runs `cmd` to the end; returns its exit code (-1 for a signal), stdout and stderr.
pub fn output(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The files directly in `dir`, sorted by name, with their contents (none if it is missing).
pub fn files_in(dir: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| {
                    let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                    (e.file_name().to_string_lossy().into_owned(), text)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The run ids under `state/runs`, sorted (staging directories left out).
pub fn run_ids(state: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(state.join("runs"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// The request ids of the complete records in run `id`'s journal, in order.
pub fn journal_ids(state: &Path, id: &str) -> Vec<String> {
    std::fs::read_to_string(state.join("runs").join(id).join("journal.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(_, json)| serde_json::from_str::<serde_json::Value>(json).ok())
        .filter_map(|j| j["id"].as_str().map(String::from))
        .collect()
}

/// The outputs in what `prosevm run|exec|resume --format json` printed for a finished run
/// (`{"run", "status", "outputs"}`); the whole document when it holds none (a failure).
pub fn outputs(stdout: &str) -> serde_json::Value {
    let doc: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    match doc.get("outputs") {
        Some(o) => o.clone(),
        None => doc,
    }
}
