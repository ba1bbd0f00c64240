//! The library's workflows as MCP tools (`prosevm serve --mcp`), called by the official MCP
//! SDK's client (`@modelcontextprotocol/sdk` from npm, installed from
//! `vm/tests/mcp/package-lock.json` by `npm ci`; required under `CI=true`) through
//! `vm/tests/mcp/client.mjs`: it lists the tools, calls one and gets its outputs with its
//! progress, is told why a call with missing inputs is refused, and cancels a call whose run
//! the test holds, which stops the run. `/mcp` needs the token as `/v1` does, and answers
//! only with `--mcp`.

use super::{json, support, Server};
use reqwest::Method;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The token of the servers here.
const TOKEN: &str = "mcp-test-token-0123456789";

/// The directory of the SDK's client, if `npm ci` installed the SDK (and `node` runs it).
fn sdk_client() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vm/tests/mcp");
    let sdk = dir.join("node_modules/@modelcontextprotocol/sdk/package.json");
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if sdk.is_file() && node {
        return Some(dir);
    }
    let missing = format!(
        "the MCP SDK test needs node and `npm ci --prefix vm/tests/mcp` (node runs: {node}; {} exists: {})",
        sdk.display(),
        sdk.is_file()
    );
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{missing}: CI must install them"
    );
    eprintln!("SKIPPED: {missing}");
    None
}

/// Builds `name.prose` (holding `source`) in `dir`; returns the artifact's path.
fn build(dir: &Path, name: &str, source: &str) -> PathBuf {
    std::fs::write(dir.join(format!("{name}.prose")), source).expect("source");
    let out = dir.join(format!("{name}.pbc"));
    let (code, _, err) = support::output(support::command("prosec").current_dir(dir).args([
        "build",
        &format!("{name}.prose"),
        "-o",
        out.to_str().expect("path"),
    ]));
    assert_eq!(code, 0, "{err}");
    out
}

/// A driver answering each session with `re: ` and the first line of its task, holding any
/// whose task says HOLD until `dir`'s `release` exists.
fn driver(dir: &Path) -> Vec<String> {
    let release = dir.join("release");
    vec![
        "--driver".into(),
        "command".into(),
        "--command".into(),
        format!(
            "first=$(head -n 1); case \"$first\" in *HOLD*) while [ ! -e \"{}\" ]; do sleep 0.05; done;; esac; echo \"re: $first\"",
            release.display()
        ),
    ]
}

