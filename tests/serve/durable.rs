//! Runs outlive the server, in every store: killed with SIGKILL part way, or stopped with
//! SIGTERM, a run is taken up by the next server from its journal and ends with the outputs an uninterrupted
//! run gives, nothing its journal held asked again; its event stream goes on where the
//! client left it. A run cancelled through the API stays stopped until resumed.

use super::{built, events, reference, support, Server, PROGRAM};
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;

/// The request ids the mock served, from its log: how many in all, and how many distinct.
fn served(log: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut ids: Vec<&str> = text.lines().collect();
    let all = ids.len();
    ids.sort_unstable();
    ids.dedup();
    (all, ids.len())
}

/// The status `prosevm runs` gives run `id` in `store` (no server running).
fn listed_status(dir: &Path, store: &str, id: &str) -> Value {
    let (code, out, err) = support::output(support::command("prosevm").current_dir(dir).args([
        "runs",
        "--json",
        "--state-dir",
        "state",
        "--store",
        store,
    ]));
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = serde_json::from_str(&out).expect("runs");
    rows.into_iter()
        .find(|r| r["id"] == id)
        .map(|r| r["status"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn a_server_killed_mid_run_finishes_it_at_its_next_start_with_the_same_outputs_in_every_store() {
    let dir = built("serve-kill", PROGRAM);
    let want = reference(&dir, &["topic=tides"]);
    for kind in support::kinds("serve_kill", &dir) {
        let name = kind.name;
        let log = dir.join(format!("served-{name}.log"));
        let log_arg = log.display().to_string();
        let server = Server::start(
            &dir,
            &[
                "--store",
                &kind.store,
                "--mock-latency",
                "300",
                "--mock-log",
                &log_arg,
            ],
        );
        let sha = server.upload(&dir);
        let id = server.start_run(&sha, json!({"topic": "tides"}));
        // Killed once its journal holds two answers.
        let started = std::time::Instant::now();
        loop {
            let page = server.get("/v1/runs");
            if page["runs"][0]["answered"].as_u64().is_some_and(|n| n >= 2) {
                break;
            }
            assert!(started.elapsed().as_secs() < 60, "{name}: {page}");
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        let seen = {
            let r = server
                .request(Method::GET, &format!("/v1/runs/{id}/events"))
                .send()
                .expect("events");
            events(r, |e| e.data["event"] == "binding" && e.data["name"] == "b")
        };
        assert_eq!(server.signal(libc::SIGKILL), None, "killed by the signal");
        assert_eq!(listed_status(&dir, &kind.store, &id), "running", "{name}");

        let server = Server::start(&dir, &["--store", &kind.store]);
        // A lease outlives its holder for a while; here it runs out now.
        support::expire_leases(&kind);
        let run = server.wait_for(&id, |r| r["status"] == "finished");
        assert_eq!(run["outputs"], want, "{name}");
        assert!(
            server.said().contains(&format!("taking up run {id}")),
            "{name}: {}",
            server.said()
        );
        // Only the request in flight at the kill was asked twice.
        let (all, distinct) = served(&log);
        assert_eq!(
            distinct,
            5,
            "{name}: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        assert!(
            all - distinct <= 1,
            "{name}: {all} served for {distinct} requests"
        );
        // The stream goes on after the last event the client had, through the restart.
        let last = seen.last().and_then(|e| e.id.clone()).expect("an id");
        let r = server
            .request(Method::GET, &format!("/v1/runs/{id}/events"))
            .header("Last-Event-ID", last.as_str())
            .send()
            .expect("events");
        let rest = events(r, |e| e.data["event"] == "end");
        let next: usize = last.parse::<usize>().expect("number") + 1;
        assert_eq!(
            rest[0].id.as_deref(),
            Some(next.to_string().as_str()),
            "{name}"
        );
        // The new drive starts over from the program's start (replaying its journal) and ends.
        assert!(
            rest.iter().any(|e| e.data["event"] == "program_start"),
            "{name}: {rest:?}"
        );
        assert_eq!(
            rest.last().map(|e| &e.data["status"]),
            Some(&Value::from("finished")),
            "{name}"
        );
    }
}

#[test]
fn sigterm_stops_runs_for_the_next_start_and_a_cancelled_run_stays_stopped() {
    let dir = built("serve-term", PROGRAM);
    let want = reference(&dir, &["topic=tides"]);
    let server = Server::start(&dir, &["--mock-latency", "300"]);
    let sha = server.upload(&dir);
    let cancelled = server.start_run(&sha, json!({"topic": "tides"}));
    let r = server
        .request(Method::POST, &format!("/v1/runs/{cancelled}/cancel"))
        .send()
        .expect("cancel");
    assert_eq!(r.status().as_u16(), 202);
    server.wait_for(&cancelled, |r| {
        r["status"] == "interrupted" && r["live"] == false
    });
    let id = server.start_run(&sha, json!({"topic": "tides"}));
    server.wait_for(&id, |r| r["live"] == true);
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(server.signal(libc::SIGTERM), Some(0));
    assert_eq!(listed_status(&dir, "file:state", &id), "interrupted");

    let server = Server::start(&dir, &[]);
    let run = server.wait_for(&id, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], want);
    // The cancelled run was not taken up; resuming it through the API finishes it.
    assert_eq!(
        server.get(&format!("/v1/runs/{cancelled}"))["status"],
        "interrupted"
    );
    let r = server
        .request(Method::POST, &format!("/v1/runs/{cancelled}/resume"))
        .send()
        .expect("resume");
    assert_eq!(r.status().as_u16(), 202);
    let run = server.wait_for(&cancelled, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], want);
}

#[test]
fn a_run_another_process_holds_at_start_is_taken_up_once_let_go() {
    let dir = built("serve-held", PROGRAM);
    let want = reference(&dir, &["topic=tides"]);
    // Slow enough that the CLI is still at it when it is killed.
    let server = Server::start(&dir, &["--mock-latency", "1000"]);
    let sha = server.upload(&dir);
    let id = server.start_run(&sha, json!({"topic": "tides"}));
    server.wait_for(&id, |r| r["status"] == "running");
    assert_eq!(server.signal(libc::SIGKILL), None);
    // Taken up by hand on the CLI, which is killed in turn while the next server starts.
    let mut cli = support::command("prosevm")
        .current_dir(&dir)
        .args(["resume", &id, "--state-dir", "state", "--trace", "quiet"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("resume");
    let started = std::time::Instant::now();
    loop {
        let (_, out, _) = support::output(support::command("prosevm").current_dir(&dir).args([
            "runs",
            "--json",
            "--state-dir",
            "state",
        ]));
        if out.contains("\"live\":true") {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "the CLI never held the run: {out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    let server = Server::start(&dir, &[]);
    assert!(!server.said().contains("taking up"), "{}", server.said());
    let _ = cli.kill();
    let _ = cli.wait();
    let run = server.wait_for(&id, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], want);
    assert!(
        server.said().contains(&format!("taking up run {id}")),
        "{}",
        server.said()
    );
}
