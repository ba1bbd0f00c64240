//! The memo across runs (`--memo`, `memo = true`): a model request asked before is answered
//! from the memo kept beside the runs, without a call; a different prompt, context, tool
//! result or model is asked; tools still run; a damaged entry is a miss with a warning, and
//! a memo that cannot be written a warning. Against the fake provider of
//! [`support::billing`], whose answers name the task they were given.

use crate::support;

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use support::billing::{echo, last_user_line, Answerer, Fake, Say};

/// Three sessions: `c` takes `a`'s answer as context, `b` takes nothing.
const PROGRAM: &str = "let a = session \"Name a river\"\noutput b = session \"Name a hill\"\n  context: []\noutput c = session \"Describe the river\"\n  context: a\n";

/// `prosevm` in `dir`, with no provider settings from the environment and `key` as both
/// providers' key.
fn vm(dir: &Path, key: &str) -> Command {
    let mut cmd = support::prosevm_keyed(key);
    cmd.current_dir(dir);
    cmd
}

/// Runs `prog.prose` in `dir` with `driver` against `fake`, the trace in `trace`.
fn run(
    dir: &Path,
    driver: &str,
    fake: &Fake,
    trace: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let url = match driver {
        "anthropic" => fake.anthropic_url(),
        _ => fake.url.clone(),
    };
    support::output(
        vm(dir, "sk-memo-test-key")
            .args(["run", "prog.prose", "--driver", driver, "--base-url", &url])
            .args(["--trace", trace, "--no-progress", "--no-input"])
            .args(extra),
    )
}

/// The first line of the task of every request `fake` answered after its first `from`, in
/// order. (One fake serves each test's runs: the provider's address is part of what a
/// request is keyed by.)
fn asked(fake: &Fake, from: usize) -> Vec<String> {
    fake.billed()[from..]
        .iter()
        .map(|b| last_user_line(&b.body))
        .collect()
}

/// The trace's JSON events.
fn events(err: &str) -> Vec<Value> {
    err.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// Every file under `dir`, as text.
fn all_files(dir: &Path) -> String {
    let mut text = String::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            text.push_str(&all_files(&p));
        } else {
            text.push_str(&String::from_utf8_lossy(
                &std::fs::read(&p).unwrap_or_default(),
            ));
        }
    }
    text
}

