//! One vocabulary across `prosec` and `prosevm`: every command, asked for JSON, answers in
//! JSON through its failure paths (one document on stdout whose `error.exit` is the exit
//! status), both binaries end every `--help` with the one exit-status table, and the run
//! flags a command has no use for are hidden and refused. What a newcomer meets first: the
//! compiler's warnings where programs run, directories walked as git would, and every
//! example run as examples/README.md says.

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
        ("test", vec!["test", "no-such-dir"], 2),
        ("eval", vec!["eval", "missing.eval.toml"], 2),
        ("evals", vec!["evals", "--store", "mysql://x"], 2),
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

#[test]
fn run_shows_the_compilers_warnings_once_before_the_run_and_deny_warnings_refuses() {
    let dir = support::scratch("cli-run-warnings");
    std::fs::write(
        dir.join("w.prose"),
        "input topic: \"What to write about\"\nagent writer:\n  model: sonnet\n  colour: red\noutput r = session: writer\n  prompt: \"Write about {topci}\"\n",
    )
    .unwrap();
    let (code, out, err) = run("prosevm", &dir, &["run", "w.prose", "--input", "topic=x"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("r: "), "{out}");
    // The narration's lines start with `[`; the warnings come before the first.
    let lines: Vec<&str> = err.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with('['))
        .expect("narration");
    for w in ["warning[W005]", "warning[W122]"] {
        assert_eq!(err.matches(w).count(), 1, "{w} once:\n{err}");
        let at = lines.iter().position(|l| l.contains(w)).unwrap();
        assert!(at < start, "{w} before the run starts:\n{err}");
    }
    // Under --deny-warnings nothing runs: exit 1, the warnings shown, no run kept.
    let (code, _, err) = run(
        "prosevm",
        &dir,
        &[
            "run",
            "w.prose",
            "--input",
            "topic=x",
            "--deny-warnings",
            "--state-dir",
            "denied",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("warning[W005]") && err.contains("--deny-warnings"),
        "{err}"
    );
    assert!(!dir.join("denied").exists(), "nothing ran");
    // Under --trace json, stderr stays JSON: the warnings are `warning` lines.
    let (code, _, err) = run(
        "prosevm",
        &dir,
        &["run", "w.prose", "--input", "topic=x", "--trace", "json"],
    );
    assert_eq!(code, 0, "{err}");
    let events: Vec<Value> = err
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    assert!(
        events
            .iter()
            .any(|v| v.to_string().contains("warning[W005]")),
        "{err}"
    );
}

#[test]
fn a_misspelt_permission_or_an_empty_if_stops_a_run_before_it_starts() {
    let dir = support::scratch("cli-run-guarding");
    let programs = [
        (
            "perm.prose",
            "agent deployer:\n  model: sonnet\n  permisions:\n    bash: deny\noutput r = session: deployer\n  prompt: \"Deploy\"\n",
            "E156",
        ),
        (
            "kind.prose",
            "agent deployer:\n  model: sonnet\n  permissions:\n    bahs: deny\noutput r = session: deployer\n  prompt: \"Deploy\"\n",
            "E156",
        ),
        (
            "if.prose",
            "if **the tests pass**:\nsession \"Deploy to production\"\n",
            "E157",
        ),
    ];
    for (file, text, code) in programs {
        std::fs::write(dir.join(file), text).unwrap();
        let (exit, _, err) = run("prosevm", &dir, &["run", file]);
        assert_eq!(exit, 1, "{file}: {err}");
        assert!(err.contains(&format!("error[{code}]")), "{file}: {err}");
        assert!(!dir.join(".prose/runs").exists(), "{file}: nothing ran");
    }
}

#[test]
fn check_and_fmt_of_a_directory_leave_out_run_records_hidden_and_ignored_files() {
    let dir = support::scratch("cli-walk");
    std::fs::write(dir.join("good.prose"), "output r = session \"Say hello\"\n").unwrap();
    // A run kept in the default state directory and in another one: each keeps a copy of
    // its program, which imports a file that is not beside the copy.
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::write(
        dir.join("lib/digest.prose"),
        "input text: \"A text\"\noutput short = session \"Shorten {text}\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("lib/uses.prose"),
        "use \"./digest.prose\" as digest\noutput r = digest(text: \"x\").short\n",
    )
    .unwrap();
    for extra in [&[][..], &["--state-dir", "records"][..]] {
        let mut args = vec!["run", "lib/uses.prose"];
        args.extend_from_slice(extra);
        let (code, _, err) = run("prosevm", &dir, &args);
        assert_eq!(code, 0, "{err}");
    }
    assert!(dir.join("records/runs").is_dir() && dir.join(".prose/runs").is_dir());
    // Badly laid out and broken files where a walk must not look.
    for hidden in [".cache/bad.prose", "ignored/bad.prose"] {
        std::fs::create_dir_all(dir.join(hidden).parent().unwrap()).unwrap();
        std::fs::write(dir.join(hidden), "session \"x\n  context: [\n").unwrap();
    }
    std::fs::write(dir.join(".gitignore"), "ignored/\n").unwrap();
    let (code, out, err) = run("prosec", &dir, &["check", "--deny-warnings", "."]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run("prosec", &dir, &["fmt", "--check", "."]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = run("prosec", &dir, &["check", ".", "--format", "json"]);
    assert_eq!(code, 0);
    assert_eq!(document(&out, "check")["files"], 3, "{out}");
    // Named explicitly, a file is checked wherever it is.
    let (code, _, _) = run("prosec", &dir, &["check", "ignored/bad.prose"]);
    assert_eq!(code, 1);
}

/// The programs under `root`'s `examples/`, at any depth.
fn example_programs(root: &Path) -> Vec<std::path::PathBuf> {
    let mut all = Vec::new();
    let mut dirs = vec![root.join("examples")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            if e.path().is_dir() {
                dirs.push(e.path());
            } else if e.path().extension().is_some_and(|x| x == "prose") {
                all.push(e.path());
            }
        }
    }
    all
}

#[test]
fn every_example_runs_as_the_examples_readme_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("examples/README.md")).unwrap();
    let block = readme
        .split("## Running them")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("examples/README.md has a `Running them` block");
    let mut covered = Vec::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<String> = line
            .split_whitespace()
            .map(|w| match w.strip_prefix("examples/") {
                Some(rest) => root.join("examples").join(rest).display().to_string(),
                None => w.to_string(),
            })
            .collect();
        assert_eq!(words[0], "prosevm", "{line}");
        let file = words
            .iter()
            .find(|w| w.ends_with(".prose"))
            .expect("a program")
            .clone();
        covered.push(std::fs::canonicalize(&file).unwrap());
        let dir = support::scratch(&format!("cli-example-{}", covered.len()));
        let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        let (code, out, err) = run("prosevm", &dir, &args);
        assert_eq!(code, 0, "`{line}` fails:\n{out}{err}");
        assert!(err.contains("[Program] Program complete"), "{line}:\n{err}");
    }
    for f in example_programs(&root) {
        let f = std::fs::canonicalize(f).unwrap();
        assert!(
            covered.contains(&f),
            "{} has no line in examples/README.md",
            f.display()
        );
    }
}

