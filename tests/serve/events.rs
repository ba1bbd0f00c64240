//! A run's event stream is its JSON trace: the same program run by `prosevm exec --trace
//! json` and by the server, against providers that stream the same answers, gives the same
//! events in the same order (their run ids, numbers and times apart), the pieces of each
//! streamed answer (`delta`) among them.

use super::provider::{streamed, streaming_provider, Canned};
use super::{built, events, support, Server};
use reqwest::Method;
use serde_json::{json, Value};

/// Sessions in a row, two of them in a loop.
const STEPS: &str = "input topic: \"what to write about\"
let a = session \"Step one about {topic}\"
for t in [\"x\", \"y\"]:
  session \"Note {t}\"
    context: a
output r = session \"Last step\"
  context: a
";

const KEY: &str = "sk-serve-events-1";

/// The answers, each streamed in pieces.
fn answers() -> Vec<Canned> {
    vec![
        streamed(&["Tides ", "rise ", "twice."], &[], (30, 3)),
        streamed(&["Note ", "x."], &[], (31, 2)),
        streamed(&["Note ", "y."], &[], (32, 2)),
        streamed(&["All ", "told."], &[], (33, 2)),
    ]
}

/// An event without what differs between two runs of one program: the run's id, the line's
/// number and time, and durations.
fn comparable(mut e: Value) -> Value {
    if let Some(o) = e.as_object_mut() {
        for key in ["run", "seq", "time", "ms", "first_token_ms"] {
            o.remove(key);
        }
    }
    e
}

#[test]
fn the_event_stream_is_the_json_trace_with_the_streamed_pieces() {
    let dir = built("serve-events", STEPS);
    let driver = |url: &str| {
        vec![
            "--driver".to_string(),
            "openai".into(),
            "--base-url".into(),
            url.to_string(),
            "--model".into(),
            "m".into(),
        ]
    };

    // The CLI's trace.
    let (url, _, _) = streaming_provider(answers());
    let mut cmd = support::command("prosevm");
    for var in ["OPENAI_BASE_URL", "OPENAI_MODEL"] {
        cmd.env_remove(var);
    }
    let (code, _, err) = support::output(
        cmd.current_dir(&dir)
            .env("OPENAI_API_KEY", KEY)
            .args([
                "exec",
                "prog.pbc",
                "--state-dir",
                "cli",
                "--input",
                "topic=tides",
            ])
            .args(["--trace", "json"])
            .args(driver(&url)),
    );
    assert_eq!(code, 0, "{err}");
    let traced: Vec<Value> = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();

    // The server's stream of the same program, against the same answers.
    let (url, seen, _) = streaming_provider(answers());
    let flags = driver(&url);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = Server::start_env(&dir, &flags, None, &[("OPENAI_API_KEY", KEY)]);
    let sha = server.upload(&dir);
    let id = server.start_run(&sha, json!({"topic": "tides"}));
    let r = server
        .request(Method::GET, &format!("/v1/runs/{id}/events"))
        .send()
        .expect("events");
    let streamed: Vec<Value> = events(r, |e| e.data["event"] == "end")
        .into_iter()
        .map(|e| e.data)
        .collect();
    assert_eq!(
        seen.lock().expect("seen").len(),
        4,
        "one request per session"
    );
    assert!(streamed.iter().all(|e| e["run"] == id.as_str()));

    let kinds = |events: &[Value]| -> Vec<String> {
        events
            .iter()
            .map(|e| e["event"].as_str().unwrap_or("?").to_string())
            .collect()
    };
    assert_eq!(kinds(&streamed), kinds(&traced));
    let strip = |events: Vec<Value>| -> Vec<Value> { events.into_iter().map(comparable).collect() };
    assert_eq!(strip(streamed.clone()), strip(traced));

    // The answers came in pieces, live (the first session's, as the turns of its agent
    // loop: `0:0#t0`).
    let pieces: Vec<&str> = streamed
        .iter()
        .filter(|e| {
            e["event"] == "delta" && e["id"].as_str().is_some_and(|id| id.starts_with("0:0#"))
        })
        .map(|e| e["text"].as_str().expect("text"))
        .collect();
    assert_eq!(pieces, ["Tides ", "rise ", "twice."]);
    let last = streamed.last().expect("events");
    assert_eq!(
        (&last["event"], &last["status"]),
        (&Value::from("end"), &Value::from("finished"))
    );
    let run = server.get(&format!("/v1/runs/{id}"));
    assert_eq!(run["outputs"]["r"], "All told.");
}
