//! One vocabulary across `prosec` and `prosevm`: every command, asked for JSON, answers in
//! JSON through its failure paths (one document on stdout whose `error.exit` is the exit
//! status), both binaries end every `--help` with the one exit-status table, and the run
//! flags a command has no use for are hidden and refused.

mod support;

use serde_json::Value;
use std::path::Path;

/// Runs binary `bin` in `dir` with `args`: exit status, stdout, stderr.
fn run(bin: &str, dir: &Path, args: &[&str]) -> (i32, String, String) {
    support::output(support::command(bin).current_dir(dir).args(args))
}

/// The one JSON document `out` holds (anything else on stdout fails the test).
fn document(out: &str, what: &str) -> Value {
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{what}: not one JSON document ({e}): {out:?}"))
}

/// Asserts that `args` fails with `exit` and says so in JSON: `{"error": {"message", "exit"}}`
/// on stdout, and nothing but JSON lines (if anything) on stderr.
fn fails_in_json(bin: &str, dir: &Path, args: &[&str], exit: i32) -> Value {
    let what = format!("{bin} {}", args.join(" "));
    let (code, out, err) = run(bin, dir, args);
    assert_eq!(code, exit, "{what}: stdout {out}, stderr {err}");
    let doc = document(&out, &what);
    let error = &doc["error"];
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {doc}"
    );
    assert_eq!(error["exit"], exit, "{what}: {doc}");
    for line in err.lines() {
        assert!(
            serde_json::from_str::<Value>(line).is_ok() || !line.starts_with(bin),
            "{what}: an error said as text on stderr: {line}"
        );
    }
    doc
}

