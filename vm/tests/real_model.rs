//! A real small model's answers, replayed: tapes recorded with `--record` from
//! Qwen2.5-Coder-1.5B-Instruct on llama.cpp's server (`vm/tests/real/record.sh`) answer the
//! same programs again offline, through the same streaming, assembly, runaway watch and
//! parsing as the live runs. What a small model really does (answers in markdown and
//! explanations, tool declarations written back, calls written as text, made-up tools,
//! answers cut off at the output limit) is tested here without a model.

use crate::support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The model the tapes were recorded from (the requests name it).
const MODEL: &str = "qwen2.5-coder-1.5b";

fn real() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/real")
}

/// `prosevm` with no provider, model or key from the environment: the tapes answer.
fn offline() -> Command {
    let mut cmd = support::prosevm();
    for var in ["OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"] {
        cmd.env_remove(var);
    }
    cmd
}

/// Replays tape `name` for the program at `program` (relative to tests/real), run in a
/// scratch directory holding `fixtures` (and the program's own `prose.toml`, if any);
/// returns exit code, stdout, the trace's events and the scratch directory.
fn replay(
    name: &str,
    program: &str,
    fixtures: &[(&str, &str)],
) -> (i32, String, Vec<Value>, PathBuf) {
    let dir = support::scratch(&format!("real-{name}"));
    let src = real().join(program);
    let file = src
        .file_name()
        .expect("a file")
        .to_string_lossy()
        .into_owned();
    std::fs::copy(&src, dir.join(&file)).expect("program");
    let toml = src.with_file_name("prose.toml");
    if toml.is_file() {
        std::fs::copy(&toml, dir.join("prose.toml")).expect("prose.toml");
    }
    for (f, text) in fixtures {
        std::fs::write(dir.join(f), text).expect("fixture");
    }
    let tape = real().join("tapes").join(format!("{name}.tape"));
    let (code, out, err) = support::output(
        offline()
            .current_dir(&dir)
            .args([
                "run",
                &file,
                "--model",
                MODEL,
                "--no-input",
                "--trace",
                "json",
            ])
            .arg(format!("--replay={}", tape.display())),
    );
    let events = err
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if code != 0 {
        eprintln!("{err}");
    }
    (code, out, events, dir)
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["event"] == kind).count()
}

#[test]
fn the_readmes_hello_program_ends_with_a_poem_every_time() {
    for n in 1..=3 {
        let name = format!("hello-{n}");
        let (code, out, events, _) = replay(&name, "../../../examples/hello.prose", &[]);
        assert_eq!(code, 0, "{name}");
        let poem = out.strip_prefix("poem: ").expect("the output");
        // Lines of verse: no tool call, no declarations, no JSON.
        assert!(poem.trim_end().lines().count() >= 2, "{name}: {out}");
        assert!(
            !poem.contains('{') && !poem.contains("<tool"),
            "{name}: {out}"
        );
        // The model wrote the tool declarations back (or wrote a file) first; the loop
        // asked for a plain answer rather than going on to its turn limit.
        let turns = count(&events, "turn");
        assert!((1..=4).contains(&turns), "{name}: {turns} turns");
        assert!(count(&events, "delta") > 0, "{name}: the replay streams");
    }
}

#[test]
fn seven_small_published_programs_end() {
    for name in [
        "01-hello-world",
        "02-research-and-summarize",
        "04-write-and-refine",
        "09-research-with-agents",
        "13-variables-and-context",
        "16-parallel-reviews",
        "17-parallel-research",
    ] {
        let (code, _, events, _) = replay(name, &format!("published/{name}.prose"), &[]);
        assert_eq!(code, 0, "{name}");
        let end = events.last().expect("an end event");
        assert_eq!(end["status"], "finished", "{name}");
        // No session went to its turn limit.
        assert!(
            !events
                .iter()
                .any(|e| e.to_string().contains("limit of 40 turns")),
            "{name}"
        );
    }
}

#[test]
fn a_session_that_reads_and_writes_files_writes_its_file_when_reminded() {
    let (code, out, events, dir) = replay(
        "count-lines",
        "programs/count-lines.prose",
        &[("notes.txt", "apples\nbananas\ncherries\n")],
    );
    assert_eq!(code, 0);
    assert!(out.starts_with("done: "), "{out}");
    let reads = events
        .iter()
        .filter(|e| e["event"] == "tool_call" && e["tool"] == "read_file")
        .count();
    assert_eq!(reads, 1, "the model read the file");
    // It took the read for the whole task (a 1.5B model's habit) and said it was done; told
    // that count.txt did not exist yet, it wrote it, with the right count, then answered.
    let writes = events
        .iter()
        .filter(|e| e["event"] == "tool_call" && e["tool"] == "write_file")
        .count();
    assert_eq!(writes, 1, "the model wrote the file");
    assert_eq!(
        std::fs::read_to_string(dir.join("count.txt")).expect("count.txt"),
        "3"
    );
    assert_eq!(count(&events, "turn"), 4);
}

