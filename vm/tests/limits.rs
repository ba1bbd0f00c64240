//! Resource limits, with real processes: values that grow past the value size limit (text
//! doubling, lists sharing themselves, deep nesting, long templates) and a crafted artifact
//! whose branches declare the most registers a function may have each end the run with a
//! clear error naming the limit and the statement, the process exits normally, and the run
//! can be resumed with a larger limit.

use crate::support;
use support::prosevm as vm;
use support::{output, run_ids};

use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    support::scratch(&format!("limits-{name}"))
}

/// Runs `src` with `args`; returns the exit code, stdout and stderr.
fn run(dir: &Path, src: &str, args: &[&str]) -> (i32, String, String) {
    let prog = dir.join("prog.prose");
    std::fs::write(&prog, src).expect("program");
    output(
        vm().args(["run", prog.to_str().expect("path"), "--trace", "quiet"])
            .args(args)
            .arg("--state-dir")
            .arg(dir.join("state")),
    )
}

#[test]
fn a_doubling_text_stops_at_the_value_size_limit_and_resumes_with_a_larger_one() {
    let dir = scratch("doubling");
    let src = "let s = \"ab\"\nrepeat 20:\n  s = s + s\noutput size = \"doubled\"\n";
    let (code, _, err) = run(&dir, src, &["--max-value-size", "1M"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("[E213]"), "{err}");
    assert!(err.contains("prog.prose:3:"), "names the statement: {err}");
    assert!(err.contains("s = s + s"), "{err}");
    assert!(err.contains("larger than 1 MiB"), "names the limit: {err}");
    let state = dir.join("state");
    let id = run_ids(&state).remove(0);
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("runs").join(&id).join("run.json")).expect("record"),
    )
    .expect("json");
    assert_eq!(record["status"], "failed");
    assert_eq!(record["error"]["code"], "E213");
    let (code, out, err) = output(
        vm().args(["resume", &id, "--trace", "quiet", "--max-value-size", "4M"])
            .arg("--state-dir")
            .arg(&state),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "size: doubled\n");
}

/// A fan-out wider than `--max-branches` stops with E209 at its statement, naming the flag;
/// resumed with a higher limit, the run asks only what it had not (its first session was
/// answered) and finishes.
#[test]
fn a_fan_out_past_the_branch_limit_stops_and_resumes_with_a_higher_one() {
    let dir = scratch("branches");
    let src = "let first = session \"Pick six topics\"\nlet items = [1, 2, 3, 4, 5, 6]\nlet done = items | pmap:\n  session \"Work on {item}\"\noutput n = \"done\"\n";
    let (code, _, err) = run(&dir, src, &["--max-branches", "5"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("[E209]"), "{err}");
    assert!(err.contains("prog.prose:3:"), "names the statement: {err}");
    assert!(err.contains("more than 5 parallel branches"), "{err}");
    assert!(err.contains("--max-branches"), "names the flag: {err}");
    let state = dir.join("state");
    let id = run_ids(&state).remove(0);
    let (code, out, err) = output(
        vm().args(["resume", &id, "--trace", "json", "--max-branches", "6"])
            .arg("--state-dir")
            .arg(&state),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "n: done\n");
    // Six branches asked now; the first session came from the journal.
    let asked = err
        .lines()
        .filter(|l| l.contains("\"event\":\"session\"") && l.contains("Work on"))
        .count();
    assert_eq!(asked, 6, "{err}");
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("runs").join(&id).join("run.json")).expect("record"),
    )
    .expect("json");
    assert_eq!(
        record["options"]["max_branches"], 6,
        "the new limit is recorded"
    );
}

#[test]
fn values_that_grow_without_memory_are_bounded_too() {
    let cases = [
        // A list holding itself twice, 40 times over: small in memory, huge written out.
        (
            "let l = [\"x\"]\nrepeat 40:\n  l = [l, l]\n",
            "the list would be larger than 1 MiB",
        ),
        // A list appended to itself.
        (
            "let l = [\"x\"]\nrepeat 40:\n  l = l + [l]\n",
            "the list would be larger than 1 MiB",
        ),
        // Nesting deep enough to overflow a recursive walk.
        (
            "let l = []\nrepeat 100000:\n  l = [l]\n",
            "would nest lists and records more than 1000 deep",
        ),
        // Interpolation doubling a text.
        (
            "let s = \"ab\"\nrepeat 40:\n  s = \"{s}{s}\"\n",
            "the text would be larger than 1 MiB",
        ),
        // A record of records.
        (
            "let r = { a: 1 }\nrepeat 100000:\n  r = { a: r }\n",
            "would nest lists and records more than 1000 deep",
        ),
    ];
    for (i, (src, says)) in cases.iter().enumerate() {
        let dir = scratch(&format!("grow-{i}"));
        let (code, _, err) = run(&dir, src, &["--max-value-size", "1M"]);
        assert_eq!(code, 1, "case {i}: {err}");
        assert!(err.contains("[E213]"), "case {i}: {err}");
        assert!(err.contains(says), "case {i}: {err}");
        assert!(err.contains("prog.prose:3:"), "case {i}: {err}");
    }
}

