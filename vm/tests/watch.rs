//! Watching runs through `prosevm`: the end-of-run summary after the narration, the JSON
//! trace's envelope (run id, sequence number, time, error and end events), and how both
//! report a failed run and the command that resumes it.

use crate::support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const PROGRAM: &str = r#"agent writer:
  model: sonnet
  prompt: "You write."
parallel:
  a = session: writer
    prompt: "Draft the intro"
  b = session "Draft the outro"
loop until **good enough** (max: 3):
  session "Polish"
output result = session: writer
  prompt: "Combine {a} and {b}"
"#;

fn vm(dir: &Path) -> Command {
    let mut cmd = support::prosevm();
    cmd.current_dir(dir).stdin(Stdio::null());
    cmd
}

fn scratch(name: &str) -> PathBuf {
    let dir = support::scratch(&format!("watch-{name}"));
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    dir
}

/// A script that fails the outro session every time.
fn failing_script(dir: &Path) {
    std::fs::write(
        dir.join("fail.json"),
        r#"[{"prompt": "Draft the outro", "fail": "the provider is down"}]"#,
    )
    .expect("script");
}

#[test]
fn a_finished_run_ends_its_narration_with_a_summary() {
    let dir = scratch("summary");
    let (code, out, err) = support::output(vm(&dir).args(["run", "prog.prose"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("result: "), "{out}");
    let lines: Vec<&str> = err.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "[Program] Program complete")
        .expect("complete");
    let summary = &lines[at + 1..];
    assert_eq!(summary.len(), 3, "{err}");
    assert!(
        summary[0].starts_with("[Summary] finished in ")
            && summary[0].ends_with(": 4 session(s), 0 retries, tokens not reported"),
        "{}",
        summary[0]
    );
    let run = std::fs::read_dir(dir.join(".prose/runs"))
        .expect("runs")
        .flatten()
        .find(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .expect("a run")
        .file_name()
        .to_string_lossy()
        .into_owned();
    let path = format!(".prose/runs/{run}");
    assert_eq!(
        summary[1],
        format!("[Summary] outputs: 1 on stdout, kept in {path}/run.json and {path}/bindings/")
    );
    assert_eq!(summary[2], format!("[Summary] run directory: {path}"));
}

#[test]
fn a_failed_run_summary_says_why_and_how_to_resume() {
    let dir = scratch("failed");
    failing_script(&dir);
    let (code, _, err) = support::output(vm(&dir).args([
        "run",
        "prog.prose",
        "--mock-script",
        "fail.json",
        "--state-dir",
        "state",
    ]));
    assert_eq!(code, 1, "{err}");
    let summary: Vec<&str> = err.lines().filter(|l| l.starts_with("[Summary]")).collect();
    assert_eq!(summary.len(), 4, "{err}");
    assert!(
        summary[0].starts_with("[Summary] failed in ") && summary[0].contains("(1 failed)"),
        "{err}"
    );
    assert!(summary[1].contains("the provider is down"), "{err}");
    let resume = summary[3]
        .strip_prefix("[Summary] resume: ")
        .expect("a resume command");
    let words: Vec<&str> = resume.split_whitespace().collect();
    assert_eq!(words[..2], ["prosevm", "resume"]);
    assert_eq!(words[3..], ["--state-dir", "state"]);
    // The command works: with a driver that answers the outro this time, the run finishes.
    let (code, out, err) = support::output(vm(&dir).args(&words[1..]).args(["--driver", "mock"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("result: "), "{out}");
}

fn json_lines(err: &str) -> Vec<Value> {
    err.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn json_trace_lines_are_stamped_and_end_with_the_status() {
    let dir = scratch("json");
    let (code, _, err) = support::output(vm(&dir).args(["run", "prog.prose", "--trace", "json"]));
    assert_eq!(code, 0, "{err}");
    let lines = json_lines(&err);
    let run = lines[0]["run"].as_str().expect("run id").to_string();
    assert!(dir.join(".prose/runs").join(&run).is_dir());
    for (n, l) in lines.iter().enumerate() {
        assert_eq!(l["run"], run.as_str(), "{l}");
        assert_eq!(l["seq"], n, "{l}");
        assert!(l["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{l}");
    }
    let times: Vec<&str> = lines.iter().filter_map(|l| l["time"].as_str()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let session = lines
        .iter()
        .find(|l| l["event"] == "session" && l["line"] == 5)
        .expect("the intro's session");
    assert_eq!(
        (&session["agent"], &session["model"]),
        (&Value::from("writer"), &Value::from("sonnet"))
    );
    let last = lines.last().expect("lines");
    assert_eq!(
        (&last["event"], &last["status"]),
        (&"end".into(), &"finished".into())
    );
}

#[test]
fn a_failed_run_gives_an_error_event_then_the_end() {
    let dir = scratch("json-failed");
    failing_script(&dir);
    let (code, _, err) = support::output(vm(&dir).args([
        "run",
        "prog.prose",
        "--trace",
        "json",
        "--mock-script",
        "fail.json",
    ]));
    assert_eq!(code, 1);
    // The error is an event: stderr is JSON to the end.
    let lines = json_lines(&err);
    let n = lines.len();
    assert_eq!(lines[n - 2]["event"], "error");
    assert!(lines[n - 2]["message"]
        .as_str()
        .is_some_and(|m| m.contains("the provider is down")));
    assert_eq!(
        (&lines[n - 1]["event"], &lines[n - 1]["status"]),
        (&"end".into(), &"failed".into())
    );
    assert!(lines
        .iter()
        .any(|l| l["event"] == "request_failed" && l["id"] == "0/0.1:0"));
}

#[test]
fn on_a_terminal_narration_gives_way_to_live_progress() {
    // `script` (util-linux) runs the VM with a pseudo-terminal as its stderr.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: `script` (util-linux) is not installed, so no terminal to test with");
        return;
    }
    let dir = scratch("terminal");
    let line = format!(
        "'{}' run prog.prose --no-input",
        env!("CARGO_BIN_EXE_prosevm")
    );
    let (code, out, err) = support::output(
        Command::new("script")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .args(["-qec", &line, "/dev/null"]),
    );
    assert_eq!(code, 0, "{out}{err}");
    // A line per finished session and the status line, not the narration.
    assert!(out.contains("✓ writer 0/0.0:0 line 5 in "), "{out}");
    assert!(out.contains("✓ session 0/0.1:0 line 7 in "), "{out}");
    assert!(out.contains("in flight"), "{out}");
    assert!(!out.contains("[Position]"), "{out}");
    assert!(out.contains("[Summary] finished in "), "{out}");
    // --no-progress keeps the narration on a terminal.
    let line = format!("{line} --no-progress");
    let (code, out, _) = support::output(
        Command::new("script")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .args(["-qec", &line, "/dev/null"]),
    );
    assert_eq!(code, 0);
    assert!(
        out.contains("[Position] line 5: session \"Draft the intro\""),
        "{out}"
    );
    assert!(!out.contains("in flight"), "{out}");
}

#[test]
fn text_read_as_a_structure_is_narrated_and_traced() {
    let dir = scratch("convert");
    std::fs::write(
        dir.join("count.prose"),
        "let n = session \"How many drafts?\"\nrepeat n:\n  session \"Draft\"\n",
    )
    .expect("program");
    let out = vm(&dir)
        .args(["run", "count.prose", "--no-progress"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("[Convert] 0:1: read as integer: 1"), "{err}");
    let out = vm(&dir)
        .args(["run", "count.prose", "--trace", "json"])
        .output()
        .expect("runs");
    let events = json_lines(&String::from_utf8_lossy(&out.stderr));
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "converted" && e["shape"] == "integer" && e["value"] == "1"),
        "{events:?}"
    );
}