/// Every example has its tests beside it (`NAME.test.toml`), and they pass offline: the
/// mock, mock scripts and tapes recorded on the local model answer, so CI checks that each
/// example still does its job at no cost.
#[test]
fn every_example_has_tests_and_they_pass_without_a_model() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let programs = example_programs(&root);
    assert!(programs.len() >= 13, "{programs:?}");
    for path in programs {
        assert!(
            path.with_extension("test.toml").is_file(),
            "{} has no tests beside it",
            path.display()
        );
    }
    let scratch = support::scratch("cli-example-tests");
    let (code, out, err) = run(
        "prosevm",
        &scratch,
        &["test", &root.join("examples").display().to_string()],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("test result: ok."), "{out}");
}

/// The driver settings run `id` under `dir`'s state directory recorded.
fn recorded_driver(dir: &Path, id: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(".prose/runs").join(id).join("run.json"))
        .expect("run.json");
    serde_json::from_str::<Value>(&text).expect("json")["driver"].clone()
}

/// The ids of the runs under `dir`'s state directory, oldest first.
fn run_ids(dir: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(dir.join(".prose/runs"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

#[test]
fn resume_and_fork_honour_the_mock_flags_they_are_given_and_keep_the_rest() {
    let dir = setup("cli-driver-over");
    let (code, _, err) = run(
        "prosevm",
        &dir,
        &[
            "run",
            "asks.prose",
            "--mock-latency",
            "40",
            "--mock-conditions",
            "false",
            "--trace",
            "quiet",
        ],
    );
    assert_eq!(code, 3, "waits for its input: {err}");
    let id = run_ids(&dir).pop().expect("a run");
    assert_eq!(recorded_driver(&dir, &id)["latency"], 40);

    // A flag for the mock given alone changes the run's own mock, that option only.
    let (code, _, err) = run(
        "prosevm",
        &dir,
        &[
            "resume",
            &id,
            "--input",
            "audience=engineers",
            "--mock-latency",
            "0",
            "--trace",
            "quiet",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("latency 40 ms") && err.contains("latency 0 ms"),
        "{err}"
    );
    let driver = recorded_driver(&dir, &id);
    assert_eq!(driver["latency"], 0, "{driver}");
    assert_eq!(driver["conditions"], "false", "{driver}");

    // A fork with only a mock flag keeps what the run recorded but that flag; one naming
    // the driver starts a mock afresh, as for a new run, and says what changed.
    for (extra, conditions) in [
        (&["--mock-conditions", "true"][..], "true"),
        (&["--driver", "mock", "--mock-latency", "0"][..], "after:1"),
    ] {
        let mut args = vec!["fork", id.as_str(), "--trace", "quiet"];
        args.extend_from_slice(extra);
        let (code, _, err) = run("prosevm", &dir, &args);
        assert_eq!(code, 0, "{extra:?}: {err}");
        // `prosevm: run NEW forks run OLD: ...`
        let fork = err
            .split("prosevm: run ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .expect("the fork's id");
        let driver = recorded_driver(&dir, fork);
        assert_eq!(driver["conditions"], conditions, "{extra:?}: {driver}");
        assert_eq!(driver["latency"], 0, "{extra:?}: {driver}");
        assert!(
            err.contains("conditions false") && err.contains(&format!("conditions {conditions}")),
            "{extra:?}: the change is said: {err}"
        );
    }

    // A mock flag for a run another driver answers is refused, naming that driver.
    let (code, _, err) = run(
        "prosevm",
        &dir,
        &[
            "fork",
            &id,
            "--driver",
            "command",
            "--command",
            "echo hi",
            "--mock-latency",
            "3",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--mock-latency") && err.contains("command driver"),
        "{err}"
    );
}

#[test]
fn an_empty_store_says_where_it_looked() {
    let dir = support::scratch("cli-empty-store");
    let (code, _, err) = run(
        "prosevm",
        &dir,
        &["inspect", "latest", "--state-dir", "records"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the file store at records/runs holds no runs"),
        "{err}"
    );
}

#[test]
fn inspect_says_which_sessions_a_run_has_for_an_id_it_does_not_hold() {
    let dir = setup("cli-inspect-missing");
    let (code, _, err) = run("prosevm", &dir, &["run", "good.prose", "--trace", "quiet"]);
    assert_eq!(code, 0, "{err}");
    for id in ["9:9", "0:7"] {
        let (code, _, err) = run("prosevm", &dir, &["inspect", "latest", "--session", id]);
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(&format!("has no request {id}")) && err.contains("its one session is 0:0"),
            "{id}: {err}"
        );
    }
    let (code, _, err) = run("prosevm", &dir, &["inspect", "latest", "--session", "x9"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not a request id"), "{err}");
}