/// The entries' files of the file store's memo under `dir`.
fn entries(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for sub in std::fs::read_dir(dir.join(".prose/memo"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for e in std::fs::read_dir(sub.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            found.push(e.path());
        }
    }
    found.sort();
    found
}

#[test]
fn the_same_program_again_sends_no_request_and_prints_the_same_outputs() {
    let dir = support::scratch("memo-again");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    let fake = Fake::new(echo(), true);
    let (code, out, err) = run(&dir, "openai", &fake, "narrate", &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "b: Done: Name a hill\nc: Done: Describe the river\n");
    assert_eq!(asked(&fake, 0).len(), 3);
    assert!(
        err.contains("[Summary] memo: 0 answer(s) from the memo, 3 asked"),
        "{err}"
    );
    assert_eq!(entries(&dir).len(), 3, "one entry per answer");
    let first_run = support::run_ids(&dir.join(".prose"));

    // Again: the provider sees no request, although the key is another (keys are not part
    // of what a request is keyed by).
    let url = fake.url.clone();
    let (code, again, err) = support::output(
        vm(&dir, "sk-another-key")
            .args([
                "run",
                "prog.prose",
                "--driver",
                "openai",
                "--base-url",
                &url,
            ])
            .args(["--trace", "json", "--no-input", "--memo"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(again, out);
    assert_eq!(asked(&fake, 3), Vec::<String>::new());
    // The trace says each answer came from the memo, and so does the journal.
    let turns: Vec<Value> = events(&err)
        .into_iter()
        .filter(|e| e["event"] == "turn")
        .collect();
    assert_eq!(turns.len(), 3, "{err}");
    assert!(turns.iter().all(|t| t["from_memo"] == 1), "{turns:?}");
    let ids = support::run_ids(&dir.join(".prose"));
    let second_run = ids
        .iter()
        .find(|id| !first_run.contains(id))
        .expect("a new run");
    let journal =
        std::fs::read_to_string(dir.join(".prose/runs").join(second_run).join("journal.log"))
            .expect("journal");
    let records: Vec<Value> = journal
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(_, j)| serde_json::from_str(j).expect("json"))
        .collect();
    assert_eq!(records.len(), 3);
    assert!(
        records
            .iter()
            .all(|r| r["usage"]["from_memo"] == 1
                && r["usage"].get("input_tokens") == Some(&json!(0))),
        "{records:?}"
    );
    // And the run's record: it spent nothing, and the memo answered three times.
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(".prose/runs").join(second_run).join("run.json"))
            .expect("run.json"),
    )
    .expect("json");
    assert_eq!(record["usage"]["from_memo"], 3, "{record}");
    assert_eq!(record["usage"]["input_tokens"], 0);
    // So does the run's report.
    let (code, page, err) = support::output(vm(&dir, "k").args(["report", second_run]));
    assert_eq!(code, 0, "{err}");
    assert!(
        page.contains("<dt>answers from the memo</dt><dd>3 (0 asked)</dd>"),
        "{page}"
    );
    // The narration's summary counts them.
    let (_, _, narrated) = run(&dir, "openai", &fake, "narrate", &["--memo"]);
    assert!(
        narrated.contains("[Summary] memo: 3 answer(s) from the memo, 0 asked"),
        "{narrated}"
    );
    assert!(asked(&fake, 3).is_empty());
    // No key reaches the memo or the runs.
    assert!(!all_files(&dir.join(".prose")).contains("sk-"));

    // `prosevm memo` says how much it keeps, and clears it.
    let (code, shown, err) = support::output(vm(&dir, "k").args(["memo"]));
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.starts_with("the memo at .prose/memo: 3 answer(s), "),
        "{shown}"
    );
    let (_, json_out, _) = support::output(vm(&dir, "k").args(["memo", "--json"]));
    let size: Value = serde_json::from_str(&json_out).expect("json");
    assert_eq!(size["entries"], 3);
    let bytes: u64 = entries(&dir)
        .iter()
        .map(|p| std::fs::metadata(p).expect("entry").len())
        .sum();
    assert_eq!(size["bytes"], bytes);
    let (code, cleared, _) = support::output(vm(&dir, "k").args(["memo", "--clear"]));
    assert_eq!(code, 0);
    assert!(
        cleared.starts_with("cleared the memo at .prose/memo: it held 3 answer(s)"),
        "{cleared}"
    );
    assert!(entries(&dir).is_empty());
    // Cleared: everything is asked again.
    let (code, _, err) = run(&dir, "openai", &fake, "quiet", &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(asked(&fake, 3).len(), 3);
    // Without --memo, nothing is looked up.
    run(&dir, "openai", &fake, "quiet", &[]);
    assert_eq!(asked(&fake, 6).len(), 3);
}

#[test]
fn an_edited_prompt_asks_that_session_and_those_its_answer_reaches_and_another_model_asks_all() {
    let dir = support::scratch("memo-edit");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    std::fs::write(dir.join("prose.toml"), "memo = true\n").expect("settings");
    let fake = Fake::new(echo(), true);
    let (code, _, err) = run(&dir, "openai", &fake, "quiet", &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(asked(&fake, 0).len(), 3);

    std::fs::write(
        dir.join("prog.prose"),
        PROGRAM.replace("Name a river", "Name a long river"),
    )
    .expect("edited");
    let (code, out, err) = run(&dir, "openai", &fake, "quiet", &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "b: Done: Name a hill\nc: Done: Describe the river\n");
    // The edited session, and the one its new answer reaches as context; not `b` (memo =
    // true in prose.toml).
    assert_eq!(asked(&fake, 3), ["Name a long river", "Describe the river"]);

    // Another model never reads the first model's answers.
    let (code, _, err) = run(
        &dir,
        "openai",
        &fake,
        "quiet",
        &["--model", "another-model"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(asked(&fake, 5).len(), 3);
    assert!(fake.billed()[5..]
        .iter()
        .all(|b| b.body["model"] == "another-model"));
}

#[test]
fn anthropics_answers_are_kept_whatever_the_cache_marks() {
    let dir = support::scratch("memo-anthropic");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    let fake = Fake::new(echo(), true);
    let (code, out, err) = run(&dir, "anthropic", &fake, "quiet", &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(asked(&fake, 0).len(), 3);
    assert!(fake.billed()[0].body.to_string().contains("cache_control"));
    // The marks for the provider's cache are not what a request asks: with caching off,
    // the memo still answers.
    std::fs::write(dir.join("prose.toml"), "prompt_cache = \"off\"\n").expect("settings");
    let (code, again, err) = run(&dir, "anthropic", &fake, "quiet", &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(again, out);
    assert!(asked(&fake, 3).is_empty());
    // The openai driver's answers to the same program are its own.
    run(
        &dir,
        "openai",
        &fake,
        "quiet",
        &["--memo", "--model", "claude-sonnet-4-5"],
    );
    assert_eq!(asked(&fake, 3).len(), 3);
}

/// Reads `notes.md` on the first turn; answers with what the tool returned.
fn read_then_answer() -> Answerer {
    Box::new(|body, _| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        match messages.last() {
            Some(m) if m["role"] == "tool" => Say::Text(format!(
                "Notes say {}",
                m["content"].as_str().unwrap_or_default().trim()
            )),
            _ => Say::Calls(vec![("read_file".into(), json!({"path": "notes.md"}))]),
        }
    })
}

#[test]
fn tools_still_run_and_a_tool_result_that_changed_asks_again() {
    let dir = support::scratch("memo-tools");
    std::fs::write(
        dir.join("prog.prose"),
        "agent reader:\n  prompt: \"You read notes.\"\noutput r = session: reader\n  prompt: \"What do the notes say?\"\n",
    )
    .expect("program");
    std::fs::write(dir.join("notes.md"), "first\n").expect("notes");
    let fake = Fake::new(read_then_answer(), true);
    let (code, out, err) = run(&dir, "openai", &fake, "quiet", &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("first"), "{out}");
    assert_eq!(fake.billed().len(), 2, "a tool call, then the answer");

    // Nothing changed: both turns come from the memo, and the tool runs all the same.
    let (code, again, err) = run(&dir, "openai", &fake, "json", &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(again, out);
    assert_eq!(fake.billed().len(), 2);
    let calls: Vec<Value> = events(&err)
        .into_iter()
        .filter(|e| e["event"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 1, "{err}");
    assert_eq!(calls[0]["tool"], "read_file");

    // The file changed: the first turn is the same request, the second is not.
    std::fs::write(dir.join("notes.md"), "second\n").expect("notes");
    let (code, changed, err) = run(&dir, "openai", &fake, "quiet", &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert!(changed.contains("second"), "{changed}");
    assert_eq!(
        fake.billed().len(),
        3,
        "only the turn that read the new result"
    );
}

#[test]
fn a_damaged_entry_is_a_miss_with_a_warning_and_an_unwritable_memo_is_a_warning() {
    let dir = support::scratch("memo-damaged");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    let fake = Fake::new(echo(), true);
    let (code, out, _) = run(&dir, "openai", &fake, "quiet", &["--memo"]);
    assert_eq!(code, 0);
    // One entry cut short, one with a byte changed.
    let kept = entries(&dir);
    assert_eq!(kept.len(), 3);
    let bytes = std::fs::read(&kept[0]).expect("entry");
    std::fs::write(&kept[0], &bytes[..bytes.len() / 2]).expect("cut");
    let mut bytes = std::fs::read(&kept[1]).expect("entry");
    let at = bytes.len() - 4;
    bytes[at] ^= 0x04;
    std::fs::write(&kept[1], &bytes).expect("changed");
    let (code, again, err) = run(&dir, "openai", &fake, "json", &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(again, out, "never a wrong answer");
    assert_eq!(
        asked(&fake, 3).len(),
        2,
        "the two damaged entries are misses"
    );
    let warnings: Vec<Value> = events(&err)
        .into_iter()
        .filter(|e| e["event"] == "warning" && e["code"] == "W201")
        .collect();
    assert_eq!(warnings.len(), 2, "{err}");
    assert!(
        warnings.iter().all(|w| w["message"]
            .as_str()
            .unwrap_or_default()
            .contains("checksum")),
        "{warnings:?}"
    );
    // Asked again, they were written again: a third run asks nothing.
    run(&dir, "openai", &fake, "quiet", &["--memo"]);
    assert!(asked(&fake, 5).is_empty());

    // A memo that cannot be written: where its directory should be is a file.
    let blocked = support::scratch("memo-unwritable");
    std::fs::write(blocked.join("prog.prose"), PROGRAM).expect("program");
    std::fs::create_dir_all(blocked.join(".prose")).expect("state");
    std::fs::write(blocked.join(".prose/memo"), "not a directory").expect("file");
    let (code, out, err) = run(&blocked, "openai", &fake, "narrate", &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "b: Done: Name a hill\nc: Done: Describe the river\n");
    let said: Vec<&str> = err.lines().filter(|l| l.contains("[W201]")).collect();
    assert_eq!(said.len(), 1, "said once: {err}");
    assert!(
        said[0].contains("cannot write the memo at .prose/memo"),
        "{err}"
    );
}

#[test]
fn the_sqlite_store_keeps_its_memo_in_its_database() {
    let dir = support::scratch("memo-sqlite");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    let db = format!("sqlite:{}", dir.join("runs.db").display());
    let fake = Fake::new(echo(), true);
    for (n, expected) in [(0, 3), (1, 3)] {
        let (code, _, err) = run(&dir, "openai", &fake, "quiet", &["--memo", "--store", &db]);
        assert_eq!(code, 0, "{n}: {err}");
        assert_eq!(fake.billed().len(), expected, "run {n}");
    }
    assert!(!dir.join(".prose/memo").exists(), "not in files");
    let (code, shown, err) = support::output(vm(&dir, "k").args(["memo", "--store", &db]));
    assert_eq!(code, 0, "{err}");
    assert!(shown.contains("the table prose_memo of "), "{shown}");
    assert!(shown.contains(": 3 answer(s), "), "{shown}");
}

#[test]
fn a_driver_whose_answers_are_not_kept_says_so() {
    let dir = support::scratch("memo-mock");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    let (code, _, err) =
        support::output(vm(&dir, "k").args(["run", "prog.prose", "--memo", "--trace", "quiet"]));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("the memo keeps the answers of the openai and anthropic drivers from their providers; the mock driver's are neither kept nor looked up"),
        "{err}"
    );
    assert!(entries(&dir).is_empty());
}

#[test]
fn a_replayed_tape_never_enters_the_memo() {
    // An edited tape, replayed with --memo, must not answer a later run that asks the real
    // provider: its answers did not come from the provider.
    let dir = support::scratch("memo-replay");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    let fake = Fake::new(echo(), true);
    let tape = dir.join("tape.jsonl");
    let (code, out, err) = run(
        &dir,
        "openai",
        &fake,
        "quiet",
        &["--record", tape.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "b: Done: Name a hill\nc: Done: Describe the river\n");
    let recorded = std::fs::read_to_string(&tape).expect("tape");
    let forged = recorded.replace("Done: Name a hill", "FORGED");
    assert_ne!(forged, recorded, "the tape holds the answer");
    std::fs::write(&tape, forged).expect("tape");
    let (code, out, err) = run(
        &dir,
        "openai",
        &fake,
        "quiet",
        &["--replay", tape.to_str().unwrap(), "--memo"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("b: FORGED"),
        "the replay answers from the tape: {out}"
    );
    assert!(
        err.contains("a replayed tape's are neither kept nor looked up"),
        "{err}"
    );
    assert!(entries(&dir).is_empty(), "nothing entered the memo");
    let before = fake.billed().len();
    let (code, out, err) = run(&dir, "openai", &fake, "quiet", &["--memo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "b: Done: Name a hill\nc: Done: Describe the river\n");
    assert_eq!(fake.billed().len(), before + 3, "the provider was asked");
}
