//! People in the loop: a mid-program input no one can give makes a run wait (status
//! `waiting`, its question said, durable through a crash of the server); an answer through
//! the API, or `prosevm answer` on the store, lets it go on to its outputs.

use super::{built, events, json, support, Server};
use reqwest::Method;
use serde_json::{json, Value};

/// A session, then an input no one gave, then a session using it.
const ASKS: &str = "let draft = session \"Draft a note\"
input audience: \"Who reads it\"
output r = session \"Rewrite for {audience}\"
  context: draft
";

/// Starts a run of `dir`'s program on `server` and waits until it waits.
fn waiting_run(server: &Server, dir: &std::path::Path) -> String {
    let sha = server.upload(dir);
    let id = server.start_run(&sha, json!({}));
    let run = server.wait_for(&id, |r| r["status"] == "waiting");
    assert_eq!(
        run["waiting"],
        json!([{"name": "audience", "question": "Who reads it"}])
    );
    assert_eq!(run["live"], false);
    id
}

#[test]
fn a_run_waits_for_an_input_and_an_answer_through_the_api_finishes_it() {
    let dir = built("serve-waiting", ASKS);
    let server = Server::start(&dir, &[]);
    let id = waiting_run(&server, &dir);
    // Its stream says what it waits for, and ends with the status.
    let r = server
        .request(Method::GET, &format!("/v1/runs/{id}/events"))
        .send()
        .expect("events");
    let all = events(r, |e| e.data["event"] == "end");
    let waiting = all
        .iter()
        .find(|e| e.data["event"] == "waiting")
        .expect("a waiting event");
    assert_eq!(
        (&waiting.data["name"], &waiting.data["question"]),
        (&Value::from("audience"), &Value::from("Who reads it"))
    );
    assert_eq!(
        all.last().map(|e| &e.data["status"]),
        Some(&Value::from("waiting"))
    );
    // Only what it waits for is taken.
    let r = server
        .request(Method::POST, &format!("/v1/runs/{id}/input"))
        .json(&json!({"name": "tone", "value": "dry"}))
        .send()
        .expect("POST");
    assert!(json(r, 422)["error"]
        .as_str()
        .is_some_and(|e| e.contains("`audience`")));
    // An answer is a name and a value, nothing more.
    let r = server
        .request(Method::POST, &format!("/v1/runs/{id}/input"))
        .json(&json!({"name": "audience", "value": "sailors", "driver": "openai"}))
        .send()
        .expect("POST");
    assert!(json(r, 422)["error"]
        .as_str()
        .is_some_and(|e| e.contains("unknown field `driver`")));
    assert_eq!(server.get(&format!("/v1/runs/{id}"))["status"], "waiting");
    let r = server
        .request(Method::POST, &format!("/v1/runs/{id}/input"))
        .json(&json!({"name": "audience", "value": "sailors"}))
        .send()
        .expect("POST");
    assert_eq!(json(r, 202)["state"], "resuming");
    let run = server.wait_for(&id, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], json!({"r": "[mock] Rewrite for sailors"}));
    assert_eq!(run["waiting"], json!([]));
    // Answered, it waits for nothing.
    let r = server
        .request(Method::POST, &format!("/v1/runs/{id}/input"))
        .json(&json!({"name": "audience", "value": "pilots"}))
        .send()
        .expect("POST");
    json(r, 409);
}

#[test]
fn a_waiting_run_outlives_the_server_and_an_answer_on_the_cli_lets_it_go_on() {
    let dir = built("serve-waiting-cli", ASKS);
    let log = dir.join("served.log");
    let log_arg = log.display().to_string();
    let server = Server::start(&dir, &["--mock-log", &log_arg]);
    let id = waiting_run(&server, &dir);
    // Killed while the run waits: the next server finds it waiting still.
    assert_eq!(server.signal(libc::SIGKILL), None);
    let server = Server::start(&dir, &[]);
    assert_eq!(server.get(&format!("/v1/runs/{id}"))["status"], "waiting");
    // Answered on the CLI, through the store; the server sees it and takes the run up.
    let (code, _, err) = support::output(support::command("prosevm").current_dir(&dir).args([
        "answer",
        &id,
        "audience=pilots",
        "--state-dir",
        "state",
    ]));
    assert_eq!(code, 0, "{err}");
    let run = server.wait_for(&id, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], json!({"r": "[mock] Rewrite for pilots"}));
    // The draft was asked once, before the wait: nothing answered was asked again.
    let served = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        served.lines().filter(|l| *l == "0:0").count(),
        1,
        "{served}"
    );

    // Answered while no server runs: the next one takes it up at its start.
    let second = waiting_run(&server, &dir);
    drop(server);
    let (code, _, err) = support::output(support::command("prosevm").current_dir(&dir).args([
        "answer",
        &second,
        "audience=divers",
        "--state-dir",
        "state",
    ]));
    assert_eq!(code, 0, "{err}");
    let server = Server::start(&dir, &[]);
    let run = server.wait_for(&second, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], json!({"r": "[mock] Rewrite for divers"}));
}
