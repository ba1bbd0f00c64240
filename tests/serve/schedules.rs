//! Schedules: `POST /v1/schedules` starts runs on time, the schedules outlive a restart of
//! the server, and a schedule removed starts no more; bad ones are refused with the reason.

use super::{built, json, support, Server, PROGRAM};
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a test watches for runs a removed schedule must not start. Absence can only be
/// watched for a while; a schedule firing every second would start about three meanwhile.
const WATCHED: Duration = Duration::from_secs(3);

/// How many runs the store in `dir`'s `state/` holds, counted by `prosevm runs` while no
/// server runs (so none can be started meanwhile).
fn stored_runs(dir: &Path) -> usize {
    let (code, out, err) = support::output(support::command("prosevm").current_dir(dir).args([
        "runs",
        "--json",
        "--state-dir",
        "state",
    ]));
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<Vec<Value>>(&out)
        .expect("runs")
        .len()
}

/// The runs of the server, oldest first.
fn runs(server: &Server) -> Vec<Value> {
    let mut runs = server.get("/v1/runs?limit=500")["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    runs.reverse();
    runs
}

/// Waits (up to a minute) until the server lists at least `n` runs.
fn wait_for_runs(server: &Server, n: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let all = runs(server);
        if all.len() >= n {
            return all;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} runs, not {n}; the server said:\n{}",
            all.len(),
            server.said()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_schedule_starts_runs_on_time_outlives_a_restart_and_stops_when_removed() {
    let dir = built("serve-schedules", PROGRAM);
    let server = Server::start(&dir, &[]);
    let sha = server.upload(&dir);
    let r = server
        .request(Method::POST, "/v1/schedules")
        .json(&json!({"cron": "* * * * * *", "artifact": sha, "inputs": {"topic": "tides"}}))
        .send()
        .expect("POST");
    let made = json(r, 201);
    let id = made["id"].as_str().expect("id").to_string();
    assert_eq!(made["cron"], "* * * * * *");
    assert_eq!(
        server.get("/v1/schedules")["schedules"][0]["id"],
        id.as_str()
    );

    // Every second, a run of the artifact with the inputs.
    let first = wait_for_runs(&server, 2);
    for r in &first {
        let run = server.wait_for(r["id"].as_str().expect("id"), |r| r["status"] == "finished");
        assert_eq!(run["inputs"], json!({"topic": "tides"}));
        assert_eq!(run["artifact"], sha.as_str());
    }
    let schedule = server.get(&format!("/v1/schedules/{id}"));
    assert!(schedule["last_run"].is_string(), "{schedule}");

    // Kept through a restart: the next server goes on starting runs.
    assert_eq!(server.signal(libc::SIGTERM), Some(0));
    let stopped = stored_runs(&dir);
    let server = Server::start(&dir, &[]);
    assert_eq!(
        server.get("/v1/schedules")["schedules"][0]["id"],
        id.as_str()
    );
    wait_for_runs(&server, stopped + 2);
    // Removed, it starts no more: at most the one it may have been starting as it was
    // removed (already due) comes after.
    let r = server
        .request(Method::DELETE, &format!("/v1/schedules/{id}"))
        .send()
        .expect("DELETE");
    assert_eq!(r.status().as_u16(), 204);
    let after_delete = runs(&server).len();
    assert_eq!(server.get("/v1/schedules")["schedules"], json!([]));
    let r = server
        .request(Method::GET, &format!("/v1/schedules/{id}"))
        .send()
        .expect("GET");
    json(r, 404);
    std::thread::sleep(WATCHED);
    let later = runs(&server).len();
    assert!(
        later <= after_delete + 1,
        "the removed schedule went on starting runs: {after_delete} when removed, {later} {WATCHED:?} on"
    );
    // Nor after a restart: counted while no server runs, then watched with the next one.
    assert_eq!(server.signal(libc::SIGTERM), Some(0));
    let removed = stored_runs(&dir);
    let server = Server::start(&dir, &[]);
    assert_eq!(server.get("/v1/schedules")["schedules"], json!([]));
    std::thread::sleep(WATCHED);
    assert_eq!(
        runs(&server).len(),
        removed,
        "a removed schedule came back after a restart"
    );
}

#[test]
fn bad_schedules_are_refused_with_the_reason() {
    let dir = built("serve-schedules-bad", PROGRAM);
    let server = Server::start(&dir, &[]);
    let sha = server.upload(&dir);
    let post = |body: Value| {
        server
            .request(Method::POST, "/v1/schedules")
            .json(&body)
            .send()
            .expect("POST")
    };
    let e = json(
        post(json!({"cron": "61 * * * *", "artifact": sha, "inputs": {"topic": "x"}})),
        422,
    );
    assert!(
        e["error"]
            .as_str()
            .is_some_and(|e| e.contains("61 * * * *")),
        "{e}"
    );
    // Five fields or six, as documented: not a seventh (years), not `@daily`.
    for cron in ["0 0 9 * * 1-5 2030", "@daily", "* * * *"] {
        let e = json(
            post(json!({"cron": cron, "artifact": sha, "inputs": {"topic": "x"}})),
            422,
        );
        assert!(
            e["error"].as_str().is_some_and(|e| e.contains("field(s)")),
            "{cron}: {e}"
        );
    }
    let e = json(
        post(json!({"cron": "0 9 * * 1-5", "artifact": "ab".repeat(32)})),
        404,
    );
    assert!(
        e["error"]
            .as_str()
            .is_some_and(|e| e.contains("PUT /v1/artifacts")),
        "{e}"
    );
    let e = json(post(json!({"cron": "0 9 * * 1-5", "artifact": sha})), 422);
    assert!(
        e["error"].as_str().is_some_and(|e| e.contains("topic")),
        "{e}"
    );
    assert_eq!(server.get("/v1/schedules")["schedules"], json!([]));
}
