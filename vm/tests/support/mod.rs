//! Helpers shared by the VM's tests (each suite uses only some of them).
#![allow(dead_code)]

pub mod billing;
pub mod browser;
pub mod pg;
pub mod provider;

// The sandbox helpers are the agent library's tests' own, shared rather than copied.
#[path = "../../agent/tests/agent/support.rs"]
mod sandbox;
pub use sandbox::{confinements, host_processes, scratch};

use std::path::Path;
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