#[test]
fn an_mcp_client_lists_calls_and_cancels_workflows_with_the_official_sdk() {
    let Some(client) = sdk_client() else {
        return;
    };
    let dir = support::scratch("serve-mcp");
    let greet = build(
        &dir,
        "greet",
        "# Greets someone by name, in one sentence.\n#\n# (A test program.)\n\ninput name: \"Who to greet\"\n\noutput reply = session \"Greet {name}\"\n",
    );
    let hold = build(&dir, "hold", "output r = session \"HOLD until released\"\n");
    let mut flags = vec!["--mcp".to_string()];
    flags.extend(driver(&dir));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = Server::start_with(&dir, &flags, Some(TOKEN));
    server.upload_file(&greet);
    server.upload_file(&hold);

    let plan = json!({
        "call": {"name": "greet", "arguments": {"name": "Ada"}},
        "refused": {"name": "greet", "arguments": {}},
        "cancel": {"name": "hold", "arguments": {}},
    });
    let mut node = Command::new("node")
        .current_dir(&client)
        .arg("client.mjs")
        .arg(format!("{}/mcp", server.base))
        .arg(plan.to_string())
        .env("PROSE_TOKEN", TOKEN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let stdout = node.stdout.take().expect("stdout");
    let (line_tx, line_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = line_tx.send(line);
    });
    let line = line_rx
        .recv_timeout(Duration::from_secs(240))
        .unwrap_or_default();
    if line.trim().is_empty() {
        let _ = node.kill();
        let out = node.wait_with_output().expect("node's output");
        panic!(
            "the client said nothing: {}\nthe server said:\n{}",
            String::from_utf8_lossy(&out.stderr),
            server.said()
        );
    }
    let out: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));

    // Each artifact is a tool: described by its header comment and cost bound, its inputs
    // the schema of its arguments, its outputs the schema of its result.
    let tools = out["tools"].as_array().expect("tools");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tool {name}: {tools:?}"))
    };
    let g = tool("greet");
    let description = g["description"].as_str().expect("description");
    assert!(
        description.starts_with("Greets someone by name, in one sentence.\n"),
        "{description}"
    );
    assert!(
        description.contains("Cost bound per call: 1 session(s), 0 judgment(s), $"),
        "{description}"
    );
    assert_eq!(g["inputSchema"]["required"], json!(["name"]));
    assert_eq!(
        g["inputSchema"]["properties"]["name"]["description"],
        "Who to greet"
    );
    assert_eq!(g["outputSchema"]["required"], json!(["reply"]));
    assert!(tool("hold")["description"]
        .as_str()
        .is_some_and(|d| d.starts_with("The OpenProse program `hold`.")));

    // A call runs the workflow and answers with its outputs, after its progress.
    let result = &out["called"]["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structuredContent"],
        json!({"reply": "re: Greet Ada"})
    );
    let run = result["_meta"]["prosevm/run"].as_str().expect("the run");
    let record = server.get(&format!("/v1/runs/{run}"));
    assert_eq!(
        (&record["status"], &record["outputs"]),
        (&Value::from("finished"), &json!({"reply": "re: Greet Ada"}))
    );
    let progress = out["called"]["progress"].as_array().expect("progress");
    assert_eq!(
        progress.first().map(|p| &p["message"]),
        Some(&Value::from(format!("run {run} started")))
    );
    let last = progress.last().expect("progress");
    assert_eq!((&last["progress"], &last["total"]), (&json!(1), &json!(1)));
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("answered: Greet Ada")),
        "{last}"
    );

    // A call without the inputs a workflow needs is refused, saying which.
    let refused = &out["refused"];
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("name")),
        "{refused}"
    );

    // A cancelled call stops its run (held by the driver until then): it ends interrupted.
    let cancelled = out["cancelled"]["run"].as_str().expect("the run it named");
    assert!(
        out["cancelled"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("cancelled by the test")),
        "{out}"
    );
    let stopped = server.wait_for(cancelled, |r| {
        r["status"] == "interrupted" && r["live"] == false
    });
    assert_eq!(stopped["outputs"], Value::Null);
    std::fs::write(dir.join("release"), "").expect("release");
    // A session still open does not keep the server from stopping.
    assert_eq!(server.signal(libc::SIGTERM), Some(0));
    drop(node.stdin.take());
    let status = node.wait().expect("node ends");
    assert!(status.success(), "the client exited with {status}");
}

#[test]
fn mcp_needs_the_flag_and_the_token() {
    let dir = support::scratch("serve-mcp-guard");
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    });
    let post = |server: &Server, bearer: Option<&str>| {
        let r = super::client()
            .post(format!("{}/mcp", server.base))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        match bearer {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
        .send()
        .expect("POST")
    };
    let server = Server::start_with(&dir, &["--mcp"], Some(TOKEN));
    assert!(json(post(&server, None), 401)["error"]
        .as_str()
        .is_some_and(|e| e.contains("token")));
    assert_eq!(
        post(&server, Some("not the token at all"))
            .status()
            .as_u16(),
        401
    );
    let r = post(&server, Some(TOKEN));
    assert_eq!(r.status().as_u16(), 200, "{:?}", r.text());
    drop(server);
    // Without --mcp, `/mcp` says how to have it.
    let server = Server::start(&dir, &[]);
    let r = server
        .request(Method::POST, "/mcp")
        .json(&initialize)
        .send()
        .expect("POST");
    assert!(json(r, 404)["error"]
        .as_str()
        .is_some_and(|e| e.contains("--mcp")));
}
