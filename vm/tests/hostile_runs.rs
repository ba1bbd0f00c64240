//! Runs under hostile conditions, with real processes: many resumes of one crashed run at
//! once, readers polling a run another process is writing, journals that were deleted, cut
//! short or given a second answer, symbolic links planted in a run directory, and crafted
//! names that would become paths outside it.

use crate::support;
use support::prosevm as vm;
use support::{journal_ids, output, outputs, run_ids};

use prose_machine::protocol::{Answer, Reply, SessionAnswer};
use prose_store::file::RunDir;
use prose_store::journal;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const CHAIN: &str = r#"let prev = session "Start"
repeat 24:
  prev = session "Continue"
    context: prev
output last = session "Finish"
  context: prev
"#;

fn scratch(name: &str) -> PathBuf {
    support::scratch(&format!("hostile-{name}"))
}

fn write_program(dir: &Path) -> PathBuf {
    let p = dir.join("chain.prose");
    std::fs::write(&p, CHAIN).expect("program");
    p
}

/// The outputs of an uninterrupted run, as JSON.
fn reference(dir: &Path, prog: &Path) -> serde_json::Value {
    let (code, out, err) = output(
        vm().args(["run", prog.to_str().expect("path")])
            .args(["--trace", "quiet", "--format", "json", "--state-dir"])
            .arg(dir.join("reference")),
    );
    assert_eq!(code, 0, "{err}");
    outputs(&out)
}

