//! Approvals under the server: a tool call its agent's permissions say `prompt` for (a server
//! asks no one) stops the run `waiting` with nothing of the call run, listed with what it
//! waits for by `GET /v1/runs?status=waiting`; the wait outlives a SIGKILL of the server; an
//! approval over HTTP lets the run go on from that call, which runs exactly once, the model
//! asked nothing again; a denial is told to the model as a person's "no"; a time limit makes
//! the server refuse the call itself and go on; the page's buttons answer both ways, in a
//! real Chromium; and a workflow called as an MCP tool (`--mcp`) whose call waits answers
//! with the approval to give, and its run goes on once it is given.
//!
//! The model is the mock driver with a script (kept with each run), `--mock-log` naming
//! every request it was asked.

use super::browser::{chromium, Browser};
use super::{built, support, Server};
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;

/// One agent whose shell commands a person must allow; the job is an input, so that runs of
/// one server ask apart.
const PROGRAM: &str = "input job: \"which job\"
agent builder:
  permissions:
    bash: prompt
output r = session: builder
  prompt: \"Do {job}\"
";

/// `dir` built with [`PROGRAM`] and a script in which job `j` calls `bash` once with
/// `echo j >> effects.log` for each of `jobs`, then answers plainly.
fn setup(name: &str, jobs: &[&str]) -> std::path::PathBuf {
    let dir = built(name, PROGRAM);
    let script: Vec<Value> = jobs
        .iter()
        .map(|j| {
            json!({"kind": "turn", "prompt": format!("Do {j}"), "times": 1, "reply": {"tool_calls": [
                {"name": "bash", "arguments": {"command": format!("echo {j} >> effects.log")}}
            ]}})
        })
        .collect();
    std::fs::write(dir.join("script.json"), Value::Array(script).to_string()).expect("script");
    dir
}

/// The server's flags: the script, and the log of what the model is asked.
const FLAGS: [&str; 4] = ["--mock-script", "script.json", "--mock-log", "asked.log"];

/// Starts a run of job `job` on `server` and waits until it waits; returns its id and its
/// approval's, checked to describe the call.
fn waiting_run(server: &Server, dir: &Path, job: &str) -> (String, String) {
    let sha = server.upload(dir);
    let id = server.start_run(&sha, json!({"job": job}));
    let run = server.wait_for(&id, |r| r["status"] == "waiting");
    assert_eq!(run["live"], false);
    assert_eq!(run["waiting"], json!([]));
    let approvals = run["approvals"].as_array().expect("approvals");
    assert_eq!(approvals.len(), 1, "{run}");
    let a = &approvals[0];
    let command = format!("echo {job} >> effects.log");
    assert_eq!(
        (
            &a["call"],
            &a["agent"],
            &a["tool"],
            &a["capability"],
            &a["detail"],
            &a["arguments"],
            &a["prompt"]
        ),
        (
            &json!("0:0#t0c0"),
            &json!("builder"),
            &json!("bash"),
            &json!("bash"),
            &json!(command),
            &json!({"command": command}),
            &json!(format!("Do {job}"))
        ),
        "{a}"
    );
    assert!(a["asked"].is_string(), "{a}");
    (id, a["id"].as_str().expect("approval id").to_string())
}

/// `POST /v1/runs/{id}/approvals/{approval}` with `body`: its status and body.
fn decide(server: &Server, id: &str, approval: &str, body: Value) -> (u16, Value) {
    let r = server
        .request(Method::POST, &format!("/v1/runs/{id}/approvals/{approval}"))
        .json(&body)
        .send()
        .expect("POST");
    let status = r.status().as_u16();
    let text = r.text().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
    )
}

/// What the commands wrote, if anything.
fn effects(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("effects.log")).ok()
}

