//! The stdio protocol, with this test playing the agent host: it reads the VM's request lines
//! from its stdout and writes reply lines to its stdin.

use crate::support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};

fn scratch(name: &str) -> PathBuf {
    support::scratch(&format!("stdio-{name}"))
}

/// Starts `prosevm run` on `source` with the stdio driver.
fn start(dir: &Path, source: &str) -> (Child, ChildStdin, BufReader<std::process::ChildStdout>) {
    std::fs::write(dir.join("prog.prose"), source).expect("program");
    let mut child = support::prosevm()
        .current_dir(dir)
        .args([
            "run",
            "prog.prose",
            "--driver",
            "stdio",
            "--trace",
            "narrate",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    (child, stdin, stdout)
}

/// The next protocol line (every stdout line must be JSON).
fn next(out: &mut BufReader<std::process::ChildStdout>) -> Value {
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
}

fn reply(stdin: &mut ChildStdin, line: &Value) {
    writeln!(stdin, "{line}").expect("write");
    stdin.flush().expect("flush");
}

#[test]
fn a_host_answers_requests_in_any_order_and_hears_of_cancellations() {
    let dir = scratch("host");
    let (child, mut stdin, mut out) = start(
        &dir,
        r#"let a = session "Alpha"
parallel ("first"):
  b = session "Fast"
  c = session "Slow"
if **alpha was good**:
  output verdict = session "Good"
    context: [a, b]
"#,
    );
    let hello = next(&mut out);
    assert_eq!(
        hello,
        json!({"type": "hello", "protocol": "prose-stdio", "version": 2})
    );
    let alpha = next(&mut out);
    assert_eq!(alpha["type"], "request");
    assert_eq!(alpha["kind"], "session");
    assert_eq!(alpha["prompt"], "Alpha");
    assert_eq!(alpha["site"], "prog:1");
    reply(
        &mut stdin,
        &json!({"id": alpha["id"], "kind": "session", "answer": {"text": "alpha answer"}}),
    );
    // Both branches ask at once; answer the second one first.
    let first = next(&mut out);
    let second = next(&mut out);
    let (fast, slow) = if first["prompt"] == "Fast" {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(slow["prompt"], "Slow");
    // A line the VM cannot use is reported on stderr and skipped.
    writeln!(stdin, "this is not json").expect("write");
    reply(
        &mut stdin,
        &json!({"id": fast["id"], "kind": "session", "answer": {"text": "fast answer"}}),
    );
    // The cancellation and the next request race (the dropped branch's task is aborted
    // while the program goes on): either may come first.
    let (x, y) = (next(&mut out), next(&mut out));
    let (cancel, judge) = if x["type"] == "cancel" {
        (x, y)
    } else {
        (y, x)
    };
    assert_eq!(cancel, json!({"type": "cancel", "id": slow["id"]}));
    assert_eq!(judge["kind"], "evaluate");
    assert_eq!(judge["condition"], "alpha was good");
    assert_eq!(
        judge["context"],
        json!([{"label": "latest answer", "value": "alpha answer"}])
    );
    reply(
        &mut stdin,
        &json!({"id": judge["id"], "kind": "evaluate", "answer": true}),
    );
    let good = next(&mut out);
    assert_eq!(good["prompt"], "Good");
    assert_eq!(
        good["context"],
        json!([
            {"label": "a", "value": "alpha answer"},
            {"label": "b", "value": "fast answer"}
        ])
    );
    reply(
        &mut stdin,
        &json!({"id": good["id"], "kind": "session", "answer": {"text": "all good"}, "usage": {"input_tokens": 5, "output_tokens": 2}}),
    );
    let done = next(&mut out);
    assert_eq!(done["type"], "done");
    assert_eq!(done["status"], "finished");
    assert_eq!(done["outputs"], json!({"verdict": "all good"}));
    drop(stdin);
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("stdin line 2: not a reply"), "{stderr}");
    assert!(stderr.contains("[Program] driver: stdio"), "{stderr}");
}

#[test]
fn a_host_that_goes_away_fails_the_run_cleanly() {
    let dir = scratch("eof");
    let (child, stdin, mut out) = start(&dir, "output r = session \"Anyone there?\"\n");
    assert_eq!(next(&mut out)["type"], "hello");
    assert_eq!(next(&mut out)["prompt"], "Anyone there?");
    drop(stdin);
    let done = next(&mut out);
    assert_eq!(done["status"], "failed");
    assert!(
        done["error"]
            .as_str()
            .is_some_and(|e| e.contains("the host closed stdin before answering")),
        "{done}"
    );
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn a_reply_of_the_wrong_kind_is_an_error() {
    let dir = scratch("kind");
    let (child, mut stdin, mut out) = start(&dir, "if **ready**:\n  session \"Go\"\n");
    assert_eq!(next(&mut out)["type"], "hello");
    let judge = next(&mut out);
    reply(
        &mut stdin,
        &json!({"id": judge["id"], "kind": "session", "answer": {"text": "yes"}}),
    );
    let done = next(&mut out);
    assert_eq!(done["status"], "failed");
    assert!(
        done["error"]
            .as_str()
            .is_some_and(|e| e.contains("the `evaluate` request got a `session` answer")),
        "{done}"
    );
    drop(stdin);
    let _ = child.wait_with_output();
}

#[test]
fn a_malformed_reply_to_a_waiting_request_fails_it_at_once() {
    let dir = scratch("malformed");
    let (child, mut stdin, mut out) = start(&dir, "if **ready**:\n  session \"Go\"\n");
    assert_eq!(next(&mut out)["type"], "hello");
    let judge = next(&mut out);
    // The right kind, but not a boolean.
    reply(
        &mut stdin,
        &json!({"id": judge["id"], "kind": "evaluate", "answer": "yes"}),
    );
    let done = next(&mut out);
    assert_eq!(done["status"], "failed");
    assert!(
        done["error"]
            .as_str()
            .is_some_and(|e| e.contains("not a `evaluate` answer")),
        "{done}"
    );
    drop(stdin);
    let _ = child.wait_with_output();
}

#[test]
fn a_host_may_replay_a_transcript_written_in_advance() {
    let dir = scratch("transcript");
    std::fs::write(
        dir.join("prog.prose"),
        "let a = session \"Alpha\"\nchoice **which**:\n  option \"Left\":\n    output r = session \"L\"\n  option \"Right\":\n    output r = session \"R\"\n",
    )
    .expect("program");
    let mut child = support::prosevm()
        .current_dir(&dir)
        .args(["run", "prog.prose", "--driver", "stdio", "--trace", "quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(
            concat!(
                r#"{"id":"0:0","kind":"session","answer":{"text":"alpha"}}"#,
                "\n",
                r#"{"id":"0:1","kind":"choose","answer":1}"#,
                "\n",
                r#"{"id":"0:2","kind":"session","answer":{"text":"went right"}}"#,
                "\n"
            )
            .as_bytes(),
        )
        .expect("write");
    drop(stdin);
    let output = child.wait_with_output().expect("wait");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 5, "hello, three requests, done: {lines:?}");
    assert_eq!(lines[2]["kind"], "choose");
    assert_eq!(lines[2]["options"], json!(["Left", "Right"]));
    assert_eq!(lines[3]["prompt"], "R");
    assert_eq!(lines[4]["outputs"], json!({"r": "went right"}));
}
