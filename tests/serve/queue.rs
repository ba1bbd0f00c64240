//! `prosevm serve --worker` over a Postgres store: it works the store's queue like `prosevm
//! worker`, following the runs it claims like its own (their events stream, their outputs
//! come back), and on SIGTERM queues them again for the next worker. Under `CI=true` the
//! Postgres server is required; elsewhere the test is skipped where none can be started.

use super::gate::Gate;
use super::{built, events, reference, reference_with, support, Server, PROGRAM};
use reqwest::Method;
use serde_json::Value;
use std::path::Path;

/// Submits a run of `dir`'s artifact to the queue at `url`, answered by the driver `driver`
/// flags choose; returns its id.
fn submit(dir: &Path, url: &str, driver: &[String]) -> String {
    let (code, out, err) = support::output(
        support::command("prosevm")
            .current_dir(dir)
            .args([
                "submit",
                "prog.pbc",
                "--store",
                url,
                "--input",
                "topic=tides",
            ])
            .args(driver),
    );
    assert_eq!(code, 0, "{err}");
    out.trim().to_string()
}

/// The status `prosevm runs` lists for run `id` of the store at `url`.
fn listed(dir: &Path, url: &str, id: &str) -> Value {
    let (code, out, err) = support::output(
        support::command("prosevm")
            .current_dir(dir)
            .args(["runs", "--json", "--store", url]),
    );
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = serde_json::from_str(&out).expect("runs");
    rows.into_iter()
        .find(|r| r["id"] == id)
        .map(|r| r["status"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn a_server_working_the_queue_follows_what_it_claims_and_queues_it_again_when_stopped() {
    let dir = built("serve-queue", PROGRAM);
    let Some(url) = support::pg::database("serve_queue") else {
        return;
    };
    let want = reference(&dir, &["topic=tides"]);
    let server = Server::start(&dir, &["--store", &url, "--worker"]);
    let id = submit(&dir, &url, &["--mock-latency".into(), "100".into()]);
    // Claimed and followed: its events stream from the first to the end.
    server.wait_for(&id, |r| r["live"] == true || r["status"] == "finished");
    let r = server
        .request(Method::GET, &format!("/v1/runs/{id}/events"))
        .send()
        .expect("events");
    let all = events(r, |e| e.data["event"] == "end");
    assert_eq!(all[0].data["event"], "program_start", "{all:?}");
    assert_eq!(
        all.last().map(|e| &e.data["status"]),
        Some(&Value::from("finished"))
    );
    let run = server.wait_for(&id, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], want);
    assert!(
        server
            .said()
            .contains(&format!("claimed run {id} from the queue")),
        "{}",
        server.said()
    );

    // A run of the queue is not cancelled here (stopped, it would be queued again)...
    // Held back by the gate, it is still going when the server stops.
    let gate = Gate::new(&dir, "gate");
    let slow = submit(&dir, &url, &gate.flags());
    gate.wait_asked(1);
    server.wait_for(&slow, |r| r["live"] == true);
    let r = server
        .request(Method::POST, &format!("/v1/runs/{slow}/cancel"))
        .send()
        .expect("cancel");
    assert_eq!(r.status().as_u16(), 409);
    // ...but a stopped server queues it again, and the next one finishes it.
    assert_eq!(server.signal(libc::SIGTERM), Some(0));
    assert_eq!(listed(&dir, &url, &slow), "queued");
    gate.open();
    let server = Server::start(&dir, &["--store", &url, "--worker"]);
    let run = server.wait_for(&slow, |r| r["status"] == "finished");
    let want = reference_with(
        &dir,
        &["topic=tides"],
        &Gate::opened(&dir, "reference-gate").flags(),
    );
    assert_eq!(run["outputs"], want);
    // Without a Postgres store there is no queue to work.
    drop(server);
    let (code, _, err) = support::output(support::command("prosevm").current_dir(&dir).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--worker",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("Postgres"), "{err}");
}
