//! Runs housekeeping through `prosevm runs`: the JSON listing, filters by status, and
//! `runs prune` by age and status, with a dry run, and never a run a process is running.

use crate::support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PROGRAM: &str = "output answer = session \"Answer the question\"\n";

fn vm(dir: &Path) -> Command {
    let mut cmd = support::prosevm();
    cmd.current_dir(dir).stdin(Stdio::null());
    cmd
}

fn setup(name: &str) -> PathBuf {
    let dir = support::scratch(&format!("runs-{name}"));
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    std::fs::write(
        dir.join("fail.json"),
        r#"[{"prompt": "Answer", "fail": "no answer today"}]"#,
    )
    .expect("script");
    dir
}

/// Runs the program to its end (with `extra` arguments); returns its exit code.
fn run(dir: &Path, extra: &[&str]) -> i32 {
    let (code, _, _) = support::output(
        vm(dir)
            .args([
                "run",
                "prog.prose",
                "--trace",
                "quiet",
                "--state-dir",
                "state",
            ])
            .args(extra),
    );
    code
}

fn listing(dir: &Path, extra: &[&str]) -> Vec<Value> {
    let (code, out, err) = support::output(
        vm(dir)
            .args(["runs", "--json", "--state-dir", "state"])
            .args(extra),
    );
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<Value>(&out)
        .expect("one JSON document")
        .as_array()
        .expect("an array")
        .clone()
}

fn ids(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| r["id"].as_str().map(String::from))
        .collect()
}

/// Sets the start time in a run's record.
fn started(dir: &Path, id: &str, when: &str) {
    let path = dir.join("state/runs").join(id).join("run.json");
    let mut record: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("record")).expect("json");
    record["started"] = when.into();
    std::fs::write(&path, record.to_string()).expect("write");
}

#[test]
fn runs_are_listed_as_json_and_filtered_by_status() {
    let dir = setup("list");
    assert_eq!(run(&dir, &[]), 0);
    assert_eq!(run(&dir, &["--mock-script", "fail.json"]), 1);
    let all = listing(&dir, &[]);
    assert_eq!(all.len(), 2, "{all:?}");
    for r in &all {
        assert_eq!(r["program"], "prog");
        assert_eq!(r["answered"], 1);
        assert_eq!(r["live"], false);
        assert!(Path::new(r["path"].as_str().expect("path"))
            .join("run.json")
            .is_file());
    }
    // Ids sort by start second, then at random: find the runs by status.
    let row = |status: &str| {
        all.iter()
            .find(|r| r["status"] == status)
            .unwrap_or_else(|| panic!("no {status} run: {all:?}"))
            .clone()
    };
    let (finished, failed) = (row("finished"), row("failed"));
    assert!(failed["error"]
        .as_str()
        .is_some_and(|e| e.contains("no answer today")));
    assert_eq!(
        listing(&dir, &["--status", "failed"]),
        std::slice::from_ref(&failed)
    );
    let both = listing(&dir, &["--status", "failed", "--status", "finished"]);
    assert_eq!(both.len(), 2);
    // The table filters the same way.
    let (code, out, _) =
        support::output(vm(&dir).args(["runs", "--state-dir", "state", "--status", "finished"]));
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 2, "{out}");
    let id = |r: &Value| r["id"].as_str().unwrap_or("?").to_string();
    assert!(
        out.contains(&id(&finished)) && !out.contains(&id(&failed)),
        "{out}"
    );
    let (code, _, err) =
        support::output(vm(&dir).args(["runs", "--state-dir", "state", "--status", "done"]));
    assert_eq!(code, 2);
    assert!(err.contains("unknown status"), "{err}");
}

#[test]
fn prune_removes_old_ended_runs_and_a_dry_run_removes_nothing() {
    let dir = setup("prune");
    assert_eq!(run(&dir, &[]), 0);
    assert_eq!(run(&dir, &[]), 0);
    assert_eq!(run(&dir, &["--mock-script", "fail.json"]), 1);
    // Ids sort by start second, then at random: find the runs by status.
    let rows = listing(&dir, &[]);
    let all = ids(&rows);
    let with = |status: &str| -> Vec<String> {
        rows.iter()
            .filter(|r| r["status"] == status)
            .filter_map(|r| r["id"].as_str().map(String::from))
            .collect()
    };
    let (finished, failed) = (with("finished"), with("failed"));
    let (old, new, old_failed) = (&finished[0], &finished[1], &failed[0]);
    started(&dir, old, "2020-01-01T00:00:00Z");
    started(&dir, old_failed, "2020-01-02T00:00:00Z");
    let prune = |extra: &[&str]| {
        support::output(
            vm(&dir)
                .args(["runs", "prune", "--state-dir", "state"])
                .args(extra),
        )
    };
    let (code, out, err) = prune(&["--older-than", "7d", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("would remove {old}")), "{out}");
    assert!(out.contains(&format!("would remove {old_failed}")), "{out}");
    assert!(!out.contains(new.as_str()), "{out}");
    assert_eq!(ids(&listing(&dir, &[])), all);
    // Only the old failed one, by status and age together.
    let (code, out, _) = prune(&["--older-than", "1w", "--status", "failed"]);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("removed {old_failed}")), "{out}");
    assert!(!dir.join("state/runs").join(old_failed).exists());
    let (code, _, _) = prune(&["--older-than", "7d"]);
    assert_eq!(code, 0);
    assert_eq!(ids(&listing(&dir, &[])), std::slice::from_ref(new));
    // Without saying which runs, nothing happens.
    let (code, _, err) = prune(&[]);
    assert_eq!(code, 2);
    assert!(err.contains("--older-than"), "{err}");
    let (code, _, err) = prune(&["--older-than", "a week"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a duration"), "{err}");
    assert_eq!(ids(&listing(&dir, &[])), std::slice::from_ref(new));
}

#[test]
fn a_run_being_run_is_never_pruned() {
    let dir = setup("live");
    let mut child = vm(&dir)
        .args([
            "run",
            "prog.prose",
            "--trace",
            "quiet",
            "--state-dir",
            "state",
        ])
        .args(["--mock-latency", "30000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    // Wait until the run exists and is held.
    let started = Instant::now();
    let live = loop {
        let rows = listing(&dir, &[]);
        if let Some(r) = rows.iter().find(|r| r["live"] == true) {
            break r["id"].as_str().expect("id").to_string();
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{rows:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let (code, out, err) = support::output(vm(&dir).args([
        "runs",
        "prune",
        "--state-dir",
        "state",
        "--status",
        "running",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "kept {live}: run {live} is being run by another process"
        )),
        "{out}"
    );
    assert!(dir
        .join("state/runs")
        .join(&live)
        .join("run.json")
        .is_file());
    // Killed, it is a run that stopped while running: prunable when asked for by status.
    let _ = child.kill();
    let _ = child.wait();
    let rows = listing(&dir, &[]);
    assert_eq!(
        (&rows[0]["status"], &rows[0]["live"]),
        (&"running".into(), &false.into())
    );
    let (code, out, _) = support::output(vm(&dir).args([
        "runs",
        "prune",
        "--state-dir",
        "state",
        "--status",
        "running",
    ]));
    assert_eq!(code, 0);
    assert!(out.contains(&format!("removed {live}")), "{out}");
    assert!(listing(&dir, &[]).is_empty());
}