/// Starts a run of `prog` answering after `latency_ms`, in `state`.
fn start(prog: &Path, state: &Path, latency_ms: u64) -> Child {
    vm().args(["run", prog.to_str().expect("path"), "--trace", "quiet"])
        .args(["--mock-latency", &latency_ms.to_string(), "--state-dir"])
        .arg(state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn")
}

/// Waits (up to 10 s) until `ready` holds.
fn wait_for(mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A run of `prog` killed with SIGKILL once its journal holds `records` answers.
fn crashed(dir: &Path, prog: &Path, records: usize) -> (PathBuf, String) {
    let state = dir.join("state");
    let mut child = start(prog, &state, 20);
    wait_for(|| {
        run_ids(&state)
            .first()
            .is_some_and(|id| journal_ids(&state, id).len() >= records)
    });
    let _ = child.kill();
    let _ = child.wait();
    let id = run_ids(&state).remove(0);
    (state, id)
}

/// Resumes run `id` asking for JSON: the exit status, stdout, and stderr followed by the
/// message of the JSON error on stdout, if it failed.
fn resume(state: &Path, id: &str, extra: &[&str]) -> (i32, String, String) {
    let (code, out, mut err) = output(
        vm().args(["resume", id, "--trace", "quiet", "--format", "json"])
            .args(extra)
            .arg("--state-dir")
            .arg(state),
    );
    if code != 0 {
        if let Some(m) = outputs(&out)["error"]["message"].as_str() {
            err.push_str(m);
        }
    }
    (code, out, err)
}

fn run_dir(state: &Path, id: &str) -> PathBuf {
    state.join("runs").join(id)
}

fn assert_no_repeats(ids: &[String]) {
    let mut seen = std::collections::HashSet::new();
    for id in ids {
        assert!(seen.insert(id), "{id} journaled twice: {ids:?}");
    }
}

#[test]
fn many_resumes_of_one_crashed_run_execute_it_once() {
    let dir = scratch("resumes");
    let prog = write_program(&dir);
    let expected = reference(&dir, &prog);
    let (state, id) = crashed(&dir, &prog, 3);
    let journaled = journal_ids(&state, &id);
    let logs: Vec<PathBuf> = (0..8).map(|i| dir.join(format!("asked-{i}.log"))).collect();
    let children: Vec<Child> = logs
        .iter()
        .map(|log| {
            vm().args(["resume", &id, "--trace", "quiet", "--format", "json"])
                .args(["--driver", "mock", "--mock-latency", "30", "--mock-log"])
                .arg(log)
                .arg("--state-dir")
                .arg(&state)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    let results: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect();
    let winners: Vec<usize> = (0..8).filter(|&i| results[i].status.success()).collect();
    assert_eq!(winners.len(), 1, "exactly one resume runs the run");
    let winner = winners[0];
    assert_eq!(
        outputs(&String::from_utf8_lossy(&results[winner].stdout)),
        expected
    );
    for (i, r) in results.iter().enumerate().filter(|(i, _)| *i != winner) {
        // Asked for JSON, the refusal is said on stdout.
        let err =
            String::from_utf8_lossy(&r.stderr).into_owned() + &String::from_utf8_lossy(&r.stdout);
        assert_eq!(r.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "run {id} is being run by another process (pid {})",
                pids[winner]
            )),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(&logs[i]).unwrap_or_default(),
            "",
            "a refused resume asked the driver"
        );
    }
    let ids = journal_ids(&state, &id);
    assert_no_repeats(&ids);
    assert_eq!(ids.len(), 26);
    let asked = std::fs::read_to_string(&logs[winner]).expect("winner's log");
    assert!(
        asked.lines().all(|l| !journaled.iter().any(|j| j == l)),
        "asked again for journaled answers"
    );
}

/// Twelve crashed runs, each resumed by two processes at once while readers (`runs`,
/// `inspect`, `report`) loop over them: each run is executed by one of the two, once and
/// whole; the other is refused, naming the live winner, or finds the run finished. Readers
/// never fail and never stand in a writer's way. Three rounds, as one can be lucky.
#[test]
fn crashed_runs_resumed_twice_at_once_under_readers_each_run_once() {
    let dir = scratch("twice");
    let prog = write_program(&dir);
    let expected = reference(&dir, &prog);
    for round in 0..3 {
        resume_crashed_runs_twice(&dir.join(format!("round-{round}")), &prog, &expected);
    }
}

fn resume_crashed_runs_twice(dir: &Path, prog: &Path, expected: &serde_json::Value) {
    const RUNS: usize = 12;
    std::fs::create_dir_all(dir).expect("dir");
    let state = dir.join("state");
    let mut writers: Vec<Child> = (0..RUNS).map(|_| start(prog, &state, 20)).collect();
    wait_for(|| {
        let ids = run_ids(&state);
        ids.len() == RUNS && ids.iter().all(|id| journal_ids(&state, id).len() >= 8)
    });
    for w in &mut writers {
        let _ = w.kill();
        let _ = w.wait();
    }
    let ids = run_ids(&state);
    let journaled: Vec<Vec<String>> = ids.iter().map(|id| journal_ids(&state, id)).collect();
    assert!(journaled.iter().all(|j| j.len() < 26), "a run finished");

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|r| {
            let (stop, state, ids) = (stop.clone(), state.clone(), ids.clone());
            let page = dir.join(format!("report-{r}.html"));
            std::thread::spawn(move || {
                let mut reads = 0;
                let mut i = r;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let id = &ids[i % ids.len()];
                    i += 1;
                    let mut read = |args: &[&str]| {
                        let (code, _, err) = output(vm().args(args).arg("--state-dir").arg(&state));
                        assert_eq!(code, 0, "{args:?}: {err}");
                        reads += 1;
                    };
                    read(&["inspect", id, "--json"]);
                    read(&["runs"]);
                    read(&["report", id, "-o", page.to_str().expect("path")]);
                }
                reads
            })
        })
        .collect();
    // Two resumes of each run, all started at once.
    let log = |i: usize, k: usize| dir.join(format!("asked-{i}-{k}.log"));
    let resumes: Vec<Child> = (0..RUNS * 2)
        .map(|n| {
            let (i, k) = (n / 2, n % 2);
            vm().args(["resume", &ids[i], "--trace", "quiet", "--format", "json"])
                .args(["--driver", "mock", "--mock-latency", "5", "--mock-log"])
                .arg(log(i, k))
                .arg("--state-dir")
                .arg(&state)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let pids: Vec<u32> = resumes.iter().map(Child::id).collect();
    let results: Vec<_> = resumes
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads: usize = readers
        .into_iter()
        .map(|r| r.join().expect("a reader failed"))
        .sum();
    assert!(reads > 0, "no reader ran");

    for (i, id) in ids.iter().enumerate() {
        let asked: Vec<String> = (0..2)
            .map(|k| std::fs::read_to_string(log(i, k)).unwrap_or_default())
            .collect();
        let ran: Vec<usize> = (0..2).filter(|&k| !asked[k].is_empty()).collect();
        assert_eq!(ran.len(), 1, "run {id}: executed by {ran:?}");
        let (winner, other) = (2 * i + ran[0], 2 * i + 1 - ran[0]);
        let out = |n: usize| String::from_utf8_lossy(&results[n].stdout).into_owned();
        // Asked for JSON, a refusal is said on stdout.
        let err = |n: usize| {
            String::from_utf8_lossy(&results[n].stderr).into_owned()
                + &String::from_utf8_lossy(&results[n].stdout)
        };
        assert!(results[winner].status.success(), "{}", err(winner));
        assert_eq!(outputs(&out(winner)), *expected, "run {id}");
        // The other was refused by the live winner, or came after it and found the run
        // finished.
        if results[other].status.success() {
            assert_eq!(outputs(&out(other)), *expected, "run {id}");
        } else {
            assert_eq!(results[other].status.code(), Some(1), "{}", err(other));
            let named = format!(
                "run {id} is being run by another process (pid {})",
                pids[winner]
            );
            assert!(err(other).contains(&named), "{}", err(other));
        }
        // Once and whole: every request journaled once, none asked again.
        let all = journal_ids(&state, id);
        assert_no_repeats(&all);
        assert_eq!(all.len(), 26, "run {id}");
        assert!(
            asked[ran[0]]
                .lines()
                .all(|l| !journaled[i].iter().any(|j| j == l)),
            "run {id}: asked again for journaled answers"
        );
        let record: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(run_dir(&state, id).join("run.json")).expect("record"),
        )
        .expect("json");
        assert_eq!(record["status"], "finished", "run {id}");
    }
}

/// The journal's complete lines (what a reader may rely on).
fn complete_lines(bytes: &[u8]) -> &[u8] {
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..=end],
        None => &[],
    }
}