/// The subcommands `bin --help` lists.
fn commands(bin: &str, dir: &Path) -> Vec<String> {
    let (code, out, _) = run(bin, dir, &["--help"]);
    assert_eq!(code, 0);
    out.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// A scratch directory with a good program, a broken one, a failing one, one that waits
/// for a person, and a file that is no artifact.
fn setup(name: &str) -> std::path::PathBuf {
    let dir = support::scratch(name);
    let files = [
        ("good.prose", "output r = session \"Say hello\"\n"),
        ("broken.prose", "output r = session \"Say hello\n  context: [\n"),
        ("fails.prose", "output r = session \"Say hello\"\n"),
        (
            "asks.prose",
            "let a = session \"Draft\"\ninput audience: \"Who reads it\"\noutput r = session \"Rewrite for {audience}\"\n  context: a\n",
        ),
        ("script.json", r#"[{"prompt": "Say hello", "fail": "the provider is down"}]"#),
        ("garbage.pbc", "not an artifact"),
    ];
    for (file, text) in files {
        std::fs::write(dir.join(file), text).expect("file");
    }
    dir
}

#[test]
fn every_prosec_command_fails_in_json_when_json_is_asked_for() {
    let dir = setup("cli-prosec");
    let json = ["--format", "json"];
    let with =
        |args: &[&'static str]| -> Vec<&'static str> { args.iter().copied().chain(json).collect() };
    // Each command, and how it fails; `lsp` speaks JSON-RPC on stdio, not `--format`.
    let cases: Vec<(&str, Vec<&str>, i32)> = vec![
        ("check", with(&["check", "missing.prose"]), 2),
        ("check", with(&["check", "--explain", "E999"]), 2),
        ("build", with(&["build", "missing.prose"]), 2),
        ("dis", with(&["dis", "missing.pbc"]), 2),
        ("dis", with(&["dis", "garbage.pbc"]), 1),
        ("cost", with(&["cost", "missing.prose"]), 2),
        ("fmt", with(&["fmt", "missing.prose"]), 2),
        ("fetch", with(&["fetch", "missing.prose"]), 2),
        ("keygen", with(&["keygen", "no/such/dir/key", "-W"]), 2),
        ("info", with(&["info", "missing.pbc"]), 2),
        ("info", with(&["info", "garbage.pbc"]), 1),
    ];
    let mut covered: Vec<&str> = cases.iter().map(|c| c.0).collect();
    for (_, args, exit) in &cases {
        fails_in_json("prosec", &dir, args, *exit);
    }
    // Compile errors are the diagnostics document, with exit status 1.
    for command in ["check", "build", "cost", "fetch"] {
        let (code, out, err) = run(
            "prosec",
            &dir,
            &[command, "broken.prose", "--format", "json"],
        );
        assert_eq!(code, 1, "{command}: {err}");
        let doc = document(&out, command);
        assert!(
            doc["errors"].as_u64().is_some_and(|n| n > 0),
            "{command}: {doc}"
        );
        assert!(
            doc["diagnostics"][0]["code"].as_str().is_some(),
            "{command}: {doc}"
        );
    }
    let (code, out, _) = run("prosec", &dir, &["fmt", "broken.prose", "--format", "json"]);
    assert_eq!(code, 1);
    let doc = document(&out, "fmt");
    assert_eq!(doc["exit"], 1, "{doc}");
    assert!(
        doc["files"][0]["error"]["errors"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{doc}"
    );
    // A usage error, too.
    fails_in_json(
        "prosec",
        &dir,
        &["check", "--no-such-flag", "--format", "json"],
        2,
    );
    fails_in_json("prosec", &dir, &["bogus", "--format=json"], 2);
    covered.push("lsp");
    let mut listed = commands("prosec", &dir);
    listed.sort();
    covered.sort();
    covered.dedup();
    assert_eq!(covered, listed, "a command without a JSON failure case");
}

#[test]
fn every_prosevm_command_fails_in_json_when_json_is_asked_for() {
    let dir = setup("cli-prosevm");
    let pg = "postgres://nobody@127.0.0.1:1/none?connect_timeout=2";
    let cases: Vec<(&str, Vec<&str>, i32)> = vec![
        ("exec", vec!["exec", "missing.pbc"], 2),
        ("exec", vec!["exec", "garbage.pbc"], 1),
        ("run", vec!["run", "missing.prose"], 2),
        ("run", vec!["run", "good.prose", "--input", "nope"], 2),
        ("submit", vec!["submit", "missing.pbc", "--store", pg], 2),
        ("worker", vec!["worker", "--store", pg], 2),
        ("info", vec!["info", "missing.pbc"], 2),
        ("serve", vec!["serve", "--listen", "not-an-address"], 2),
        ("resume", vec!["resume"], 2),
        ("resume", vec!["resume", "nope"], 2),
        ("fork", vec!["fork", "nope"], 2),
        ("diff", vec!["diff", "nope", "nada"], 2),
        ("answer", vec!["answer", "nope", "a=b"], 2),
        ("runs", vec!["runs", "prune"], 2),
        ("runs", vec!["runs", "--store", "mysql://x"], 2),
        ("memo", vec!["memo", "--store", "sqlite:"], 2),
        ("report", vec!["report", "nope"], 2),
        ("inspect", vec!["inspect", "latest"], 2),
    ];
    let mut covered: Vec<&str> = cases.iter().map(|c| c.0).collect();
    for (_, args, exit) in &cases {
        let mut args = args.clone();
        args.extend(["--format", "json"]);
        fails_in_json("prosevm", &dir, &args, *exit);
    }
    // A program that does not compile: the diagnostics, with the error.
    let doc = fails_in_json(
        "prosevm",
        &dir,
        &[
            "run",
            "broken.prose",
            "--format",
            "json",
            "--trace",
            "quiet",
        ],
        1,
    );
    assert!(doc["diagnostics"][0]["code"].as_str().is_some(), "{doc}");
    // A run that fails: its id, its status, and the error with its code.
    let doc = fails_in_json(
        "prosevm",
        &dir,
        &[
            "run",
            "fails.prose",
            "--mock-script",
            "script.json",
            "--format",
            "json",
            "--trace",
            "quiet",
        ],
        1,
    );
    assert_eq!(doc["status"], "failed", "{doc}");
    assert!(doc["run"].as_str().is_some(), "{doc}");
    assert!(
        doc["error"]["code"]
            .as_str()
            .is_some_and(|c| c.starts_with('E')),
        "{doc}"
    );
    // Run ids, and `latest`, tell runs apart by the second they started in.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    // A run that waits for a person: exit status 3, status `waiting`, code E220.
    let doc = fails_in_json(
        "prosevm",
        &dir,
        &["run", "asks.prose", "--format", "json", "--trace", "quiet"],
        3,
    );
    assert_eq!(
        (&doc["status"], &doc["error"]["code"]),
        (&Value::from("waiting"), &Value::from("E220")),
        "{doc}"
    );
    // `latest` and a prefix name runs; the answer goes on as JSON.
    let id = doc["run"].as_str().expect("id").to_string();
    let (code, out, err) = run(
        "prosevm",
        &dir,
        &[
            "answer",
            &id[..id.len() - 3],
            "audience=sailors",
            "--format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        document(&out, "answer")["still_waiting"],
        serde_json::json!([])
    );
    let (code, out, err) = run(
        "prosevm",
        &dir,
        &["resume", "--format", "json", "--trace", "quiet"],
    );
    assert_eq!(code, 0, "{err}");
    let doc = document(&out, "resume");
    assert_eq!(
        (&doc["run"], &doc["status"], &doc["outputs"]["r"]),
        (
            &Value::from(id.as_str()),
            &Value::from("finished"),
            &Value::from("[mock] Rewrite for sailors")
        ),
        "{doc}"
    );
    // Usage errors, and a flag its command has no use for.
    fails_in_json(
        "prosevm",
        &dir,
        &["runs", "--no-such-flag", "--format", "json"],
        2,
    );
    let doc = fails_in_json(
        "prosevm",
        &dir,
        &[
            "submit", "good.pbc", "--store", pg, "--trace", "json", "--format", "json",
        ],
        2,
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--trace")),
        "{doc}"
    );
    covered.sort();
    covered.dedup();
    let mut listed = commands("prosevm", &dir);
    listed.sort();
    assert_eq!(covered, listed, "a command without a JSON failure case");
}

#[test]
fn failures_before_a_run_are_error_events_of_the_json_trace() {
    let dir = setup("cli-trace");
    let (code, out, err) = run("prosevm", &dir, &["run", "broken.prose", "--trace", "json"]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty(), "{out}");
    let events: Vec<Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        events.iter().any(|e| e["event"] == "error"
            && e["code"].as_str().is_some_and(|c| c.starts_with('E'))
            && e["message"]
                .as_str()
                .is_some_and(|m| m.contains("broken.prose:"))),
        "{err}"
    );
    // A run's own error event carries its code, as run.json does.
    let (code, _, err) = run(
        "prosevm",
        &dir,
        &[
            "run",
            "fails.prose",
            "--mock-script",
            "script.json",
            "--trace",
            "json",
        ],
    );
    assert_eq!(code, 1, "{err}");
    let error = err
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "error")
        .unwrap_or_else(|| panic!("no error event: {err}"));
    assert!(
        error["code"].as_str().is_some_and(|c| c.starts_with('E')),
        "{error}"
    );
    assert!(error["run"].as_str().is_some(), "{error}");
}

#[test]
fn every_help_ends_with_the_one_exit_status_table() {
    let dir = support::scratch("cli-help");
    let table = prosec::console::exit_table();
    for (bin, command) in [
        ("prosec", None),
        ("prosec", Some("build")),
        ("prosevm", None),
        ("prosevm", Some("run")),
        ("prosevm", Some("runs")),
    ] {
        let mut args: Vec<&str> = command.into_iter().collect();
        args.push("--help");
        let (code, out, _) = run(bin, &dir, &args);
        assert_eq!(code, 0);
        assert!(
            out.trim_end().ends_with(table.trim_end()),
            "{bin} {args:?}: {out}"
        );
        assert!(
            out.contains("--format <FORMAT>") && out.contains("--color <COLOR>"),
            "{bin} {args:?}"
        );
    }
    // The run flags submit and serve have no use for are not offered.
    for command in ["submit", "serve"] {
        let (_, out, _) = run("prosevm", &dir, &[command, "--help"]);
        assert!(
            !out.contains("--trace") && !out.contains("--no-progress"),
            "{command}: {out}"
        );
    }
    let (_, out, _) = run("prosevm", &dir, &["run", "--help"]);
    assert!(out.contains("--trace"), "{out}");
}

#[test]
fn the_resume_command_printed_names_the_state_directory() {
    let dir = setup("cli-resume-hint");
    let (code, _, err) = run(
        "prosevm",
        &dir,
        &[
            "run",
            "asks.prose",
            "--state-dir",
            "elsewhere",
            "--trace",
            "quiet",
        ],
    );
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("prosevm resume ") && err.contains("--state-dir elsewhere"),
        "{err}"
    );
}

#[test]
fn a_relative_driver_command_runs_where_it_was_given_when_resumed_from_elsewhere() {
    use std::os::unix::fs::PermissionsExt;
    let dir = setup("cli-command-dir");
    // Answers the first request; the second fails until `allow` exists beside it.
    let script = "#!/bin/sh\nif [ -f first ] && [ ! -f allow ]; then echo down >&2; exit 1; fi\ntouch first\necho answered\n";
    let drv = dir.join("drv.sh");
    std::fs::write(&drv, script).expect("script");
    std::fs::set_permissions(&drv, std::fs::Permissions::from_mode(0o755)).expect("mode");
    std::fs::write(
        dir.join("two.prose"),
        "let a = session \"One\"\noutput r = session \"Two\"\n  context: a\n",
    )
    .expect("program");
    let (code, _, err) = run(
        "prosevm",
        &dir,
        &[
            "run",
            "two.prose",
            "--driver",
            "command",
            "--command",
            "./drv.sh",
            "--trace",
            "quiet",
        ],
    );
    assert_eq!(code, 1, "{err}");
    std::fs::write(dir.join("allow"), "").expect("allow");
    let state = dir.join(".prose");
    let elsewhere = dir.parent().expect("parent");
    let (code, out, err) = run(
        "prosevm",
        elsewhere,
        &[
            "resume",
            "--state-dir",
            state.to_str().expect("path"),
            "--format",
            "json",
            "--trace",
            "quiet",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(support::outputs(&out)["r"], "answered", "{out}");
}
