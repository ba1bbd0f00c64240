//! Durable runs with real processes: a run killed (SIGKILL) at random moments resumes to the
//! same outputs as an uninterrupted run, and no answer journaled before the kill is asked
//! of the driver again, and its binding files come out the same. Also: the binding files
//! and `state.md` of a run, the directories of invoked programs, persistent agents' memory across runs and resumes (the same after a kill, and on disk when a
//! run finishes), resuming a finished run, a changed program, a torn and a
//! corrupted journal, and two runs side by side.

use crate::support;
use support::prosevm as vm;
use support::{files_in, journal_ids, output, outputs, run_ids};

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

const PROGRAM: &str = r#"let plan = session "Plan the work"
parallel:
  a = session "Branch A, step 1" -> session "Branch A, step 2"
  b = session "Branch B, step 1" -> session "Branch B, step 2"
  c = session "Branch C"
let results = ["x", "y", "z", "w"] | pmap:
  session "Item {item}"
loop until **the summary is ready** (max: 3):
  session "Refine"
output summary = session "Summarise"
  context: [plan, a, b, c, results]
"#;

fn scratch(name: &str) -> PathBuf {
    support::scratch(&format!("durable-{name}"))
}

fn program(dir: &Path) -> PathBuf {
    let p = dir.join("work.prose");
    std::fs::write(&p, PROGRAM).expect("program");
    p
}

fn reference(dir: &Path, prog: &Path) -> serde_json::Value {
    let (code, out, err) = output(
        vm().args([
            "run",
            prog.to_str().expect("path"),
            "--trace",
            "quiet",
            "--format",
            "json",
            "--state-dir",
        ])
        .arg(dir.join("ref")),
    );
    assert_eq!(code, 0, "{err}");
    outputs(&out)
}

/// The files in a run's `bindings/`, by name, with their contents.
fn binding_files(state: &Path, id: &str) -> std::collections::BTreeMap<String, String> {
    files_in(&state.join("runs").join(id).join("bindings"))
        .into_iter()
        .collect()
}

/// A run's binding files with the anonymous ones (`anon_NNN.md`, numbered in the order
/// answers arrived, which concurrency varies) replaced by their sorted contents minus the
/// header.
fn named_bindings_and_anonymous_values(
    state: &Path,
    id: &str,
) -> (std::collections::BTreeMap<String, String>, Vec<String>) {
    let (anon, named): (std::collections::BTreeMap<_, _>, _) = binding_files(state, id)
        .into_iter()
        .partition(|(k, _)| k.starts_with("anon_"));
    // Without their first line (`# anon_NNN`), which carries the number.
    let mut values: Vec<String> = anon
        .into_values()
        .map(|v| {
            v.split_once('\n')
                .map_or(v.clone(), |(_, rest)| rest.to_string())
        })
        .collect();
    values.sort();
    (named, values)
}

