//! The attack sweep, replayed: an attacker who writes the model's replies (here a fake
//! OpenAI-compatible provider, or the mock's scripted turns) against agents with
//! `permissions:`, through the real `prosevm`. Each test is one of the escapes the sweep
//! found, and checks on disk, in the journal and in what reached the provider that it stays
//! closed.

mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::provider::{ok, provider, tool_calls};

fn scratch(name: &str) -> PathBuf {
    support::scratch(&format!("sweep-{name}"))
}

fn vm(key: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_prosevm"));
    for var in [
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("OPENAI_API_KEY", key)
        .env("ANTHROPIC_API_KEY", key)
        .stdin(Stdio::null());
    cmd
}

/// The run directories under `state/runs`.
fn runs(state: &Path) -> Vec<PathBuf> {
    support::run_ids(state)
        .into_iter()
        .map(|id| state.join("runs").join(id))
        .collect()
}

/// The journal's records as JSON, in order.
fn journal(run: &Path) -> Vec<Value> {
    std::fs::read_to_string(run.join("journal.log"))
        .expect("journal")
        .lines()
        .map(|l| serde_json::from_str(l.split_once(' ').expect("crc").1).expect("record"))
        .collect()
}

/// The journaled output of tool call `id` (`0:0#t0c1`): its text and whether it failed.
fn tool_output(records: &[Value], id: &str) -> (String, bool) {
    let r = records
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no record {id}: {records:?}"));
    (
        r["answer"]["content"]
            .as_str()
            .expect("content")
            .to_string(),
        r["answer"]["is_error"].as_bool().expect("is_error"),
    )
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                found.push(path);
            }
        }
    }
    found
}

/// Escape 1: with `bash: allow`, the model read the API key from the VM's environment
/// through `/proc/$PPID/environ` (removing it from the child's environment did not help).
#[test]
fn the_api_key_never_reaches_a_command_the_model_or_the_run_files() {
    const KEY: &str = "sk-sweep-environ-5150";
    let dir = scratch("environ");
    std::fs::write(
        dir.join("prog.prose"),
        "agent shell:\n  permissions:\n    bash: allow\noutput out = session: shell\n  prompt: \"Look around\"\n",
    )
    .expect("program");
    let (url, seen) = provider(vec![
        tool_calls(
            "",
            &[
                (
                    "c0",
                    "bash",
                    json!({"command": "tr '\\0' '\\n' < /proc/$PPID/environ"}),
                ),
                (
                    "c1",
                    "bash",
                    json!({"command": "tr '\\0' '\\n' < /proc/1/environ"}),
                ),
                (
                    "c2",
                    "bash",
                    json!({"command": "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$f\"; done 2>/dev/null; env; echo walked"}),
                ),
            ],
        ),
        ok("Nothing found."),
    ]);
    let (code, out, err) = support::output(
        vm(KEY)
            .current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "json"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "out: Nothing found.\n");
    let run = &runs(&dir.join(".prose"))[0];
    let records = journal(run);
    for id in ["0:0#t0c0", "0:0#t0c1", "0:0#t0c2"] {
        let (text, _) = tool_output(&records, id);
        assert!(!text.contains(KEY), "{id} read the key: {text}");
    }
    let (text, is_error) = tool_output(&records, "0:0#t0c0");
    assert!(!is_error, "the parent's environment is readable, only keyless: {text}");
    assert!(tool_output(&records, "0:0#t0c2").0.contains("walked"));
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 2);
    for request in seen.iter() {
        assert!(
            !request.body.to_string().contains(KEY),
            "the key reached the model"
        );
    }
    assert_eq!(files_containing(&dir, KEY), Vec::<PathBuf>::new());
    assert!(!err.contains(KEY), "the key is in the trace");
}