/// How many times request `request` of any run was asked of the model.
fn asked(dir: &Path, request: &str) -> usize {
    std::fs::read_to_string(dir.join("asked.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == request)
        .count()
}

/// The output of tool call `0:0#t0c0` of run `id` in the server's store, as the model read
/// it (read through the CLI while the server runs: readers take nothing).
fn tool_output(dir: &Path, id: &str) -> (String, bool) {
    let (code, out, err) = support::output(support::command("prosevm").current_dir(dir).args([
        "inspect",
        id,
        "--session",
        "0:0",
        "--json",
        "--state-dir",
        "state",
    ]));
    assert_eq!(code, 0, "{err}");
    let view: Value = serde_json::from_str(&out).expect("inspect");
    let step = view["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == "0:0#t0c0"))
        .unwrap_or_else(|| panic!("no output of the call: {view}"));
    (
        step["answer"]["content"]
            .as_str()
            .unwrap_or_default()
            .into(),
        step["answer"]["is_error"].as_bool().unwrap_or(false),
    )
}

#[test]
fn a_waiting_call_outlives_a_killed_server_and_runs_once_after_an_approval_over_http() {
    let dir = setup("serve-approve", &["alpha"]);
    let server = Server::start(&dir, &FLAGS);
    let (id, approval) = waiting_run(&server, &dir, "alpha");
    // Listed with what it waits for.
    let listed = server.get("/v1/runs?status=waiting");
    let runs = listed["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{listed}");
    assert_eq!(
        (&runs[0]["id"], &runs[0]["approvals"][0]["id"]),
        (&json!(id), &json!(approval)),
        "{listed}"
    );
    // Its stream says what it waits for, and ends with the status.
    let r = server
        .request(Method::GET, &format!("/v1/runs/{id}/events"))
        .send()
        .expect("events");
    let all = super::events(r, |e| e.data["event"] == "end");
    let waits = all
        .iter()
        .find(|e| e.data["event"] == "approval")
        .expect("an approval event");
    assert_eq!(
        (&waits.data["approval"], &waits.data["tool"]),
        (&json!(approval), &json!("bash"))
    );
    assert_eq!(
        all.last().map(|e| &e.data["status"]),
        Some(&json!("waiting"))
    );

    // Killed while it waits: the next server finds it waiting still, nothing of it run.
    assert_eq!(server.signal(libc::SIGKILL), None);
    let server = Server::start(&dir, &FLAGS);
    let run = server.get(&format!("/v1/runs/{id}"));
    assert_eq!(
        (&run["status"], &run["approvals"][0]["id"]),
        (&json!("waiting"), &json!(approval))
    );
    assert_eq!(effects(&dir), None, "nothing of the call ran");

    // Only a well-formed answer to an approval it waits for is taken.
    let (status, body) = decide(&server, &id, "not-an-id", json!({"approve": true}));
    assert_eq!(status, 400, "{body}");
    let (status, body) = decide(&server, &id, "000000000000", json!({"approve": true}));
    assert_eq!(status, 404, "{body}");
    let (status, body) = decide(
        &server,
        &id,
        &approval,
        json!({"approve": false, "always": true}),
    );
    assert_eq!(status, 400, "{body}");
    let (status, body) = decide(
        &server,
        &id,
        &approval,
        json!({"approve": true, "driver": "openai"}),
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(effects(&dir), None);

    let (status, body) = decide(&server, &id, &approval, json!({"approve": true}));
    assert_eq!(
        (status, &body["state"]),
        (202, &json!("resuming")),
        "{body}"
    );
    let run = server.wait_for(&id, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], json!({"r": "[mock] Do alpha"}));
    assert_eq!(run["approvals"], json!([]));
    assert_eq!(
        effects(&dir).as_deref(),
        Some("alpha\n"),
        "ran exactly once"
    );
    let (text, is_error) = tool_output(&dir, &id);
    assert!(!is_error && text.contains("exit status 0"), "{text}");
    assert_eq!(
        asked(&dir, "0:0#t0"),
        1,
        "the model was asked its turn again"
    );
    // Answered, it waits for nothing.
    let (status, body) = decide(&server, &id, &approval, json!({"approve": true}));
    assert_eq!(status, 409, "{body}");
    assert_eq!(effects(&dir).as_deref(), Some("alpha\n"));
}

#[test]
fn a_denial_over_http_is_told_to_the_model_as_a_persons_no() {
    let dir = setup("serve-deny", &["beta"]);
    let server = Server::start(&dir, &FLAGS);
    let (id, approval) = waiting_run(&server, &dir, "beta");
    let (status, body) = decide(&server, &id, &approval, json!({"approve": false}));
    assert_eq!(
        (status, &body["state"]),
        (202, &json!("resuming")),
        "{body}"
    );
    server.wait_for(&id, |r| r["status"] == "finished");
    assert_eq!(effects(&dir), None, "a denied call runs nothing");
    let (text, is_error) = tool_output(&dir, &id);
    assert!(
        is_error && text.contains("`bash: prompt`, and a person said no"),
        "{text}"
    );
    assert_eq!(asked(&dir, "0:0#t0"), 1);
}

#[test]
fn the_server_refuses_a_call_whose_approval_ran_out_of_time_and_goes_on() {
    let dir = setup("serve-lapse", &["gamma"]);
    let mut flags = FLAGS.to_vec();
    flags.extend(["--approval-timeout", "1"]);
    let server = Server::start(&dir, &flags);
    let sha = server.upload(&dir);
    let id = server.start_run(&sha, json!({"job": "gamma"}));
    let run = server.wait_for(&id, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], json!({"r": "[mock] Do gamma"}));
    assert_eq!(effects(&dir), None, "a lapsed call runs nothing");
    let (text, is_error) = tool_output(&dir, &id);
    assert!(
        is_error && text.contains("`bash: prompt`, and no one answered within 1.0s"),
        "{text}"
    );
    // It waited, with a deadline, then the server took it up itself.
    let r = server
        .request(Method::GET, &format!("/v1/runs/{id}/events"))
        .send()
        .expect("events");
    let all = super::events(r, |_| false);
    let waited = all
        .iter()
        .find(|e| e.data["event"] == "approval")
        .expect("an approval event");
    assert!(waited.data["expires"].is_string(), "{:?}", waited.data);
    let ends: Vec<&Value> = all
        .iter()
        .filter(|e| e.data["event"] == "end")
        .map(|e| &e.data["status"])
        .collect();
    assert_eq!(ends, [&json!("waiting"), &json!("finished")]);
    assert!(
        server.said().contains(&format!("taking up run {id}")),
        "{}",
        server.said()
    );
}

#[test]
fn the_pages_buttons_approve_one_call_and_deny_another() {
    let Some(chromium) = chromium() else { return };
    let dir = setup("serve-approve-page", &["delta", "epsilon"]);
    let server = Server::start(&dir, &FLAGS);
    let (allowed, _) = waiting_run(&server, &dir, "delta");
    let (denied, _) = waiting_run(&server, &dir, "epsilon");
    let mut b = Browser::start(&chromium, &dir.join("profile"));
    b.open(&format!("{}/#/runs/{allowed}", server.base));
    b.wait_until(
        "document.getElementById('approvals') !== null && document.body.dataset.view === 'run'",
        "document.readyState",
    );
    const SHOWN: &str = "JSON.stringify([document.getElementById('run-status').dataset.status, document.getElementById('approvals').hidden, document.querySelectorAll('#approval-list li').length])";
    b.wait_until(
        "!document.getElementById('approvals').hidden && document.querySelectorAll('#approval-list li button').length === 3",
        SHOWN,
    );
    let shown = b.eval("document.getElementById('approval-list').textContent");
    let shown = shown.as_str().expect("text");
    for want in ["builder", "echo delta >> effects.log", "Do delta"] {
        assert!(shown.contains(want), "{want} is not shown: {shown}");
    }
    b.eval("document.querySelector('#approval-list button[data-answer=approve]').click(); true");
    b.wait_until(
        "document.getElementById('run-status').dataset.status === 'finished' && document.getElementById('approvals').hidden",
        SHOWN,
    );
    assert_eq!(effects(&dir).as_deref(), Some("delta\n"));

    b.eval(&format!("location.hash = '#/runs/{denied}'; true"));
    b.wait_until(
        &format!("document.getElementById('run-title').textContent === 'run {denied}' && !document.getElementById('approvals').hidden && document.querySelectorAll('#approval-list li').length === 1"),
        SHOWN,
    );
    b.eval("document.querySelector('#approval-list button[data-answer=deny]').click(); true");
    b.wait_until(
        "document.getElementById('run-status').dataset.status === 'finished'",
        SHOWN,
    );
    assert_eq!(
        server.get(&format!("/v1/runs/{denied}"))["status"],
        "finished"
    );
    assert_eq!(
        effects(&dir).as_deref(),
        Some("delta\n"),
        "the denied call ran"
    );
    let (text, _) = tool_output(&dir, &denied);
    assert!(text.contains("a person said no"), "{text}");
    assert!(
        b.complaints.is_empty(),
        "the console said: {:#?}",
        b.complaints
    );
}

/// JSON-RPC message `message` posted to `server`'s `/mcp` in MCP session `session` (none
/// for `initialize`): the session's id and the answer with id `id`, read from the
/// server-sent events (or the JSON) it answers with, if it answers one.
fn mcp(server: &Server, session: Option<&str>, message: Value) -> (String, Option<Value>) {
    let mut r = server
        .request(Method::POST, "/mcp")
        .header("accept", "application/json, text/event-stream")
        .json(&message);
    if let Some(s) = session {
        r = r
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let r = r.send().expect("POST /mcp");
    let status = r.status().as_u16();
    let session = r
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .or(session)
        .unwrap_or_default()
        .to_string();
    let body = r.text().expect("body");
    assert!((200..300).contains(&status), "{status}: {body}");
    let answer = body
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m.get("id").is_some() && m["id"] == message["id"]);
    (session, answer)
}

#[test]
fn an_mcp_call_whose_tool_call_waits_names_the_approval_and_the_run_goes_on_once_approved() {
    let dir = setup("serve-approve-mcp", &["zeta"]);
    let mut flags = FLAGS.to_vec();
    flags.push("--mcp");
    let server = Server::start(&dir, &flags);
    server.upload(&dir);
    let (session, init) = mcp(
        &server,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
    );
    assert!(init.is_some_and(|i| i["result"]["serverInfo"]["name"] == "prosevm"));
    mcp(
        &server,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let (_, called) = mcp(
        &server,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "prog", "arguments": {"job": "zeta"}}}),
    );
    let result = &called.expect("the call's answer")["result"];
    assert_eq!(result["isError"], true, "{result}");
    let id = result["_meta"]["prosevm/run"].as_str().expect("its run");
    let run = server.get(&format!("/v1/runs/{id}"));
    assert_eq!(run["status"], "waiting", "{run}");
    let approval = run["approvals"][0]["id"].as_str().expect("approval");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    for want in [
        format!("run {id} waits for a person"),
        format!("approval {approval}: agent `builder` wants to run `echo zeta >> effects.log`"),
        format!("POST /v1/runs/{id}/approvals/{{approval}}"),
    ] {
        assert!(text.contains(&want), "{want:?} is not in {text:?}");
    }
    assert_eq!(effects(&dir), None, "nothing of the call ran");
    let (status, body) = decide(&server, id, approval, json!({"approve": true}));
    assert_eq!(status, 202, "{body}");
    let run = server.wait_for(id, |r| r["status"] == "finished");
    assert_eq!(run["outputs"], json!({"r": "[mock] Do zeta"}));
    assert_eq!(effects(&dir).as_deref(), Some("zeta\n"));
}