/// A small deterministic pseudo-random sequence (no extra dependencies).
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn killed_runs_resume_to_the_same_outputs_without_asking_twice() {
    let dir = scratch("kill");
    let prog = program(&dir);
    let expected = reference(&dir, &prog);
    let ref_id = run_ids(&dir.join("ref")).remove(0);
    let expected_bindings = named_bindings_and_anonymous_values(&dir.join("ref"), &ref_id);
    // The pipelines' first steps and the refinement are kept under no name; the `pmap`
    // items live in `results`, not in files of their own.
    let anonymous: Vec<&str> = expected_bindings
        .1
        .iter()
        .map(|v| v.rsplit_once("\n\n").map_or("", |(_, a)| a))
        .collect();
    assert_eq!(
        anonymous,
        [
            "[mock] Branch A, step 1\n",
            "[mock] Branch B, step 1\n",
            "[mock] Refine\n"
        ],
        "{:?}",
        expected_bindings.1
    );
    assert_eq!(
        expected_bindings.0.keys().collect::<Vec<_>>(),
        [
            "a.md",
            "b.md",
            "c.md",
            "plan.md",
            "results.md",
            "summary.md"
        ]
    );
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut resumed = 0;
    for trial in 0..50 {
        let state = dir.join(format!("state-{trial}"));
        let before_log = dir.join(format!("before-{trial}.log"));
        let after_log = dir.join(format!("after-{trial}.log"));
        let mut child = vm()
            .args([
                "run",
                prog.to_str().expect("path"),
                "--trace",
                "quiet",
                "--format",
                "json",
                "--mock-latency",
                "15",
                "--max-concurrency",
                "2",
            ])
            .arg("--state-dir")
            .arg(&state)
            .arg("--mock-log")
            .arg(&before_log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        // Kill at a random moment of the run itself (process start-up varies with the load
        // on the machine, so the clock starts once the run directory exists).
        let started = std::time::Instant::now();
        while run_ids(&state).is_empty() && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(next(&mut seed) % 200));
        let _ = child.kill();
        let _ = child.wait();
        let ids = run_ids(&state);
        let Some(id) = ids.first() else {
            continue; // killed before the run directory existed: nothing to resume
        };
        let journaled = journal_ids(&state, id);
        // The same driver, logging what the resume asks to a file of its own.
        let (code, out, err) = output(
            vm().args(["resume", id, "--trace", "quiet", "--format", "json"])
                .args(["--driver", "mock", "--mock-latency", "15"])
                .args(["--max-concurrency", "2", "--state-dir"])
                .arg(&state)
                .arg("--mock-log")
                .arg(&after_log),
        );
        assert_eq!(code, 0, "trial {trial}: {err}");
        assert_eq!(
            outputs(&out),
            expected,
            "trial {trial}: outputs differ after resume"
        );
        let asked: Vec<String> = std::fs::read_to_string(&after_log)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect();
        let asked_again: Vec<&String> = asked.iter().filter(|l| journaled.contains(l)).collect();
        assert!(
            asked_again.is_empty(),
            "trial {trial}: asked again for journaled answers {asked_again:?}"
        );
        // Everything the run needed was either replayed or asked by the resume.
        let finally = journal_ids(&state, id);
        let all: std::collections::BTreeSet<&String> = finally.iter().collect();
        let replayed_or_asked: std::collections::BTreeSet<&String> =
            journaled.iter().chain(asked.iter()).collect();
        assert_eq!(all, replayed_or_asked, "trial {trial}");
        let got = named_bindings_and_anonymous_values(&state, id);
        assert_eq!(
            got.0.keys().collect::<Vec<_>>(),
            expected_bindings.0.keys().collect::<Vec<_>>(),
            "trial {trial}: other binding files after resume"
        );
        assert_eq!(
            got, expected_bindings,
            "trial {trial}: binding files differ after resume"
        );
        resumed += 1;
    }
    assert!(
        resumed >= 25,
        "only {resumed} trials had something to resume"
    );
}

