//! Inputs come from people: `--input NAME=VALUE` for any input (top-level or mid-program), a
//! host, or the terminal; with none of these, the run waits (status `waiting`, naming the
//! input), never taking a model's guess. `prosevm answer` or `resume --input` gives it what
//! it needs; an unknown name is an error with the closest declared name.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use support::provider::{ok, provider};

fn vm(dir: &Path) -> Command {
    let mut cmd = support::prosevm();
    cmd.current_dir(dir)
        .stdin(Stdio::null())
        .env("OPENAI_API_KEY", "k");
    cmd
}

const ASKS: &str = "input topic: \"What to write about\"\nlet draft = session \"Draft about {topic}\"\ninput audience: \"Who reads it\"\noutput r = session \"Rewrite for {audience}\"\n  context: draft\n";

#[test]
fn a_mid_program_input_given_on_the_command_line_is_never_asked() {
    let dir = support::scratch("inputs-given");
    std::fs::write(dir.join("prog.prose"), ASKS).expect("program");
    let (code, out, err) = support::output(
        vm(&dir)
            .args([
                "run",
                "prog.prose",
                "--trace",
                "quiet",
                "--mock-log",
                "asked.log",
            ])
            .args(["--input", "topic=tides", "--input", "audience=sailors"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: [mock] Rewrite for sailors\n");
    // Two sessions were asked, nothing else (no input request reached anyone).
    let asked = std::fs::read_to_string(dir.join("asked.log")).expect("log");
    assert_eq!(asked, "0:0\n0:2\n");
}

#[test]
fn an_input_with_no_one_to_ask_makes_the_run_wait_and_never_goes_to_the_model() {
    let dir = support::scratch("inputs-missing");
    std::fs::write(dir.join("prog.prose"), ASKS).expect("program");
    let (url, seen) = provider(vec![ok("a draft")]);
    let (code, _, err) = support::output(
        vm(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args([
                "--base-url",
                &url,
                "--input",
                "topic=tides",
                "--trace",
                "quiet",
            ]),
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("input `audience`"), "{err}");
    assert!(err.contains("NAME=VALUE"), "{err}");
    assert_eq!(
        seen.lock().expect("seen").len(),
        1,
        "only the first session"
    );
    let run = std::fs::read_dir(dir.join(".prose/runs"))
        .expect("runs")
        .flatten()
        .find(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .expect("the run");
    let id = run.file_name().to_string_lossy().into_owned();
    // The run waits, saying for what.
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.path().join("run.json")).expect("run.json"),
    )
    .expect("JSON");
    assert_eq!(record["status"], "waiting");
    assert_eq!(record["waiting"][0]["name"], "audience");
    assert_eq!(record["waiting"][0]["question"], "Who reads it");
    assert_eq!(record["error"]["code"], "E220");
    // Only what it waits for is answered.
    let (code, _, err) = support::output(vm(&dir).args(["answer", &id, "topic=reefs"]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("does not wait for `topic`; it waits for `audience`"),
        "{err}"
    );
    let (code, _, err) = support::output(vm(&dir).args(["answer", &id, "audience"]));
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = support::output(vm(&dir).args(["answer", &id, "audience=sailors"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("has its answers"), "{err}");
    assert!(err.contains(&format!("prosevm resume {id}")), "{err}");
    // Answered once: a second answer finds nothing waiting.
    let (code, _, err) = support::output(vm(&dir).args(["answer", &id, "audience=pilots"]));
    assert_eq!(code, 2, "{err}");
    // The resumed run goes on with the answer; the answered session is not asked again.
    let (url2, seen2) = provider(vec![ok("for sailors")]);
    let (code, out, err) =
        support::output(vm(&dir).args(["resume", &id, "--trace", "quiet"]).args([
            "--driver",
            "openai",
            "--model",
            "m",
            "--base-url",
            &url2,
        ]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: for sailors\n");
    let seen2 = seen2.lock().expect("seen");
    assert_eq!(seen2.len(), 1);
    assert!(seen2[0].body["messages"][1]["content"]
        .as_str()
        .is_some_and(|c| c.contains("Rewrite for sailors") && c.contains("a draft")));
}

#[test]
fn a_waiting_run_also_takes_what_it_needs_on_resume() {
    let dir = support::scratch("inputs-resume");
    std::fs::write(dir.join("prog.prose"), ASKS).expect("program");
    let (code, _, err) = support::output(vm(&dir).args([
        "run",
        "prog.prose",
        "--input",
        "topic=tides",
        "--trace",
        "quiet",
    ]));
    assert_eq!(code, 3, "{err}");
    let (code, out, _) = support::output(vm(&dir).args(["runs", "--status", "waiting"]));
    // The header, the run, and under it what it waits for.
    assert_eq!((code, out.lines().count()), (0, 3), "{out}");
    assert_eq!(
        out.lines().nth(2).map(str::trim),
        Some("waits for input `audience`: Who reads it"),
        "{out}"
    );
    let id = out
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .expect("id")
        .to_string();
    let (code, out, err) = support::output(vm(&dir).args([
        "resume",
        &id,
        "--input",
        "audience=sailors",
        "--trace",
        "quiet",
    ]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: [mock] Rewrite for sailors\n");
}

#[test]
fn an_unknown_input_name_is_refused_with_the_closest_declared_one() {
    let dir = support::scratch("inputs-unknown");
    std::fs::write(dir.join("prog.prose"), ASKS).expect("program");
    let (code, _, err) = support::output(vm(&dir).args([
        "run",
        "prog.prose",
        "--input",
        "topik=x",
        "--input",
        "audience=y",
    ]));
    assert_eq!(code, 2, "refused inputs are a usage error");
    assert!(err.contains("[E201]"), "{err}");
    assert!(err.contains("no input `topik`"), "{err}");
    assert!(err.contains("did you mean `topic`?"), "{err}");
    assert!(!dir.join(".prose/runs").exists(), "nothing was started");
}

/// The bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

#[test]
fn a_large_input_is_kept_about_twice_not_once_per_session() {
    // The run's record and the input's binding file each hold it; no answer, binding or
    // journal record repeats it (the mock repeats only the start of a prompt).
    let dir = support::scratch("inputs-large");
    std::fs::write(
        dir.join("prog.prose"),
        "input topic: \"What to write about\"\nlet a = session \"Write about {topic}\"\nlet b = session \"Again about {topic}\"\n  context: a\noutput r = session \"Once more about {topic}\"\n  context: b\n",
    )
    .expect("program");
    let size = 5 << 20;
    std::fs::write(
        dir.join("in.json"),
        serde_json::json!({ "topic": "x".repeat(size) }).to_string(),
    )
    .expect("inputs");
    let (code, _, err) = support::output(vm(&dir).args([
        "run",
        "prog.prose",
        "--input-file",
        "in.json",
        "--trace",
        "quiet",
    ]));
    assert_eq!(code, 0, "{err}");
    let kept = bytes_under(&dir.join(".prose"));
    assert!(
        kept < 2 * size as u64 + (1 << 20),
        "a {size}-byte input took {kept} bytes to keep"
    );
}
