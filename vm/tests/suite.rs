//! Tests and evals of workflows, through the binaries: `prosevm test` runs the cases of test
//! files (the mock, a mock script, tapes it records and replays), says what failed as
//! `cargo test` does and writes JUnit XML; `prosevm eval` scores a dataset with checks and a
//! judge against a fake provider, writes a page a browser opens, fails against a baseline a
//! prompt edit made worse, asks again with the memo only what an edit changed, and resumes
//! after an interrupt; both keep their runs (and evals) in every store.

use crate::support;

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use support::billing::{last_user_line, Answerer, Fake, Say};

/// `prosevm` in `dir`, with no provider settings from the environment.
fn vm(dir: &Path) -> Command {
    let mut cmd = support::prosevm_keyed("sk-suite-test");
    cmd.current_dir(dir);
    cmd
}

/// Writes `files` (path, text) under `dir`.
fn put(dir: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

const GREET: &str =
    "input name: \"Who to greet\"\noutput greeting = session \"Greet {name} warmly\"\n";

#[test]
fn cases_pass_fail_and_are_ignored_as_cargo_says_with_junit_for_ci() {
    let dir = support::scratch("suite-test-basic");
    put(
        &dir,
        &[
            ("greet.prose", GREET),
            (
                "greet.test.toml",
                r#"[[test]]
name = "greets by name"
inputs = { name = "Ada" }
[test.expect]
sessions = 1
outputs.greeting = { contains = "Ada", matches = '^\[mock\]' }

[[test]]
name = "wants a sonnet"
inputs = { name = "Ada" }
[test.expect]
outputs.greeting = { contains = "sonnet" }

[[test]]
name = "left out"
ignore = "needs a model"
"#,
            ),
        ],
    );
    let (code, out, err) = support::output(vm(&dir).args(["test", ".", "--junit", "junit.xml"]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("test ./greet.test.toml: greets by name ... ok"),
        "{out}"
    );
    assert!(
        out.contains("test ./greet.test.toml: wants a sonnet ... FAILED"),
        "{out}"
    );
    assert!(out.contains("left out ... ignored, needs a model"), "{out}");
    assert!(
        out.contains("output greeting: expected a text containing \"sonnet\", found \"[mock] Greet Ada warmly\""),
        "the first difference is shown: {out}"
    );
    assert!(
        out.contains("test result: FAILED. 1 passed; 1 failed; 1 ignored"),
        "{out}"
    );
    let xml = std::fs::read_to_string(dir.join("junit.xml")).expect("junit");
    assert!(xml.contains("tests=\"3\" failures=\"1\""), "{xml}");
    assert!(
        xml.contains("<testcase classname=\"./greet.test.toml\" name=\"wants a sonnet\""),
        "{xml}"
    );
    assert!(
        xml.contains("<failure message=\"output greeting: expected"),
        "{xml}"
    );
    assert!(
        xml.contains("<skipped message=\"needs a model\"/>"),
        "{xml}"
    );
    // --filter runs some; all passing, exit 0, and nothing is left in the temporary place.
    let (code, out, err) = support::output(vm(&dir).args(["test", "--filter", "by name"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 passed; 0 failed; 0 ignored"), "{out}");
    // JSON: one document.
    let (code, out, _) = support::output(vm(&dir).args(["test", "--format", "json"]));
    assert_eq!(code, 1);
    let doc: Value = serde_json::from_str(&out).expect("one document");
    assert_eq!(
        (&doc["passed"], &doc["failed"], &doc["ignored"]),
        (&json!(1), &json!(1), &json!(1))
    );
}

#[test]
fn a_case_that_acts_is_checked_on_the_files_it_leaves_and_the_tools_it_called() {
    let dir = support::scratch("suite-test-files");
    put(
        &dir,
        &[
            (
                "sum.prose",
                "agent adder:\n  model: sonnet\n  prompt: \"You add numbers.\"\n  permissions:\n    read: [\"*.txt\"]\n    write: [\"total.txt\"]\noutput answer = session: adder\n  prompt: \"Add the numbers in numbers.txt and save the total in total.txt\"\n",
            ),
            (
                "sum.mock.json",
                r#"[
  {"kind": "turn", "prompt": "Add the numbers", "times": 1,
   "reply": {"tool_calls": [{"name": "read_file", "arguments": {"path": "numbers.txt"}}]}},
  {"kind": "turn", "prompt": "Add the numbers", "times": 1,
   "reply": {"tool_calls": [{"name": "write_file", "arguments": {"path": "total.txt", "content": "7\n"}}]}},
  {"kind": "turn", "prompt": "Add the numbers", "times": 1, "reply": {"text": "The total is 7."}}
]"#,
            ),
            (
                "sum.test.toml",
                r#"[[test]]
name = "adds and saves"
files = { "numbers.txt" = "3\n4\n" }
answers = { script = "sum.mock.json" }
[test.expect]
tools = ["read_file", "write_file"]
outputs.answer = { contains = "7" }
files."total.txt" = { matches = '^7\s*$' }
files."numbers.txt" = "3\n4\n"
files."notes.txt" = { exists = false }

[[test]]
name = "must not write"
files = { "numbers.txt" = "3\n4\n" }
answers = { script = "sum.mock.json" }
[test.expect]
tools = ["read_file"]
files."total.txt" = { exists = false }
"#,
            ),
        ],
    );
    let (code, out, err) = support::output(vm(&dir).args(["test"]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("adds and saves ... ok"), "{out}");
    assert!(
        out.contains("tools: expected calls of read_file only, found a call of write_file"),
        "{out}"
    );
    assert!(
        out.contains("file total.txt: expected none, found \"7\\n\""),
        "{out}"
    );
    // The working directory each case ran in is its own: the test's own stays as it was.
    assert!(!dir.join("total.txt").exists());
}

#[test]
fn a_tape_recorded_by_prosevm_test_replays_offline_and_an_edit_fails_it_naming_the_request() {
    let dir = support::scratch("suite-test-tape");
    put(
        &dir,
        &[
            ("greet.prose", GREET),
            (
                "greet.test.toml",
                "[[test]]\nname = \"greets\"\ninputs = { name = \"Ada\" }\nanswers = { tape = \"greet.tape\" }\n[test.expect]\noutputs.greeting = { contains = \"Ada\" }\n",
            ),
        ],
    );
    let fake = Fake::new(support::billing::echo(), false);
    // Recording: from the fake provider, the tape written.
    let (code, out, err) = support::output(vm(&dir).args([
        "test",
        "--record",
        "--driver",
        "openai",
        "--base-url",
        &fake.url,
        "--model",
        "fake-1",
    ]));
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(fake.billed().len(), 1);
    let tape = std::fs::read_to_string(dir.join("greet.tape")).expect("the tape");
    assert!(tape.contains("\"model\":\"fake-1\""), "{tape}");
    // Replaying: no provider, the same outcome, nothing billed.
    drop(fake);
    let (code, out, err) = support::output(vm(&dir).args(["test"]));
    assert_eq!(code, 0, "{out}{err}");
    // An edited prompt asks what the tape does not hold: a clear failure, naming it.
    put(
        &dir,
        &[(
            "greet.prose",
            "input name: \"Who to greet\"\noutput greeting = session \"Greet {name} coldly\"\n",
        )],
    );
    let (code, out, _) = support::output(vm(&dir).args(["test"]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("holds no reply to this request"), "{out}");
    assert!(out.contains("differs at"), "{out}");
}

#[test]
fn a_test_file_naming_what_the_program_lacks_does_not_run() {
    let dir = support::scratch("suite-test-unchecked");
    put(
        &dir,
        &[
            ("greet.prose", GREET),
            (
                "greet.test.toml",
                "[[test]]\nname = \"greets\"\ninputs = { nmae = \"Ada\" }\n",
            ),
        ],
    );
    let (code, out, err) = support::output(vm(&dir).args(["test"]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FAILED (the file does not check)"), "{out}");
    assert!(
        out.contains("error[E158]") && out.contains("did you mean `name`?"),
        "{out}"
    );
}

#[test]
fn tests_keep_their_runs_in_every_store() {
    let dir = support::scratch("suite-test-stores");
    put(
        &dir,
        &[
            ("greet.prose", GREET),
            (
                "greet.test.toml",
                "[[test]]\nname = \"greets\"\ninputs = { name = \"Ada\" }\n",
            ),
        ],
    );
    let mut stores = vec![
        format!("file:{}", dir.join("files").display()),
        format!("sqlite:{}", dir.join("runs.db").display()),
    ];
    stores.extend(support::pg::database("suite_test_stores"));
    for store in stores {
        let (code, out, err) = support::output(vm(&dir).args(["test", "--store", &store]));
        assert_eq!(code, 0, "{store}: {out}{err}");
        let (code, out, err) =
            support::output(vm(&dir).args(["runs", "--json", "--store", &store]));
        assert_eq!(code, 0, "{store}: {err}");
        let runs: Vec<Value> = serde_json::from_str(&out).expect("json");
        assert_eq!(runs.len(), 1, "{store}: {runs:?}");
        assert_eq!(runs[0]["status"], "finished", "{store}");
    }
}

// ---- evals

/// A fake provider that answers a judge with a score (4 of 5), and anything else with a
/// line naming its task.
fn judging_provider() -> Fake {
    let answer: Answerer = Box::new(|body: &Value, _| {
        let task = last_user_line(body);
        if task.contains("Give a score from") || body.to_string().contains("Rubric:") {
            return Say::Text("{\"score\": 4, \"reason\": \"Brief and on topic.\"}".into());
        }
        Say::Text(format!("Done: {task}"))
    });
    Fake::new(answer, false)
}

const SUMMARY: &str =
    "input city: \"A city\"\noutput summary = session \"Write one sentence about {city}\"\n";

/// An eval of `summary.prose` over `rows` cities, with a check and a judge.
fn eval_files(dir: &Path, rows: usize) {
    let cities: String = (0..rows)
        .map(|i| format!("{{\"inputs\": {{\"city\": \"City{i}\"}}, \"expected\": {{\"city\": \"City{i}\"}}}}\n"))
        .collect();
    put(
        dir,
        &[
            ("summary.prose", SUMMARY),
            ("cities.jsonl", &cities),
            (
                "summary.eval.toml",
                "dataset = \"cities.jsonl\"\n[expect]\noutputs.summary = { contains = \"{expected.city}\" }\n[[judge]]\nname = \"brief\"\noutput = \"summary\"\nrubric = \"One sentence about {expected.city}: 5, nothing of it: 1.\"\npass = 4\n",
            ),
        ],
    );
}

/// Runs `prosevm eval` in `dir` against `fake`, with `extra` flags; the exit status and the
/// JSON document it printed.
fn eval(dir: &Path, fake: &Fake, extra: &[&str]) -> (i32, Value, String) {
    let (code, out, err) = support::output(
        vm(dir)
            .args([
                "eval",
                "summary.eval.toml",
                "--driver",
                "openai",
                "--base-url",
                &fake.url,
            ])
            .args(["--model", "fake-1", "--format", "json"])
            .args(extra),
    );
    let doc = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, doc, err)
}

#[test]
fn an_eval_scores_twenty_rows_with_a_check_and_a_judge_and_its_page_opens_in_a_browser() {
    let dir = support::scratch("suite-eval-basic");
    eval_files(&dir, 20);
    let fake = judging_provider();
    let (code, doc, err) = eval(&dir, &fake, &["-o", "eval.html"]);
    assert_eq!(code, 0, "{err}");
    let summary = &doc["summaries"][0];
    assert_eq!(summary["pass_rate"], 1.0, "{doc}");
    let scores = summary["summary"]["scores"].as_array().expect("scores");
    let named = |n: &str| scores.iter().find(|s| s[0] == n).cloned().expect(n);
    assert_eq!(named("output summary")[1], 1.0);
    assert_eq!(named("brief")[1], 0.75, "4 of 1 to 5");
    let results = doc["variants"][0]["results"].as_array().expect("results");
    assert_eq!(results.len(), 20);
    assert!(results
        .iter()
        .all(|r| r["scored"] == true && r["run"].is_string()));
    assert!(
        results[0]["scores"][2]["reason"] == "Brief and on topic.",
        "{}",
        results[0]
    );
    // 20 rows and 20 judgments were asked, nothing more.
    assert_eq!(fake.billed().len(), 40);
    // Kept in the store: listed, and shown again.
    let id = doc["id"].as_str().expect("id").to_string();
    let (code, out, _) = support::output(vm(&dir).args(["evals"]));
    assert_eq!(code, 0);
    assert!(out.contains(&id) && out.contains("100%"), "{out}");
    // Its page opens in a real browser, every row on it.
    let page = dir.join("eval.html");
    let Some(browser) = support::browser::chromium() else {
        return;
    };
    let (dom, log) =
        support::browser::headless(&browser, &dir.join("profile"), &["--dump-dom"], &page);
    assert!(dom.contains("id=\"pass-rate\">100%"), "{log}");
    assert_eq!(dom.matches("<tr class=\"row\">").count(), 20);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
}

#[test]
fn an_edit_that_drops_a_score_fails_against_the_baseline() {
    let dir = support::scratch("suite-eval-baseline");
    eval_files(&dir, 5);
    let fake = judging_provider();
    let (code, before, err) = eval(&dir, &fake, &[]);
    assert_eq!(code, 0, "{err}");
    let baseline = before["id"].as_str().expect("id").to_string();
    // The same again: nothing dropped.
    let (code, _, err) = eval(&dir, &fake, &["--baseline", &baseline]);
    assert_eq!(code, 0, "{err}");
    // The prompt no longer names the city: the check fails on every row.
    put(&dir, &[("summary.prose", "input city: \"A city\"\noutput summary = session \"Write one sentence about a city\"\n")]);
    let (code, after, err) = eval(&dir, &fake, &["--baseline", &baseline]);
    assert_eq!(code, 1, "{err}");
    let dropped: Vec<&str> = after["dropped"]
        .as_array()
        .expect("dropped")
        .iter()
        .filter_map(|d| d["score"].as_str())
        .collect();
    assert_eq!(dropped, ["output summary", "pass rate"]);
}

#[test]
fn a_second_eval_with_the_memo_asks_only_what_an_edit_changed() {
    let dir = support::scratch("suite-eval-memo");
    let rows = 6;
    let cities: String = (0..rows)
        .map(|i| format!("{{\"city\": \"City{i}\"}}\n"))
        .collect();
    put(
        &dir,
        &[
            (
                "summary.prose",
                "input city: \"A city\"\nlet facts = session \"List facts about {city}\"\nlet mood = session \"Describe the mood of {city}\"\n  context: []\noutput summary = session \"Write one sentence about {city}\"\n  context: facts\n",
            ),
            ("cities.jsonl", &cities),
            ("summary.eval.toml", "dataset = \"cities.jsonl\"\n[expect]\noutputs.summary = { contains = \"{inputs.city}\" }\n"),
        ],
    );
    let fake = judging_provider();
    let (code, _, err) = eval(&dir, &fake, &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fake.billed().len(), 3 * rows);
    // Again, unchanged: every answer from the memo.
    let (code, _, err) = eval(&dir, &fake, &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fake.billed().len(), 3 * rows, "nothing asked again");
    // One session's prompt edited: that session, and the one its answer reaches, asked
    // again; the third (mood, which takes no context) is not.
    put(
        &dir,
        &[(
            "summary.prose",
            "input city: \"A city\"\nlet facts = session \"List three facts about {city}\"\nlet mood = session \"Describe the mood of {city}\"\n  context: []\noutput summary = session \"Write one sentence about {city}\"\n  context: facts\n",
        )],
    );
    let (code, _, err) = eval(&dir, &fake, &["--memo"]);
    assert_eq!(code, 0, "{err}");
    let asked: Vec<String> = fake.billed()[3 * rows..]
        .iter()
        .map(|b| last_user_line(&b.body))
        .collect();
    assert_eq!(asked.len(), 2 * rows, "{asked:#?}");
    assert!(asked.iter().all(|a| !a.contains("mood")), "{asked:#?}");
}

#[test]
fn an_interrupted_eval_resumes_without_asking_again_what_it_had() {
    let dir = support::scratch("suite-eval-resume");
    eval_files(&dir, 8);
    // A provider slow enough to interrupt part way.
    let answer: Answerer = Box::new(|body: &Value, _| {
        std::thread::sleep(std::time::Duration::from_millis(150));
        let task = last_user_line(body);
        if body.to_string().contains("Rubric:") {
            return Say::Text("{\"score\": 5, \"reason\": \"ok\"}".into());
        }
        Say::Text(format!("Done: {task}"))
    });
    let fake = Fake::new(answer, false);
    let child = vm(&dir)
        .args([
            "eval",
            "summary.eval.toml",
            "--driver",
            "openai",
            "--base-url",
            &fake.url,
        ])
        .args(["--model", "fake-1", "--jobs", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while fake.billed().len() < 6 {
        assert!(
            std::time::Instant::now() < deadline,
            "the eval did not get going"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let id = err
        .split("--resume ")
        .nth(1)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| panic!("no resume command: {err}"));
    let asked_before: Vec<String> = fake
        .billed()
        .iter()
        .map(|b| last_user_line(&b.body))
        .collect();
    let (code, doc, err) = eval(&dir, &fake, &["--resume", &id]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["id"], id.as_str());
    let results = doc["variants"][0]["results"].as_array().expect("results");
    assert!(results.iter().all(|r| r["scored"] == true), "{doc}");
    // What was answered before the interrupt was not asked again: only a request in flight
    // when it came (at most one per try running, two here) may be.
    let all: Vec<String> = fake
        .billed()
        .iter()
        .map(|b| last_user_line(&b.body))
        .collect();
    let after = &all[asked_before.len()..];
    let again: Vec<&String> = after.iter().filter(|a| asked_before.contains(a)).collect();
    let in_flight = &asked_before[asked_before.len().saturating_sub(2)..];
    assert!(
        again.len() <= 2 && again.iter().all(|a| in_flight.contains(a)),
        "asked again: {again:#?}, of {asked_before:#?}"
    );
    let mut distinct = all.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 16, "8 rows and 8 judgments: {all:#?}");
}

/// An eval whose rows act: each try works in a directory of its own, laid out with the
/// row's files, outside the state directory (whose files tools may never touch), and is
/// scored on the files it leaves; the directories go once every try is scored.
#[test]
fn an_evals_rows_write_files_in_their_own_directories_and_are_scored_on_them() {
    let dir = support::scratch("suite-eval-files");
    put(
        &dir,
        &[
            (
                "save.prose",
                "input word: \"A word\"\nagent w:\n  model: sonnet\n  permissions:\n    read: [\"**\"]\n    write: [\"**\"]\noutput r = session: w\n  prompt: \"Save {word} in out.txt\"\n",
            ),
            (
                "words.jsonl",
                "{\"inputs\": {\"word\": \"alpha\"}, \"files\": {\"seed.txt\": \"x\"}}\n{\"inputs\": {\"word\": \"beta\"}}\n",
            ),
            (
                "save.eval.toml",
                "dataset = \"words.jsonl\"\n[expect]\nfiles.\"out.txt\" = { matches = '^(alpha|beta)$' }\n",
            ),
        ],
    );
    let fake = Fake::new(
        Box::new(|body: &Value, _| {
            let asked = body.to_string();
            if asked.contains("\"role\":\"tool\"") {
                return Say::Text("Saved.".into());
            }
            let word = if asked.contains("Save alpha") {
                "alpha"
            } else {
                "beta"
            };
            Say::Calls(vec![(
                "write_file".into(),
                json!({"path": "out.txt", "content": word}),
            )])
        }),
        false,
    );
    let (code, out, err) = support::output(
        vm(&dir)
            .args(["eval", "save.eval.toml", "--driver", "openai"])
            .args([
                "--base-url",
                &fake.url,
                "--model",
                "fake-1",
                "--format",
                "json",
            ]),
    );
    assert_eq!(code, 0, "{out}{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    let results = &doc["variants"][0]["results"];
    for r in results.as_array().expect("results") {
        assert_eq!(r["passed"], true, "{r}");
    }
    assert!(!dir.join("out.txt").exists());
    let id = doc["id"].as_str().expect("id");
    assert!(!std::env::temp_dir().join("prosevm-evals").join(id).exists());
}

#[test]
fn evals_are_kept_in_every_store() {
    let dir = support::scratch("suite-eval-stores");
    eval_files(&dir, 3);
    let fake = judging_provider();
    let mut stores: Vec<String> = vec![
        format!("file:{}", dir.join("files").display()),
        format!("sqlite:{}", dir.join("runs.db").display()),
    ];
    stores.extend(support::pg::database("suite_eval_stores"));
    for store in stores {
        let (code, doc, err) = eval(&dir, &fake, &["--store", &store]);
        assert_eq!(code, 0, "{store}: {err}");
        let id = doc["id"].as_str().expect("id").to_string();
        let (code, out, err) =
            support::output(vm(&dir).args(["evals", &id, "--format", "json", "--store", &store]));
        assert_eq!(code, 0, "{store}: {err}");
        let shown: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(shown["id"], id.as_str(), "{store}");
        assert_eq!(shown["summaries"][0]["pass_rate"], 1.0, "{store}");
    }
}

#[test]
fn an_eval_recorded_on_tapes_runs_again_offline_with_the_same_scores() {
    let dir = support::scratch("suite-eval-tapes");
    eval_files(&dir, 4);
    let fake = judging_provider();
    let (code, recorded, err) = eval(&dir, &fake, &["--record-tapes", "tapes"]);
    assert_eq!(code, 0, "{err}");
    let tapes: Vec<String> = std::fs::read_dir(dir.join("tapes"))
        .expect("tapes")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(tapes.len(), 8, "a tape per try and per judgment: {tapes:?}");
    let asked = fake.billed().len();
    // Replayed: nothing asked, the same scores.
    let (code, replayed, err) = eval(&dir, &fake, &["--replay-tapes", "tapes"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fake.billed().len(), asked, "nothing asked of the provider");
    assert_eq!(
        replayed["summaries"][0]["summary"]["scores"],
        recorded["summaries"][0]["summary"]["scores"]
    );
    // A tape that no longer fits (the prompt edited) fails its row, naming the request.
    put(&dir, &[("summary.prose", "input city: \"A city\"\noutput summary = session \"Write two sentences about {city}\"\n")]);
    let (_, edited, _) = eval(&dir, &fake, &["--replay-tapes", "tapes"]);
    let error = edited["variants"][0]["results"][0]["error"]
        .as_str()
        .unwrap_or("");
    assert!(error.contains("holds no reply to this request"), "{edited}");
}