#[test]
fn readers_leave_a_held_run_untouched() {
    let dir = scratch("readers");
    let prog = write_program(&dir);
    let expected = reference(&dir, &prog);
    let state = dir.join("state");
    // The holder waits for its first answer longer than the readers below can take on a
    // loaded machine (it is killed before it gets one).
    let mut holder = start(&prog, &state, 120_000);
    wait_for(|| {
        run_ids(&state).first().is_some_and(|id| {
            std::fs::read_to_string(run_dir(&state, id).join("lock"))
                .is_ok_and(|pid| !pid.is_empty())
        })
    });
    let id = run_ids(&state).remove(0);
    let run = run_dir(&state, &id);
    let journal = run.join("journal.log");
    // The holder has read its journal and opened it to append: a tail torn before then
    // would be its own to cut (it reads a new run's journal after taking the lock).
    let fds = std::path::PathBuf::from(format!("/proc/{}/fd", holder.id()));
    let journal = std::fs::canonicalize(&journal).expect("journal");
    wait_for(|| {
        std::fs::read_dir(&fds).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| std::fs::read_link(e.path()).is_ok_and(|to| to == journal))
        })
    });
    // As if the holder were in the middle of appending a record.
    let mut torn = std::fs::read(&journal).expect("journal");
    torn.extend_from_slice(b"0badc0de {\"id\":\"0:0\",\"kind\":\"ses");
    std::fs::write(&journal, &torn).expect("torn");
    let record = std::fs::read(run.join("run.json")).expect("record");
    for _ in 0..5 {
        let (code, out, err) = output(vm().args(["runs", "--state-dir"]).arg(&state));
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&id), "{out}");
        let (code, _, err) = output(
            vm().args(["inspect", &id, "--json", "--state-dir"])
                .arg(&state),
        );
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = resume(&state, &id, &[]);
        assert_eq!(code, 1);
        assert!(
            err.contains("is being run by another process (pid"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&journal).expect("journal"),
            torn,
            "a reader wrote"
        );
        assert_eq!(std::fs::read(run.join("run.json")).expect("record"), record);
    }
    let _ = holder.kill();
    let _ = holder.wait();
    // Now nobody holds the run: resuming takes it, cuts the torn tail and finishes.
    let (code, out, err) = resume(&state, &id, &["--driver", "mock"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(outputs(&out), expected);
    let bytes = std::fs::read(&journal).expect("journal");
    assert!(!bytes.windows(8).any(|w| w == b"0badc0de"), "tail not cut");
}

#[test]
fn a_reader_polling_a_run_being_written_never_changes_its_journal() {
    let dir = scratch("polling");
    let prog = write_program(&dir);
    let state = dir.join("state");
    let mut writer = start(&prog, &state, 3);
    let mut seen: Vec<Vec<u8>> = Vec::new();
    loop {
        let done = writer.try_wait().expect("writer").is_some();
        if let Some(id) = run_ids(&state).first() {
            let (code, _, _) = output(vm().args(["inspect", id, "--state-dir"]).arg(&state));
            let (_, _, _) = output(vm().args(["runs", "--state-dir"]).arg(&state));
            if code == 0 {
                seen.push(std::fs::read(run_dir(&state, id).join("journal.log")).expect("j"));
            }
        }
        if done {
            break;
        }
    }
    assert!(writer.wait().expect("writer").success());
    let id = run_ids(&state).remove(0);
    let dir = RunDir::open(Some(&state), &id).expect("run");
    let record = dir.record().expect("record");
    let contents = dir.read_journal(&record).expect("a clean journal");
    assert!(!contents.torn());
    assert_eq!(contents.records.len(), 26);
    contents.check_seal(&record.journal).expect("sealed");
    let last = std::fs::read(dir.journal_path()).expect("journal");
    assert!(seen.len() > 1, "the reader never saw the run");
    for s in &seen {
        assert!(
            last.starts_with(complete_lines(s)),
            "the journal only ever grows"
        );
    }
}

#[test]
fn a_deleted_journal_is_refused_unless_forced() {
    let dir = scratch("deleted");
    let prog = write_program(&dir);
    let expected = reference(&dir, &prog);
    let (state, id) = crashed(&dir, &prog, 2);
    std::fs::remove_file(run_dir(&state, &id).join("journal.log")).expect("delete");
    let (code, _, err) = resume(&state, &id, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("the journal is missing"), "{err}");
    assert!(err.contains("--force"), "{err}");
    let (code, out, err) = resume(&state, &id, &["--force"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(outputs(&out), expected);
}

#[test]
fn a_second_answer_to_one_request_is_refused_unless_forced() {
    let dir = scratch("repeated");
    let prog = write_program(&dir);
    let expected = reference(&dir, &prog);
    let (state, id) = crashed(&dir, &prog, 3);
    // Appended with a valid chain, as a second process that read the journal would.
    let run = RunDir::open(Some(&state), &id).expect("run");
    let record = run.record().expect("record");
    let contents = run.read_journal(&record).expect("journal");
    let first = contents.records[0].id.clone();
    let mut j = journal::Journal::open(&run.journal_path(), &contents).expect("open");
    j.append(&Reply::answer(
        first.clone(),
        Answer::Session(SessionAnswer::text("a second opinion")),
    ))
    .expect("append");
    j.close().expect("close");
    let (code, _, err) = resume(&state, &id, &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("the journal repeats the answer to {first}")),
        "{err}"
    );
    let (code, out, err) = resume(&state, &id, &["--force"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(outputs(&out), expected, "the first answer is kept");
    let ids = journal_ids(&state, &id);
    assert_no_repeats(&ids);
    let text = std::fs::read_to_string(run.journal_path()).expect("journal");
    assert!(
        !text.contains("a second opinion"),
        "rewritten without the repeat"
    );
}

/// A mock script that fails the final session.
fn failing_script(dir: &Path) -> PathBuf {
    let p = dir.join("fail.json");
    std::fs::write(
        &p,
        r#"[{"prompt": "Finish", "fail": "the provider is down"}]"#,
    )
    .expect("script");
    p
}

#[test]
fn records_lost_since_the_journal_was_closed_are_refused_unless_forced() {
    let dir = scratch("lost");
    let prog = write_program(&dir);
    let expected = reference(&dir, &prog);
    let state = dir.join("state");
    let script = failing_script(&dir);
    let (code, _, err) = output(
        vm().args(["run", prog.to_str().expect("path"), "--trace", "quiet"])
            .arg("--mock-script")
            .arg(&script)
            .arg("--state-dir")
            .arg(&state),
    );
    assert_eq!(code, 1, "the run fails at its last session: {err}");
    let id = run_ids(&state).remove(0);
    let journal = run_dir(&state, &id).join("journal.log");
    let text = std::fs::read_to_string(&journal).expect("journal");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 26, "25 answers and the failure");
    std::fs::write(&journal, lines[..20].join("\n") + "\n").expect("cut");
    let (code, _, err) = resume(&state, &id, &["--driver", "mock"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("the journal lost records: it holds 20, but held 26"),
        "{err}"
    );
    let (code, out, err) = resume(&state, &id, &["--driver", "mock", "--force"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(outputs(&out), expected);
}

#[test]
fn a_failed_request_asked_again_is_not_a_repeat() {
    let dir = scratch("reasked");
    let prog = write_program(&dir);
    let expected = reference(&dir, &prog);
    let state = dir.join("state");
    let script = failing_script(&dir);
    let run = |args: &[&str]| {
        output(
            vm().args(args)
                .args(["--trace", "quiet", "--format", "json"])
                .arg("--state-dir")
                .arg(&state),
        )
    };
    let prog = prog.to_str().expect("path");
    let script = script.to_str().expect("path");
    assert_eq!(run(&["run", prog, "--mock-script", script]).0, 1);
    let id = run_ids(&state).remove(0);
    // Resumed, it fails again; then it succeeds: three records for the last request.
    assert_eq!(
        run(&["resume", &id, "--driver", "mock", "--mock-script", script]).0,
        1
    );
    let (code, out, err) = run(&["resume", &id, "--driver", "mock"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(outputs(&out), expected);
    let ids = journal_ids(&state, &id);
    let last = ids.last().expect("records").clone();
    assert_eq!(ids.iter().filter(|i| **i == last).count(), 3, "{ids:?}");
}

#[test]
fn links_planted_in_a_run_directory_are_refused_and_never_followed() {
    let dir = scratch("links");
    let prog = write_program(&dir);
    let (state, id) = crashed(&dir, &prog, 2);
    let run = run_dir(&state, &id);
    // The journal replaced by a link to a file elsewhere.
    let outside = dir.join("outside.log");
    std::fs::rename(run.join("journal.log"), &outside).expect("move");
    let before = std::fs::read(&outside).expect("outside");
    std::os::unix::fs::symlink(&outside, run.join("journal.log")).expect("link");
    let (code, _, err) = resume(&state, &id, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("journal.log is a symbolic link"), "{err}");
    assert_eq!(std::fs::read(&outside).expect("outside"), before);
    std::fs::remove_file(run.join("journal.log")).expect("unlink");
    std::fs::rename(&outside, run.join("journal.log")).expect("restore");
    // The bindings directory replaced by a link to a directory elsewhere.
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("elsewhere");
    let _ = std::fs::remove_dir_all(run.join("bindings"));
    std::os::unix::fs::symlink(&elsewhere, run.join("bindings")).expect("link");
    let (code, _, err) = resume(&state, &id, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("bindings is a symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(&elsewhere).expect("dir").count(), 0);
    // The run directory itself a link.
    std::fs::remove_file(run.join("bindings")).expect("unlink");
    let moved = dir.join("moved-run");
    std::fs::rename(&run, &moved).expect("move run");
    std::os::unix::fs::symlink(&moved, &run).expect("link");
    let (code, _, err) = resume(&state, &id, &[]);
    assert_eq!(code, 2);
    assert!(err.contains("is a symbolic link"), "{err}");
}

/// Everything under `dir`, relative to it.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("dir").flatten() {
            let p = e.path();
            out.push(
                p.strip_prefix(dir)
                    .expect("under")
                    .to_string_lossy()
                    .into_owned(),
            );
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn crafted_names_never_become_paths() {
    let dir = scratch("names");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).expect("work");
    let src = work.join("named.prose");
    std::fs::write(
        &src,
        "agent keeper:\n  persist: true\n  prompt: \"You keep notes\"\ninput topic: \"A topic\"\nlet note = session: keeper\n  prompt: \"Note {topic}\"\noutput result = note\n",
    )
    .expect("program");
    let (code, _, err) = output(
        support::prosevm()
            .args(["run", src.to_str().expect("path"), "--trace", "quiet"])
            .args(["--input", "topic=rain", "--state-dir"])
            .arg(work.join("state")),
    );
    assert_eq!(code, 0, "{err}");
    // The same program compiled, its names replaced by paths, framed again.
    let mut c = prosec::compile::Compilation::new(prosec::compile::Options::default());
    let root = c.add_file(&src).expect("source");
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("build");
    let (header, artifact) = bytecode_spec::artifact::read(&bytes).expect("read");
    let escapes = ["../../escape", "/tmp/prose-escape-abs", "a/../../b"];
    for (i, target) in escapes.iter().enumerate() {
        for name in ["keeper", "note", "result", "topic"] {
            let mut crafted = artifact.clone();
            for s in crafted.modules[0].strings.values_mut() {
                if s == name {
                    *s = target.to_string();
                }
            }
            let file = work.join(format!("crafted-{i}-{name}.pbc"));
            let framed = bytecode_spec::artifact::write(&crafted, &header).expect("frames");
            std::fs::write(&file, framed).expect("write");
            let (code, _, err) = output(
                vm().args(["exec", file.to_str().expect("path"), "--trace", "quiet"])
                    .args(["--input", &format!("{target}=x"), "--input", "topic=rain"])
                    .arg("--state-dir")
                    .arg(work.join("state")),
            );
            assert_eq!(code, 1, "{name} as {target}: {err}");
            assert!(err.contains("is not an identifier"), "{err}");
        }
    }
    // An input the program does not declare is refused before anything is written.
    let (code, _, err) = output(
        vm().args(["run", src.to_str().expect("path"), "--trace", "quiet"])
            .args(["--input", "topic=rain", "--input", "../../escape=x"])
            .arg("--state-dir")
            .arg(work.join("state")),
    );
    assert_eq!(code, 2);
    assert!(err.contains("E201"), "{err}");
    // A persist path climbing out of the project is refused the same way.
    let persist = work.join("persist.prose");
    std::fs::write(
        &persist,
        "agent keeper:\n  persist: \"../../outside\"\n  prompt: \"You keep notes\"\nsession: keeper\n  prompt: \"Note\"\n",
    )
    .expect("program");
    let (code, _, err) = output(
        vm().args(["run", persist.to_str().expect("path"), "--trace", "quiet"])
            .arg("--state-dir")
            .arg(work.join("state")),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("persist path"), "{err}");
    assert!(!Path::new("/tmp/prose-escape-abs.md").exists());
    assert!(!Path::new("/tmp/prose-escape-abs").exists());
    let everything = tree(&dir);
    assert!(
        everything
            .iter()
            .all(|p| p.starts_with("work/") || p == "work"),
        "{everything:?}"
    );
    assert!(
        !everything.iter().any(|p| p.contains("escape")),
        "{everything:?}"
    );
}

#[test]
fn inspecting_a_crashed_run_shows_its_views_rebuilt_from_the_journal() {
    let dir = scratch("rebuild");
    let prog = write_program(&dir);
    let (state, id) = crashed(&dir, &prog, 4);
    let run = run_dir(&state, &id);
    // As if the crash came before the views caught up.
    let _ = std::fs::remove_dir_all(run.join("bindings"));
    let _ = std::fs::remove_file(run.join("state.md"));
    let journaled = journal_ids(&state, &id).len();
    let before = (tree(&run), std::fs::read(run.join("lock")).expect("lock"));
    let (code, out, err) = output(
        vm().args(["inspect", &id, "--json", "--state-dir"])
            .arg(&state),
    );
    assert_eq!(code, 0, "{err}");
    // The views were rebuilt for display only: the reader wrote nothing, and did not take
    // the run (a holder writes its pid in the lock file).
    let after = (tree(&run), std::fs::read(run.join("lock")).expect("lock"));
    assert_eq!(after, before);
    let view: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(view["answered"], journaled);
    // `prev` holds the last answer the journal has, and state.md shows where the run stopped.
    let prev = view["bindings"]["prev"].as_str().expect("prev rebuilt");
    assert!(prev.starts_with("[mock] "), "{prev}");
    let state_md = view["state"].as_str().expect("state.md rebuilt");
    assert!(state_md.contains("## Call Stack"), "{state_md}");
    assert!(state_md.contains("waiting for 0:"), "{state_md}");
    // Nothing was asked of a driver and the run is still resumable.
    assert_eq!(journal_ids(&state, &id).len(), journaled);
    let (code, _, err) = resume(&state, &id, &[]);
    assert_eq!(code, 0, "{err}");
}