#[test]
fn a_run_writes_binding_files_and_its_state() {
    let dir = scratch("bindings");
    let prog = dir.join("scoped.prose");
    std::fs::write(
        &prog,
        r#"input topic: "What to write about"
block draft(subject):
  let outline = session "Outline {subject}"
  session "Note what {subject} needs"
  output session "Draft from the outline"
    context: outline
let text = do draft(topic)
let again = do draft("a second subject")
const title = "fixed"
session "Polish"
  context: text
"#,
    )
    .expect("program");
    let state = dir.join("state");
    let (code, _, err) = output(
        vm().args(["run", prog.to_str().expect("path"), "--trace", "quiet"])
            .args(["--input", "topic=rivers", "--state-dir"])
            .arg(&state),
    );
    assert_eq!(code, 0, "{err}");
    let id = run_ids(&state).remove(0);
    let files = binding_files(&state, &id);
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["again.md", "anon_001.md", "text.md", "title.md", "topic.md"],
        "values bound inside block calls, and their sessions' answers kept under no name, get no file"
    );
    assert_eq!(files["topic.md"], "# topic\n\nkind: input\n\nsource:\n```prose\ninput topic: \"What to write about\"\n```\n\n---\n\nrivers\n");
    assert!(files["title.md"].contains("kind: const\n"));
    assert_eq!(
        files["anon_001.md"],
        "# anon_001\n\nkind: anonymous\n\nsource:\n```prose\nsession \"Polish\"\n  context: text\n```\n\n---\n\n[mock] Polish\n"
    );
    assert!(files["text.md"].contains("```prose\nlet text = do draft(topic)\n```"));
    let state_md =
        std::fs::read_to_string(state.join("runs").join(&id).join("state.md")).expect("state.md");
    assert!(state_md.starts_with(&format!(
        "# Execution State\n\nrun: {id}\nprogram: scoped\n"
    )));
    assert!(state_md.contains("status: finished\n"), "{state_md}");
    assert!(
        state_md.contains("let text = do draft(topic)                   # --> bindings/text.md\n"),
        "{state_md}"
    );
    assert!(
        state_md.contains("session \"Polish\"                             # (complete)\n"),
        "{state_md}"
    );
    assert!(
        state_md.contains("| text | let | bindings/text.md | (root) | scoped |\n"),
        "{state_md}"
    );
    assert!(!state_md.contains("outline__"), "{state_md}");
    let (code, out, _) = output(
        vm().args(["inspect", &id, "--json", "--state-dir"])
            .arg(&state),
    );
    assert_eq!(code, 0);
    let meta: serde_json::Value = serde_json::from_str(&out).expect("json");
    // The block calls' values, from the journal.
    assert_eq!(meta["bindings"]["outline__1"], "[mock] Outline rivers");
    assert_eq!(
        meta["bindings"]["outline__2"],
        "[mock] Outline a second subject"
    );
    assert_eq!(meta["bindings"]["topic"], "rivers");
    assert_eq!(meta["state"].as_str(), Some(state_md.as_str()));
    let (code, out, _) = output(vm().args(["inspect", &id, "--state-dir"]).arg(&state));
    assert_eq!(code, 0);
    assert!(out.contains("\"status\": \"finished\""), "{out}");
    assert!(out.ends_with(&format!("\n{state_md}\n")), "{out}");
}

