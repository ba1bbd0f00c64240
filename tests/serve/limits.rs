//! The server's limits: `--max-concurrency` holds over every run it drives (requests in
//! flight at once, counted as `exec` counts them within one run), and `--max-runs` runs are
//! driven at once while the others wait their turn.

use super::{built, Server};
use serde_json::json;
use std::time::{Duration, Instant};

/// Three sessions at once.
const FANOUT: &str = "parallel:
  a = session \"One\"
  b = session \"Two\"
  c = session \"Three\"
output r = session \"Join\"
  context: { a, b, c }
";

#[test]
fn requests_in_flight_are_limited_over_all_runs_and_runs_wait_their_turn() {
    let dir = built("serve-limits", FANOUT);
    // A driver command that notices company: it holds a directory while it answers.
    let lock = dir.join("in-flight");
    let overlaps = dir.join("overlaps");
    let served = dir.join("served");
    let command = format!(
        "mkdir {lock} 2>/dev/null || echo overlap >> {overlaps}; sleep 0.15; rmdir {lock} 2>/dev/null; echo \"$PROSE_REQUEST_ID\" >> {served}; echo answered",
        lock = lock.display(),
        overlaps = overlaps.display(),
        served = served.display(),
    );
    let server = Server::start(
        &dir,
        &[
            "--driver",
            "command",
            "--command",
            &command,
            "--max-concurrency",
            "1",
            "--max-runs",
            "2",
        ],
    );
    let sha = server.upload(&dir);
    let runs: Vec<String> = (0..2).map(|_| server.start_run(&sha, json!({}))).collect();
    for id in &runs {
        let run = server.wait_for(id, |r| r["status"] == "finished");
        assert_eq!(run["outputs"]["r"], "answered");
    }
    let lines = std::fs::read_to_string(&served).unwrap_or_default();
    assert_eq!(lines.lines().count(), 8, "{lines}");
    assert!(
        !overlaps.exists(),
        "two requests were in flight at once: {}",
        std::fs::read_to_string(&overlaps).unwrap_or_default()
    );
    drop(server);

    // One run at a time: the second answers nothing until the first has ended.
    let server = Server::start(
        &dir,
        &[
            "--driver",
            "command",
            "--command",
            &command,
            "--max-runs",
            "1",
        ],
    );
    let first = server.start_run(&sha, json!({}));
    let second = server.start_run(&sha, json!({}));
    let started = Instant::now();
    loop {
        let a = server.get(&format!("/v1/runs/{first}"));
        let b = server.get("/v1/runs")["runs"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["id"] == second.as_str()).cloned())
            .expect("the second run");
        if a["status"] == "finished" {
            break;
        }
        assert_eq!(
            b["answered"], 0,
            "the second run went ahead of its turn: {b}"
        );
        assert!(started.elapsed() < Duration::from_secs(60), "{a}");
        std::thread::sleep(Duration::from_millis(30));
    }
    server.wait_for(&second, |r| r["status"] == "finished");
}
