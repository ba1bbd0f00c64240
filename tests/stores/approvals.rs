//! Approvals that wait, through the CLI over each store: a tool call its agent's permissions
//! say `prompt` for, with no one at hand, stops the run `waiting` (exit 3) with nothing of
//! the call run; `prosevm runs` says what it waits for; `prosevm answer --approve` (or
//! `--deny`) journals the answer, and the resumed run makes the call exactly once (or tells
//! the model a person refused it) without asking the model again. A time limit refuses the
//! call once it runs out; `--always` lets the session's later calls run; and a resume killed
//! while the approved call runs does not run it a second time.
//!
//! The model is the mock driver with a script (its answers are kept with the run), and
//! `--mock-log` names every request it was asked, so a turn asked twice would show.

use super::{expire_leases, kinds, support, Kind};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One agent whose shell commands a person must allow.
const PROGRAM: &str = "agent builder:
  permissions:
    bash: prompt
output r = session: builder
  prompt: \"Do the job\"
";

/// The model's script: one turn calling `bash` with each of `commands`, then (unscripted)
/// a plain answer.
fn script(dir: &Path, commands: &[&str]) {
    let calls: Vec<Value> = commands
        .iter()
        .map(|c| json!({"name": "bash", "arguments": {"command": c}}))
        .collect();
    let script = json!([{"kind": "turn", "times": 1, "reply": {"tool_calls": calls}}]);
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
}

fn prosevm(dir: &Path) -> Command {
    let mut c = support::command("prosevm");
    c.current_dir(dir).stdin(Stdio::null());
    c
}

/// `prosevm run` of the program in `kind`'s store, answered by the script, each request
/// logged to `asked.log`; `extra` flags after.
fn start(dir: &Path, kind: &Kind, extra: &[&str]) -> (i32, String) {
    let (code, _, err) = support::output(
        prosevm(dir)
            .args(["run", "prog.prose", "--store", &kind.store])
            .args(["--mock-script", "script.json", "--mock-log", "asked.log"])
            .args(["--trace", "quiet"])
            .args(extra),
    );
    (code, err)
}

/// The only run `kind`'s store lists.
fn the_run(dir: &Path, kind: &Kind) -> Value {
    let (code, out, err) =
        support::output(prosevm(dir).args(["runs", "--json", "--store", &kind.store]));
    assert_eq!(code, 0, "{}: {err}", kind.name);
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(rows.len(), 1, "{}: {rows:?}", kind.name);
    rows[0].clone()
}

/// `prosevm answer` of `kind`'s run with `args`.
fn answer(dir: &Path, kind: &Kind, id: &str, args: &[&str]) -> (i32, String) {
    let (code, _, err) = support::output(
        prosevm(dir)
            .args(["answer", id])
            .args(args)
            .args(["--store", &kind.store]),
    );
    (code, err)
}

/// `prosevm resume` of `kind`'s run (its driver as recorded); its exit code and the
/// outputs or error document.
fn resume(dir: &Path, kind: &Kind, id: &str) -> (i32, Value, String) {
    let (code, out, err) = support::output(
        prosevm(dir)
            .args(["resume", id, "--store", &kind.store])
            .args(["--trace", "quiet", "--format", "json"]),
    );
    let doc = serde_json::from_str::<Value>(out.trim())
        .map(|d| d.get("outputs").cloned().unwrap_or(d))
        .unwrap_or(Value::Null);
    (code, doc, err)
}