#[test]
fn markdown_verdicts_and_choices_are_read() {
    let (code, out, events, _) = replay("judgments", "programs/judgments.prose", &[]);
    assert_eq!(code, 0);
    assert!(
        out == "tone: calm\n" || out == "tone: stormy\n",
        "a choice was read: {out}"
    );
    assert_eq!(count(&events, "flow"), 1, "the condition was judged");
}

#[test]
fn an_answer_cut_off_at_the_output_limit_is_continued() {
    let (code, out, events, _) =
        replay("long-answer", "programs/long-answer/long-answer.prose", &[]);
    assert_eq!(code, 0);
    // Cut off twice at 120 tokens (its prose.toml), continued twice, finished the third time;
    // the answer is all three parts.
    assert_eq!(count(&events, "turn"), 3);
    let turns_out: u64 = events
        .iter()
        .filter(|e| e["event"] == "turn")
        .filter_map(|e| e["output_tokens"].as_u64())
        .sum();
    assert_eq!(turns_out, 333);
    assert!(out.len() > 1200, "{out}");
}

#[test]
fn a_tape_answers_only_the_requests_it_holds() {
    // The hello program's tape, asked another program's question.
    let dir = support::scratch("real-mismatch");
    std::fs::write(
        dir.join("other.prose"),
        "output r = session \"Write a haiku\"\n",
    )
    .expect("program");
    let tape = real().join("tapes/hello-1.tape");
    let (code, _, err) = support::output(
        support::prosevm()
            .current_dir(&dir)
            .args(["run", "other.prose", "--model", MODEL, "--trace", "quiet"])
            .arg(format!("--replay={}", tape.display())),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("holds no reply to this request"), "{err}");
}

/// The acting suite (`tests/real/acting`: 30 tasks in 10 kinds, docs/models.md) as
/// measured on the local model, replayed from its tapes: every row scores as it did live
/// (`acting/recorded.json`, row name to passed, or null for a row whose tape cannot
/// replay), so a change to what the model sees or to
/// how its steps are read shows here as a row whose tape no longer fits or whose score moved.
#[test]
fn the_acting_suite_replays_with_the_scores_it_had_on_the_model() {
    // Its commands ran under bubblewrap: under Landlock they may not create files at the
    // top of the working directory, and their outputs, so the conversations, would differ.
    use prose_agent::confine::Kind;
    if !support::confinements().contains(&Kind::Bubblewrap) {
        eprintln!(
            "the acting suite is replayed only under bubblewrap, which it was recorded under"
        );
        return;
    }
    let acting = real().join("acting");
    let dir = support::scratch("real-acting");
    for f in ["act.prose", "tasks.jsonl"] {
        std::fs::copy(acting.join(f), dir.join(f)).expect("suite file");
    }
    // Recorded with one try per row.
    let eval = std::fs::read_to_string(acting.join("act.eval.toml")).expect("eval file");
    let once: String = eval
        .lines()
        .map(|l| match l.starts_with("tries") {
            true => "tries = 1\n".to_string(),
            false => format!("{l}\n"),
        })
        .collect();
    std::fs::write(dir.join("act.eval.toml"), once).expect("eval file");
    let recorded: serde_json::Map<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(acting.join("recorded.json")).expect("recorded.json"),
    )
    .expect("recorded scores");
    let (code, out, err) = support::output(
        offline()
            .current_dir(&dir)
            .args([
                "eval",
                "act.eval.toml",
                "--driver",
                "openai",
                "--model",
                MODEL,
            ])
            .args([
                "--jobs",
                "2",
                "--format",
                "json",
                "--structured-turns",
                "auto",
            ])
            .arg("--replay-tapes")
            .arg(acting.join("tapes")),
    );
    assert!(code == 0 || code == 1, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    let results = doc["variants"][0]["results"].as_array().expect("results");
    assert_eq!(results.len(), recorded.len(), "{out}");
    for r in results {
        let name = r["name"].as_str().expect("name");
        // `null`: the row's tape holds the path of the eval's scratch directory (a
        // command's error named it), which differs in every eval, so it cannot replay.
        if recorded.get(name) == Some(&Value::Null) {
            continue;
        }
        let error = r["error"].as_str().unwrap_or("");
        assert!(!error.contains("tape"), "{name}: {error}");
        assert_eq!(
            Some(&r["passed"]),
            recorded.get(name),
            "{name} scored otherwise than on the model: {r}"
        );
    }
}