#[test]
fn branches_declaring_the_most_registers_stop_before_allocating() {
    let dir = scratch("registers");
    let src = "let items = []\nrepeat 100000 as i:\n  items = items + [i]\nparallel for x in items:\n  session \"Work on {x}\"\n";
    let mut c = prosec::compile::Compilation::new(prosec::compile::Options::default());
    let root = c.add_source(Path::new("wide.prose"), src);
    assert_eq!(c.error_count(), 0, "{:?}", c.diagnostics);
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("build");
    let (header, mut artifact) = bytecode_spec::artifact::read(&bytes).expect("read");
    // The fan-out's body now declares the most registers the verifier allows.
    let m = &mut artifact.modules[0];
    let body = m
        .funcs
        .values_mut()
        .find(|f| f.kind == bytecode_spec::FuncKind::Branch)
        .expect("a branch function");
    body.nregs = bytecode_spec::verify::MAX_REGS;
    let framed = bytecode_spec::artifact::write(&artifact, &header).expect("frames");
    bytecode_spec::artifact::load(&framed).expect("the verifier accepts it");
    let file = dir.join("wide.pbc");
    std::fs::write(&file, framed).expect("write");
    let (code, _, err) = output(
        vm().args(["exec", file.to_str().expect("path"), "--trace", "quiet"])
            .arg("--state-dir")
            .arg(dir.join("state")),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("[E218]"), "{err}");
    assert!(err.contains("more than 512 MiB of registers"), "{err}");
    assert!(err.contains("wide.prose:4:"), "names the statement: {err}");
}

#[test]
fn sizes_are_read_with_their_units() {
    let dir = scratch("sizes");
    for bad in ["0", "12Q", "1.5M", "M"] {
        let (code, _, err) = run(&dir, "output a = 1\n", &["--max-value-size", bad]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("is not a size"), "{err}");
    }
    let src = "let s = \"ab\"\nrepeat 12:\n  s = s + s\n";
    for (limit, ok) in [("8K", true), ("8KiB", true), ("4095", false), ("1G", true)] {
        let (code, _, err) = run(&dir, src, &["--max-value-size", limit]);
        assert_eq!(code == 0, ok, "{limit}: {err}");
    }
}

/// A fan-out far wider than the runner's queue does not ask all its sessions at once: the
/// branches wait as fibers and ask theirs as the queue drains, so at most a few thousand
/// requests exist at a time (a million branches would otherwise hold a million requests).
/// Every branch is still asked exactly once and answered, in order of its index.
#[test]
fn a_wide_fan_out_asks_its_sessions_a_few_thousand_at_a_time() {
    let dir = scratch("ahead");
    let n = 12_000;
    let src = format!(
        "let items = []\nrepeat {n} as i:\n  items = items + [i]\nlet results = items | pmap:\n  session \"Work on {{item}}\"\noutput last = results[{}]\n",
        n - 1
    );
    let (code, out, err) = run(&dir, &src, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("[mock] Work on {}", n - 1)), "{out}");
    // The trace goes to stderr.
    let (code, _, trace) = output(
        vm().args(["run", dir.join("prog.prose").to_str().expect("path")])
            .args(["--trace", "json", "--state-dir"])
            .arg(dir.join("state")),
    );
    assert_eq!(code, 0, "{trace}");
    let (mut asked, mut answered, mut most) = (0usize, 0usize, 0usize);
    let mut ids = std::collections::BTreeSet::new();
    for line in trace.lines().filter(|l| l.starts_with('{')) {
        let e: serde_json::Value = serde_json::from_str(line).expect("event");
        match e["event"].as_str() {
            Some("session") => {
                asked += 1;
                assert!(ids.insert(e["id"].to_string()), "asked twice: {line}");
            }
            Some("answer") => answered += 1,
            _ => {}
        }
        most = most.max(asked - answered);
    }
    assert_eq!((asked, answered), (n, n));
    assert!(
        most <= 4_096 + 256,
        "{most} sessions asked and not answered at once"
    );
    assert!(most >= 256, "the queue is still used: {most}");
}