#[test]
fn project_agents_remember_across_runs_and_resumes() {
    let dir = scratch("memory");
    let state = dir.join("state");
    let first = dir.join("first.prose");
    std::fs::write(
        &first,
        "agent keeper:\n  persist: project\n  prompt: \"You keep the notes\"\nsession: keeper\n  prompt: \"Note the first thing\"\n",
    )
    .expect("program");
    // `resume:` before any `session:` in this program: only memory from an earlier run
    // makes it valid (otherwise it is E018).
    let second = dir.join("second.prose");
    std::fs::write(
        &second,
        "agent keeper:\n  persist: project\n  prompt: \"You keep the notes\"\nresume: keeper\n  prompt: \"Note the second thing\"\nsession \"Something slow\"\nresume: keeper\n  prompt: \"Note the third thing\"\n",
    )
    .expect("program");
    let run = |prog: &Path| {
        output(
            vm().args(["run", prog.to_str().expect("path"), "--trace", "quiet"])
                .arg("--state-dir")
                .arg(&state),
        )
    };
    // Under --strict, `resume:` with no memory is the reference's error, E018.
    let (code, _, err) = output(
        vm().args(["run", second.to_str().expect("path"), "--trace", "quiet"])
            .arg("--strict")
            .arg("--state-dir")
            .arg(&state),
    );
    assert_eq!(code, 1, "resume: with no memory must fail under --strict");
    assert!(err.contains("E018"), "{err}");
    let (code, _, err) = run(&first);
    assert_eq!(code, 0, "{err}");
    let home = state.join("agents").join("keeper");
    assert_eq!(
        std::fs::read_to_string(home.join("memory.md")).expect("memory"),
        "- keeper answered: [mock] Note the first thing"
    );
    // The second program, killed after its first answer, then resumed.
    let before = run_ids(&state);
    let mut child = vm()
        .args(["run", second.to_str().expect("path"), "--trace", "quiet"])
        .args(["--mock-latency", "300", "--state-dir"])
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    for _ in 0..500 {
        std::thread::sleep(Duration::from_millis(10));
        let log = std::fs::read_to_string(home.join("segments.md")).unwrap_or_default();
        if log.contains("# Segment 002\n") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let id = run_ids(&state).into_iter().find(|i| !before.contains(i));
    let id = id.expect("the second run started");
    assert_eq!(
        journal_ids(&state, &id),
        ["0:0"],
        "killed during the slow session"
    );
    assert_eq!(
        files_in(&home)
            .iter()
            .map(|f| f.0.as_str())
            .collect::<Vec<_>>(),
        ["memory.md", "segments.md"]
    );
    let (code, _, err) = output(
        vm().args(["resume", &id, "--trace", "quiet", "--state-dir"])
            .arg(&state),
    );
    assert_eq!(code, 0, "{err}");
    let files = files_in(&home);
    assert_eq!(
        files.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
        ["memory.md", "segments.md"]
    );
    assert_eq!(
        files[0].1,
        "- keeper answered: [mock] Note the first thing\n- keeper answered: [mock] Note the second thing\n- keeper answered: [mock] Note the third thing"
    );
    let log = &files[1].1;
    let headers: Vec<&str> = log.lines().filter(|l| l.starts_with("# Segment")).collect();
    assert_eq!(
        headers,
        ["# Segment 001", "# Segment 002", "# Segment 003"],
        "the resume appended segment 2 again: {log}"
    );
    assert!(
        log.contains(&format!("# Segment 003\n\nrun: {id}\nrequest: 0:2\n")),
        "{log}"
    );
    assert!(log.ends_with("[mock] Note the third thing\n\n"), "{log}");
    let state_md =
        std::fs::read_to_string(state.join("runs").join(&id).join("state.md")).expect("state");
    assert!(state_md.contains("| keeper | project | "), "{state_md}");
}

/// A program whose persistent agents, one kept for the project and one for the run, update
/// their memory in a loop, through a block, between other sessions.
const KEEPERS: &str = r#"agent keeper:
  persist: project
  prompt: "You keep the notes"
agent scout:
  persist: true
  prompt: "You scout ahead"
block note(k):
  let n = resume: keeper
    prompt: "Note thing {k}"
  output n
session: keeper
  prompt: "Open the notes"
session: scout
  prompt: "Start scouting"
repeat 24 as k:
  do note(k)
  session "Check {k}"
  resume: scout
    prompt: "Scout {k}"
output done = session "Close the notes"
"#;

/// The memory files of run `id` in `state` (the project's keeper's and the run's scout's),
/// by agent and file name, with the run's id in segments replaced by `RUN`.
fn memory_files(state: &Path, id: &str) -> Vec<(String, String, String)> {
    let keeper = state.join("agents").join("keeper");
    let scout = state.join("runs").join(id).join("agents").join("scout");
    [("keeper", keeper), ("scout", scout)]
        .into_iter()
        .flat_map(|(agent, dir)| {
            files_in(&dir)
                .into_iter()
                .map(move |(f, text)| (agent.to_string(), f, text.replace(id, "RUN")))
        })
        .collect()
}

#[test]
fn killed_runs_with_persistent_agents_end_with_the_memory_of_an_uninterrupted_run() {
    let dir = scratch("memory-kill");
    let prog = dir.join("keepers.prose");
    std::fs::write(&prog, KEEPERS).expect("program");
    let run = |state: &Path| {
        vm().args(["run", prog.to_str().expect("path"), "--trace", "quiet"])
            .arg("--state-dir")
            .arg(state)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("runs")
    };
    let reference = dir.join("ref");
    assert!(run(&reference).success());
    let ref_id = run_ids(&reference).remove(0);
    let expected = memory_files(&reference, &ref_id);
    // Each one's memory.md and its log of segments, 25 of the keeper's and 25 of the
    // scout's.
    assert_eq!(expected.len(), 4, "{expected:?}");
    for (agent, file, text) in &expected {
        if file == "segments.md" {
            assert_eq!(text.matches("\n## Answer\n").count(), 25, "{agent}: {text}");
        }
    }
    let keeper_memory = &expected
        .iter()
        .find(|(a, f, _)| a == "keeper" && f == "memory.md")
        .expect("keeper's memory")
        .2;
    assert_eq!(keeper_memory.lines().count(), 25, "{keeper_memory}");
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    for trial in 0..6 {
        let state = dir.join(format!("state-{trial}"));
        let mut child = vm()
            .args(["run", prog.to_str().expect("path"), "--trace", "quiet"])
            .args(["--mock-latency", "5", "--state-dir"])
            .arg(&state)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        // Killed once the journal holds between 4 and 70 of the run's 75 answers.
        let records = 4 + (next(&mut seed) % 67) as usize;
        let started = std::time::Instant::now();
        while run_ids(&state)
            .first()
            .is_none_or(|id| journal_ids(&state, id).len() < records)
            && started.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = child.kill();
        let _ = child.wait();
        let id = run_ids(&state).remove(0);
        if trial % 2 == 1 {
            // What a power cut may do: the memory files, written without syncing while
            // the run went on, are lost; the journal, synced, is not.
            let _ = std::fs::remove_dir_all(state.join("agents"));
            let _ = std::fs::remove_dir_all(state.join("runs").join(&id).join("agents"));
        }
        let (code, _, err) = output(
            vm().args(["resume", &id, "--trace", "quiet", "--state-dir"])
                .arg(&state),
        );
        assert_eq!(code, 0, "trial {trial}: {err}");
        assert_eq!(
            memory_files(&state, &id),
            expected,
            "trial {trial}: killed after {records} answers"
        );
    }
}

#[test]
fn a_finished_runs_project_memory_is_on_disk_when_its_record_says_finished() {
    let dir = scratch("memory-finished");
    let state = dir.join("state");
    let prog = dir.join("notes.prose");
    std::fs::write(
        &prog,
        "agent keeper:\n  persist: project\n  prompt: \"You keep the notes\"\nsession: keeper\n  prompt: \"Open the notes\"\nrepeat 300 as k:\n  resume: keeper\n    prompt: \"Note thing {k}\"\n",
    )
    .expect("program");
    // No latency: the runner never waits, so memory files are written only every 250 ms
    // while the run goes, and when it stops.
    let mut child = vm()
        .args(["run", prog.to_str().expect("path"), "--trace", "quiet"])
        .arg("--state-dir")
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let home = state.join("agents").join("keeper");
    let started = std::time::Instant::now();
    let seen = loop {
        let finished = run_ids(&state).first().is_some_and(|id| {
            std::fs::read_to_string(state.join("runs").join(id).join("run.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .is_some_and(|r| r["status"] == "finished")
        });
        if finished {
            // Read at once, while the process may still be exiting.
            break files_in(&home);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the run never finished"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(child.wait().expect("waits").success());
    assert_eq!(seen.len(), 2, "memory.md and the log of segments");
    let (name, log) = &seen[1];
    assert_eq!(name, "segments.md");
    assert_eq!(log.matches("\n## Answer\n").count(), 301, "{log}");
    assert!(log.contains("# Segment 301\n"), "{log}");
    assert!(log.ends_with("[mock] Note thing 299\n\n"), "{log}");
    let (name, memory) = &seen[0];
    assert_eq!(name, "memory.md");
    assert_eq!(memory.lines().count(), 301);
    assert!(
        memory.ends_with("- keeper answered: [mock] Note thing 299"),
        "{memory}"
    );
}

#[test]
fn invoked_programs_get_directories_of_their_own() {
    let dir = scratch("imports");
    std::fs::create_dir_all(dir.join("lib")).expect("lib");
    std::fs::write(
        dir.join("lib/inner.prose"),
        "input word: \"A word\"\noutput echo = session \"Echo {word}\"\n",
    )
    .expect("inner");
    std::fs::write(
        dir.join("lib/outer.prose"),
        "use \"./inner.prose\" as inner\ninput topic: \"A topic\"\nlet said = inner(word: topic)\noutput told = session \"Tell {said.echo}\"\n",
    )
    .expect("outer");
    let main = dir.join("main.prose");
    std::fs::write(
        &main,
        "use \"./lib/outer.prose\" as outer\nlet first = outer(topic: \"rain\")\nlet second = outer(topic: \"snow\")\n",
    )
    .expect("main");
    let state = dir.join("state");
    let (code, _, err) = output(
        vm().args([
            "run",
            main.to_str().expect("path"),
            "--trace",
            "quiet",
            "--state-dir",
        ])
        .arg(&state),
    );
    assert_eq!(code, 0, "{err}");
    let id = run_ids(&state).remove(0);
    let run = state.join("runs").join(&id);
    let outer = run.join("imports/local--outer");
    let inner = outer.join("imports/local--inner");
    assert_eq!(
        std::fs::read_to_string(outer.join("program.prose")).expect("outer copy"),
        std::fs::read_to_string(dir.join("lib/outer.prose")).expect("outer")
    );
    assert!(inner.join("program.prose").exists());
    // Invocations: outer is 1 and 3, inner 2 and 4, in the order the run made them.
    let names = |d: &Path| {
        files_in(&d.join("bindings"))
            .into_iter()
            .map(|f| f.0)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(&outer),
        [
            "said__1.md",
            "said__3.md",
            "told__1.md",
            "told__3.md",
            "topic__1.md",
            "topic__3.md"
        ]
    );
    assert_eq!(
        names(&inner),
        ["echo__2.md", "echo__4.md", "word__2.md", "word__4.md"]
    );
    let echo = std::fs::read_to_string(inner.join("bindings/echo__4.md")).expect("echo");
    assert!(
        echo.starts_with("# echo\n\nkind: output\nexecution_id: 4\nprogram: inner\n"),
        "{echo}"
    );
    assert!(echo.ends_with("[mock] Echo snow\n"), "{echo}");
    assert_eq!(names(&run), ["first.md", "second.md"]);
}

#[test]
fn state_md_shows_the_call_stack_and_active_constructs_while_running() {
    let dir = scratch("state");
    let prog = dir.join("st.prose");
    std::fs::write(
        &prog,
        "block work(n):\n  loop until **done** (max: 3):\n    session \"Step {n}\"\nparallel:\n  a = do work(1)\n  b = session \"Other\"\nsession \"After\"\n",
    )
    .expect("program");
    let state = dir.join("state");
    let mut child = vm()
        .args(["run", prog.to_str().expect("path"), "--trace", "quiet"])
        .args(["--mock-latency", "200", "--mock-conditions", "false"])
        .arg("--state-dir")
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let read = || {
        run_ids(&state)
            .first()
            .and_then(|id| {
                std::fs::read_to_string(state.join("runs").join(id).join("state.md")).ok()
            })
            .unwrap_or_default()
    };
    let mut seen = String::new();
    for _ in 0..300 {
        std::thread::sleep(Duration::from_millis(10));
        seen = read();
        if seen.contains("## Call Stack") && seen.contains("### Loop") {
            break;
        }
    }
    assert!(seen.contains("status: running\n"), "{seen}");
    assert!(
        seen.contains("### Parallel (line 4)\n\n- strategy: all\n- branches: 2, "),
        "{seen}"
    );
    assert!(
        seen.contains("### Loop (line 2, fiber 0/0.0)\n\n- kind: loop\n- iteration: ")
            && seen.contains("/3\n"),
        "{seen}"
    );
    assert!(
        seen.contains("| 0 | 1 | main | 0 | st | 4 | joining |"),
        "{seen}"
    );
    assert!(
        seen.contains("| 0/0.0 | 2 | work | 1 | st | 2 | waiting for 0/0.0:")
            || seen.contains("| 0/0.0 | 2 | work | 1 | st | 3 | waiting for 0/0.0:"),
        "{seen}"
    );
    assert!(
        seen.contains("| 0/0.0 | 1 | parallel-branch-0 | 0 | st | 5 | waiting |"),
        "{seen}"
    );
    assert!(seen.contains("# <-- EXECUTING"), "{seen}");
    let status = child.wait().expect("wait");
    assert!(status.success());
    let done = read();
    assert!(done.contains("status: finished\n"), "{done}");
    assert!(!done.contains("## Call Stack"), "{done}");
    assert!(!done.contains("# <-- EXECUTING"), "{done}");
}

#[test]
fn resuming_a_finished_run_prints_its_outputs() {
    let dir = scratch("finished");
    let prog = program(&dir);
    let expected = reference(&dir, &prog);
    let id = run_ids(&dir.join("ref")).remove(0);
    let (code, out, err) = output(
        vm().args(["resume", &id, "--format", "json", "--state-dir"])
            .arg(dir.join("ref")),
    );
    assert_eq!(code, 0);
    assert_eq!(outputs(&out), expected);
    assert!(err.contains("already finished"), "{err}");
}

/// Starts a run and kills it once it has journaled something.
fn interrupted(dir: &Path, prog: &Path) -> (PathBuf, String) {
    let state = dir.join("state");
    let mut child = vm()
        .args([
            "run",
            prog.to_str().expect("path"),
            "--trace",
            "quiet",
            "--mock-latency",
            "40",
        ])
        .arg("--state-dir")
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(10));
        if let Some(id) = run_ids(&state).first() {
            if journal_ids(&state, id).len() >= 2 {
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let id = run_ids(&state).remove(0);
    (state, id)
}

#[test]
fn a_changed_program_is_refused() {
    let dir = scratch("changed");
    let prog = program(&dir);
    let (state, id) = interrupted(&dir, &prog);
    std::fs::write(&prog, PROGRAM.replace("Summarise", "Summarize")).expect("edit");
    let (code, _, err) = output(vm().args(["resume", &id]).arg("--state-dir").arg(&state));
    assert_eq!(code, 1);
    assert!(err.contains("has changed"), "{err}");
}

#[test]
fn a_torn_journal_tail_is_dropped_and_a_corrupted_journal_refused() {
    let dir = scratch("torn");
    let prog = program(&dir);
    let expected = reference(&dir, &prog);
    let (state, id) = interrupted(&dir, &prog);
    let journal = state.join("runs").join(&id).join("journal.log");
    let mut bytes = std::fs::read(&journal).expect("journal");
    let good = bytes.clone();
    bytes.extend_from_slice(b"0badc0de {\"id\":\"0:9\",\"te");
    std::fs::write(&journal, &bytes).expect("tear");
    let (code, out, err) = output(
        vm().args(["resume", &id, "--trace", "quiet", "--format", "json"])
            .arg("--state-dir")
            .arg(&state),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(outputs(&out), expected);
    // A damaged record before the last one is corruption: a clear error, nothing run.
    let (state2, id2) = {
        let d = scratch("corrupt");
        let p = program(&d);
        interrupted(&d, &p)
    };
    let j2 = state2.join("runs").join(&id2).join("journal.log");
    let mut b2 = std::fs::read(&j2).expect("journal");
    b2[3] ^= 0x01;
    std::fs::write(&j2, &b2).expect("corrupt");
    let (code, _, err) = output(vm().args(["resume", &id2]).arg("--state-dir").arg(&state2));
    assert_eq!(code, 1);
    assert!(err.contains("corrupted at line 1"), "{err}");
    let _ = good;
}

#[test]
fn two_runs_side_by_side_do_not_interfere() {
    let dir = scratch("side");
    let prog = program(&dir);
    let expected = reference(&dir, &prog);
    let state = dir.join("shared");
    let spawn = || {
        vm().args([
            "run",
            prog.to_str().expect("path"),
            "--trace",
            "quiet",
            "--format",
            "json",
            "--mock-latency",
            "5",
        ])
        .arg("--state-dir")
        .arg(&state)
        .stderr(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn")
    };
    let (a, b) = (spawn(), spawn());
    let out_a = a.wait_with_output().expect("a");
    let out_b = b.wait_with_output().expect("b");
    assert_eq!(outputs(&String::from_utf8_lossy(&out_a.stdout)), expected);
    assert_eq!(outputs(&String::from_utf8_lossy(&out_b.stdout)), expected);
    assert_eq!(run_ids(&state).len(), 2);
}

#[test]
fn fan_out_elements_live_in_their_list_and_appends_reach_their_binding() {
    let dir = scratch("fanout");
    let prog = dir.join("fan.prose");
    std::fs::write(
        &prog,
        "let items = []\nrepeat 3 as i:\n  items = items + [i]\nlet results = items | pmap:\n  session \"Work on {item}\"\nparallel for x in [\"p\", \"q\"]:\n  session \"Loose {x}\"\n",
    )
    .expect("program");
    let state = dir.join("state");
    let (code, _, err) = output(
        vm().args(["run", prog.to_str().expect("path"), "--trace", "quiet"])
            .arg("--state-dir")
            .arg(&state),
    );
    assert_eq!(code, 0, "{err}");
    let id = run_ids(&state).remove(0);
    let files = binding_files(&state, &id);
    // The bound `pmap`'s answers are in `results`; the unbound `parallel for`'s are not
    // kept anywhere else, so each has an anonymous binding.
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["anon_001.md", "anon_002.md", "items.md", "results.md"]
    );
    assert!(
        files["items.md"].ends_with("\n---\n\n[0,1,2]\n"),
        "{}",
        files["items.md"]
    );
    assert!(
        files["results.md"].ends_with(
            "\n---\n\n[\"[mock] Work on 0\",\"[mock] Work on 1\",\"[mock] Work on 2\"]\n"
        ),
        "{}",
        files["results.md"]
    );
    let loose: Vec<&String> = files
        .iter()
        .filter(|(k, _)| k.starts_with("anon_"))
        .map(|(_, v)| v)
        .collect();
    assert!(
        loose.iter().all(|v| v.contains("[mock] Loose ")),
        "{loose:?}"
    );
}

#[test]
fn a_bindings_kind_is_what_declared_it_not_the_last_statements_first_word() {
    let dir = scratch("binding-kinds");
    let prog = dir.join("kinds.prose");
    // `poem` is last bound by a plain assignment, yet it is an output.
    std::fs::write(
        &prog,
        "output poem = session \"Write\"\npoem = session \"Improve\"\nconst title = \"t\"\n",
    )
    .expect("program");
    let state = dir.join("state");
    let (code, _, err) = output(
        vm().args(["run", prog.to_str().expect("path"), "--trace", "json"])
            .arg("--state-dir")
            .arg(&state),
    );
    assert_eq!(code, 0, "{err}");
    let id = &run_ids(&state)[0];
    let files = binding_files(&state, id);
    assert!(
        files["poem.md"].starts_with("# poem\n\nkind: output\n"),
        "{}",
        files["poem.md"]
    );
    assert!(
        files["title.md"].starts_with("# title\n\nkind: const\n"),
        "{}",
        files["title.md"]
    );
    // The trace's binding events say so too.
    let kinds: Vec<(String, String)> = err
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "binding")
        .map(|e| {
            (
                e["name"].as_str().unwrap_or("").to_string(),
                e["kind"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("poem".into(), "output".into())),
        "{kinds:?}"
    );
}

#[test]
fn a_reader_piped_into_one_that_stops_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("pipe-reader");
    std::fs::write(
        dir.join("prog.prose"),
        "input topic: \"what\"\noutput r = \"done\"\n",
    )
    .expect("program");
    // An input far larger than a pipe's buffer, which `inspect --json` prints back.
    let inputs = serde_json::json!({ "topic": "tides ".repeat(40_000) });
    std::fs::write(dir.join("inputs.json"), inputs.to_string()).expect("inputs");
    let (code, _, err) = output(vm().current_dir(&dir).args([
        "run",
        "prog.prose",
        "--input-file",
        "inputs.json",
        "--trace",
        "quiet",
    ]));
    assert_eq!(code, 0, "{err}");
    let id = run_ids(&dir.join(".prose")).pop().expect("a run");
    let mut child = vm()
        .current_dir(&dir)
        .args(["inspect", &id, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("inspect");
    // The reader goes away before reading anything, as `| head -0` does.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}