/// The output of tool call `call` of session `0:0` of `kind`'s run, as the model read it.
fn tool_output(dir: &Path, kind: &Kind, id: &str, call: &str) -> (String, bool) {
    let (code, out, err) = support::output(prosevm(dir).args([
        "inspect",
        id,
        "--session",
        "0:0",
        "--json",
        "--store",
        &kind.store,
    ]));
    assert_eq!(code, 0, "{}: {err}", kind.name);
    let view: Value = serde_json::from_str(&out).expect("inspect");
    let step = view["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == call))
        .unwrap_or_else(|| panic!("{}: no step {call}: {view}", kind.name));
    (
        step["answer"]["content"]
            .as_str()
            .unwrap_or_default()
            .into(),
        step["answer"]["is_error"].as_bool().unwrap_or(false),
    )
}

/// How many times request `id` was asked of the model, by the log.
fn asked(dir: &Path, id: &str) -> usize {
    std::fs::read_to_string(dir.join("asked.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == id)
        .count()
}

/// What the commands wrote, if anything.
fn effects(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("effects.log")).ok()
}

/// A fresh directory for each store: the program and the script, nothing run.
fn fresh(dir: &Path, kind: &Kind, commands: &[&str]) -> std::path::PathBuf {
    let work = dir.join(kind.name);
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("dir");
    std::fs::write(work.join("prog.prose"), PROGRAM).expect("program");
    script(&work, commands);
    work
}

/// Starts the run in `work` and checks that it waits for the approval of its first call,
/// nothing of it run; returns the run's id and the approval's.
fn waiting(work: &Path, kind: &Kind, extra: &[&str]) -> (String, String) {
    let name = kind.name;
    let (code, err) = start(work, kind, extra);
    assert_eq!(code, 3, "{name}: waiting is exit status 3: {err}");
    let row = the_run(work, kind);
    assert_eq!(row["status"], "waiting", "{name}: {row}");
    let approval = &row["approvals"][0];
    let id = row["id"].as_str().expect("id").to_string();
    let approval_id = approval["id"].as_str().expect("approval id").to_string();
    assert!(
        err.contains(&format!("--approve {approval_id}")),
        "{name}: the way to answer is said: {err}"
    );
    assert_eq!(
        (
            &approval["call"],
            &approval["agent"],
            &approval["tool"],
            &approval["capability"],
            &approval["prompt"]
        ),
        (
            &json!("0:0#t0c0"),
            &json!("builder"),
            &json!("bash"),
            &json!("bash"),
            &json!("Do the job")
        ),
        "{name}: {approval}"
    );
    assert_eq!(
        approval["arguments"]["command"], approval["detail"],
        "{name}"
    );
    assert_eq!(effects(work), None, "{name}: nothing of the call ran");
    // The table says it too.
    let (_, table, _) = support::output(prosevm(work).args(["runs", "--store", &kind.store]));
    assert!(
        table.contains(&format!(
            "waits for approval {approval_id}: agent `builder` wants to run"
        )),
        "{name}: {table}"
    );
    (id, approval_id)
}

#[test]
fn an_approved_call_runs_once_after_the_resume_in_every_store() {
    let dir = support::scratch("stores-approve");
    for kind in kinds("cli_approve", &dir) {
        let name = kind.name;
        let work = fresh(&dir, &kind, &["echo ran >> effects.log"]);
        let (id, approval) = waiting(&work, &kind, &[]);
        // Only a known approval is taken, and only as one answer.
        let (code, err) = answer(&work, &kind, &id, &["--approve", "000000000000"]);
        assert_ne!(code, 0, "{name}");
        assert!(
            err.contains(&approval),
            "{name}: names the one it waits for: {err}"
        );
        let (code, err) = answer(&work, &kind, &id, &["--approve", "0:0#t0c0"]);
        assert_eq!(code, 2, "{name}: {err}");
        let (code, err) = answer(&work, &kind, &id, &["--deny", &approval, "--always"]);
        assert_eq!(code, 2, "{name}: --always goes with --approve: {err}");
        let (code, err) = answer(&work, &kind, &id, &["--approve", &approval]);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(err.contains("continue it with"), "{name}: {err}");
        // Answered once: a second answer finds nothing to answer.
        let (code, _) = answer(&work, &kind, &id, &["--deny", &approval]);
        assert_ne!(code, 0, "{name}");
        assert_eq!(effects(&work), None, "{name}: the answer runs nothing");
        let (code, outputs, err) = resume(&work, &kind, &id);
        assert_eq!(code, 0, "{name}: {err}");
        assert_eq!(outputs["r"], "[mock] Do the job", "{name}: {outputs}");
        assert_eq!(effects(&work).as_deref(), Some("ran\n"), "{name}");
        let (text, is_error) = tool_output(&work, &kind, &id, "0:0#t0c0");
        assert!(
            !is_error && text.contains("exit status 0"),
            "{name}: {text}"
        );
        assert_eq!(asked(&work, "0:0#t0"), 1, "{name}: the turn asked again");
        assert_eq!(the_run(&work, &kind)["status"], "finished", "{name}");
    }
}

#[test]
fn a_denied_call_is_refused_to_the_model_in_every_store() {
    let dir = support::scratch("stores-deny");
    for kind in kinds("cli_deny", &dir) {
        let name = kind.name;
        let work = fresh(&dir, &kind, &["echo ran >> effects.log"]);
        let (id, approval) = waiting(&work, &kind, &[]);
        let (code, err) = answer(&work, &kind, &id, &["--deny", &approval]);
        assert_eq!(code, 0, "{name}: {err}");
        let (code, _, err) = resume(&work, &kind, &id);
        assert_eq!(code, 0, "{name}: {err}");
        assert_eq!(effects(&work), None, "{name}: a denied call runs nothing");
        let (text, is_error) = tool_output(&work, &kind, &id, "0:0#t0c0");
        assert!(is_error, "{name}: {text}");
        assert!(
            text.contains("`bash: prompt`, and a person said no"),
            "{name}: the model is told as a refusal at a terminal is: {text}"
        );
        assert_eq!(asked(&work, "0:0#t0"), 1, "{name}");
    }
}

#[test]
fn an_approval_lapses_at_its_time_limit_in_every_store() {
    let dir = support::scratch("stores-lapse");
    for kind in kinds("cli_lapse", &dir) {
        let name = kind.name;
        let work = fresh(&dir, &kind, &["echo ran >> effects.log"]);
        let (id, approval) = waiting(&work, &kind, &["--approval-timeout", "1"]);
        let expires = the_run(&work, &kind)["approvals"][0]["expires"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| panic!("{name}: no deadline"));
        // The clock passes the deadline (a second at most).
        let deadline = prose_runtime::clock::parse_timestamp(&expires).expect("a timestamp");
        let started = Instant::now();
        while prose_runtime::clock::now() < deadline {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{name}: the clock"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let (code, err) = answer(&work, &kind, &id, &["--approve", &approval]);
        assert_ne!(code, 0, "{name}: an answer after the deadline: {err}");
        assert!(err.contains("lapsed"), "{name}: {err}");
        let (code, _, err) = resume(&work, &kind, &id);
        assert_eq!(code, 0, "{name}: the run goes on: {err}");
        assert_eq!(effects(&work), None, "{name}");
        let (text, is_error) = tool_output(&work, &kind, &id, "0:0#t0c0");
        assert!(is_error, "{name}: {text}");
        assert!(
            text.contains("`bash: prompt`, and no one answered within 1.0s"),
            "{name}: {text}"
        );
        // A limit that is not a number of seconds above 0 is refused before anything runs.
        let (code, err) = start(&work, &kind, &["--approval-timeout", "0"]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains("above 0"), "{name}: {err}");
    }
}

#[test]
fn always_lets_the_sessions_later_calls_run_without_waiting_again() {
    let dir = support::scratch("stores-always");
    for kind in kinds("cli_always", &dir) {
        let name = kind.name;
        let work = fresh(
            &dir,
            &kind,
            &["echo one >> effects.log", "echo two >> effects.log"],
        );
        let (id, approval) = waiting(&work, &kind, &[]);
        let (code, err) = answer(&work, &kind, &id, &["--approve", &approval, "--always"]);
        assert_eq!(code, 0, "{name}: {err}");
        let (code, _, err) = resume(&work, &kind, &id);
        assert_eq!(code, 0, "{name}: {err}");
        // The second call, after the one that waited, never ran before: it runs now.
        assert_eq!(effects(&work).as_deref(), Some("one\ntwo\n"), "{name}");
    }
}

#[test]
fn a_resume_killed_while_the_approved_call_runs_does_not_run_it_again() {
    let dir = support::scratch("stores-approve-kill");
    for kind in kinds("cli_approve_kill", &dir) {
        let name = kind.name;
        // The command says it started, then holds until the test lets it go.
        let work = fresh(
            &dir,
            &kind,
            &["echo started >> effects.log; while [ ! -e release ]; do sleep 0.05; done"],
        );
        let (id, approval) = waiting(&work, &kind, &[]);
        let (code, err) = answer(&work, &kind, &id, &["--approve", &approval]);
        assert_eq!(code, 0, "{name}: {err}");
        let mut child = prosevm(&work)
            .args(["resume", &id, "--store", &kind.store, "--trace", "quiet"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("resume starts");
        let started = Instant::now();
        while effects(&work).is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{name}: the approved call never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().expect("kill -9");
        let _ = child.wait();
        std::fs::write(work.join("release"), "").expect("release");
        expire_leases(&kind);
        let (code, _, err) = resume(&work, &kind, &id);
        assert_eq!(code, 0, "{name}: {err}");
        let (text, is_error) = tool_output(&work, &kind, &id, "0:0#t0c0");
        assert!(
            is_error && text.contains("was interrupted"),
            "{name}: a call that may have run is not run again: {text}"
        );
        assert_eq!(
            effects(&work).as_deref(),
            Some("started\n"),
            "{name}: the call ran once"
        );
    }
}
