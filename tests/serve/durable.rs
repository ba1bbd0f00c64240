//! Runs outlive the server, in every store: killed with SIGKILL part way, or stopped with
//! SIGTERM, a run is taken up by the next server from its journal and ends with the outputs an uninterrupted
//! run gives, nothing its journal held asked again; its event stream goes on where the
//! client left it. A run cancelled through the API stays stopped until resumed.
//!
//! The runs are answered by a driver the test holds back ([`Gate`]): each is stopped or
//! killed part way because it cannot get further until the test lets it.

use super::gate::Gate;
use super::{built, events, reference_with, strs, support, Server, PROGRAM};
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;

/// What an uninterrupted run of `dir`'s program with the topic `tides` outputs, answered by
/// an open gate's driver.
fn want(dir: &Path) -> Value {
    reference_with(
        dir,
        &["topic=tides"],
        &Gate::opened(dir, "reference-gate").flags(),
    )
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
    let want = want(&dir);
    for kind in support::kinds("serve_kill", &dir) {
        let name = kind.name;
        let gate = Gate::new(&dir, &format!("gate-{name}"));
        let mut flags = vec!["--store".to_string(), kind.store.clone()];
        flags.extend(gate.flags());
        let server = Server::start(&dir, &strs(&flags));
        let sha = server.upload(&dir);
        let id = server.start_run(&sha, json!({"topic": "tides"}));
        // Killed once its journal holds two answers, the third request in flight.
        gate.let_through_next(0, 2);
        gate.wait_asked(3);
        server.wait_listed(&id, |r| r["answered"].as_u64().is_some_and(|n| n >= 2));
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
        gate.open();
        let run = server.wait_for(&id, |r| r["status"] == "finished");
        assert_eq!(run["outputs"], want, "{name}");
        assert!(
            server.said().contains(&format!("taking up run {id}")),
            "{name}: {}",
            server.said()
        );
        // Only the request in flight at the kill was asked twice: the third, asked again
        // first.
        let asked = gate.asked();
        let mut distinct = asked.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(
            asked.len() == 6 && distinct.len() == 5 && asked[2] == asked[3],
            "{name}: asked {asked:?}"
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
    let want = want(&dir);
    let gate = Gate::new(&dir, "gate");
    let server = Server::start(&dir, &strs(&gate.flags()));
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
    // Stopped with one answer journaled and its second request in flight. (The cancelled
    // run asks nothing more: an interrupted run's commands are killed.)
    let before = gate.asked().len();
    let id = server.start_run(&sha, json!({"topic": "tides"}));
    gate.let_through_next(before, 1);
    gate.wait_asked(before + 2);
    server.wait_listed(&id, |r| {
        r["answered"].as_u64().is_some_and(|n| n >= 1) && r["live"] == true
    });
    assert_eq!(server.signal(libc::SIGTERM), Some(0));
    assert_eq!(listed_status(&dir, "file:state", &id), "interrupted");

    gate.open();
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
    let want = want(&dir);
    // The gate holds the run's second request, and then the CLI's: the CLI is still at it
    // when it is killed.
    let gate = Gate::new(&dir, "gate");
    let server = Server::start(&dir, &strs(&gate.flags()));
    let sha = server.upload(&dir);
    let id = server.start_run(&sha, json!({"topic": "tides"}));
    gate.let_through_next(0, 1);
    gate.wait_asked(2);
    server.wait_for(&id, |r| r["status"] == "running");
    assert_eq!(server.signal(libc::SIGKILL), None);
    // Taken up by hand on the CLI, which is killed in turn once the next server has started.
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
    // Serving, it has looked at the runs left unfinished: this one it could not take.
    let server = Server::start(&dir, &[]);
    assert!(!server.said().contains("taking up"), "{}", server.said());
    let _ = cli.kill();
    let _ = cli.wait();
    gate.open();
    let run = server.wait_for(&id, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], want);
    assert!(
        server.said().contains(&format!("taking up run {id}")),
        "{}",
        server.said()
    );
}
