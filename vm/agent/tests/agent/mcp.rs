//! MCP servers: one written here with rmcp and served over streamable HTTP on 127.0.0.1, and
//! the published `@modelcontextprotocol/server-filesystem` run over stdio (installed from
//! `vm/tests/mcp/package-lock.json` by `npm ci`; required under `CI=true`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use prose_agent::mcp::{McpError, McpHub};
use prose_agent::permissions::{Action, UserAllow};
use prose_agent::tools::Toolbox;
use prose_settings::{McpConfig, McpServerConfig};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler};
use serde_json::json;

use super::{call_with, err, ok, sandbox};
use crate::support::scratch;

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct NoteArgs {
    /// What to remember.
    text: String,
}

/// A small server: arithmetic, a failing tool, and a note it keeps.
#[derive(Clone)]
struct Calculator {
    tool_router: ToolRouter<Self>,
    notes: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

#[tool_router]
impl Calculator {
    fn new(notes: std::sync::Arc<std::sync::Mutex<Vec<String>>>) -> Self {
        Calculator {
            tool_router: Self::tool_router(),
            notes,
        }
    }

    #[tool(description = "Add two integers")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    #[tool(description = "Always fails")]
    fn explode(&self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text("the calculator exploded")])
    }

    #[tool(name = "note.keep", description = "Remember a note")]
    fn keep(&self, Parameters(NoteArgs { text }): Parameters<NoteArgs>) -> String {
        self.notes.lock().unwrap().push(text);
        "kept".into()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Calculator {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// Serves a [`Calculator`] on 127.0.0.1; returns its URL and the notes it keeps.
async fn serve_calculator() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let notes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let shared = notes.clone();
    let service = TowerToHyperService::new(StreamableHttpService::new(
        move || Ok(Calculator::new(shared.clone())),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default().with_sse_keep_alive(None),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = service.clone();
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}/mcp"), notes)
}

fn config(servers: &[(&str, McpServerConfig)]) -> McpConfig {
    McpConfig {
        servers: servers
            .iter()
            .map(|(n, c)| (n.to_string(), c.clone()))
            .collect::<BTreeMap<_, _>>(),
    }
}

#[tokio::test]
async fn tools_of_an_rmcp_server_are_offered_and_called() {
    let (url, notes) = serve_calculator().await;
    let dir = scratch("agent-mcp-http");
    let hub = McpHub::start(
        &config(&[(
            "calc",
            McpServerConfig {
                url: Some(url),
                ..Default::default()
            },
        )]),
        &dir,
    )
    .await
    .expect("starts");
    assert_eq!(hub.servers(), ["calc"]);
    let names: Vec<String> = hub
        .tools_of("calc")
        .unwrap()
        .iter()
        .map(|t| t.spec().name.clone())
        .collect();
    // In a fixed order (by the server's names), so that every request offers them in the
    // same bytes.
    assert_eq!(
        names,
        [
            "mcp__calc__add",
            "mcp__calc__explode",
            "mcp__calc__note_keep"
        ]
    );
    let mut toolbox = Toolbox::builtin();
    hub.add_tools(&mut toolbox).unwrap();
    assert!(hub.add_tools(&mut toolbox).is_err(), "names stay unique");
    let add = toolbox.get("mcp__calc__add").unwrap().spec().clone();
    assert_eq!(add.input_schema["type"], "object");
    assert!(add.input_schema["properties"]["a"].is_object());
    assert!(add.description.contains("Add two integers"));
    assert!(!toolbox.read_only("mcp__calc__add"));

    // A url server reaches the network by default: the agent needs `network`.
    let closed = sandbox(&dir, &[], UserAllow::default());
    let r = call_with(&toolbox, &closed, "mcp__calc__add", json!({"a": 2, "b": 3})).await;
    assert!(err(&r).contains("network is off by default"));
    assert_eq!(r.decisions[0].action, Action::Network);
    assert!(r.decisions[0].target.contains("MCP server `calc`"));

    let open = sandbox(&dir, &[("network", &["allow"])], UserAllow::default());
    let r = call_with(&toolbox, &open, "mcp__calc__add", json!({"a": 2, "b": 40})).await;
    assert_eq!(ok(&r), "42");
    let r = call_with(
        &toolbox,
        &open,
        "mcp__calc__note_keep",
        json!({"text": "hello"}),
    )
    .await;
    assert_eq!(ok(&r), "kept");
    assert_eq!(*notes.lock().unwrap(), ["hello"]);
    let r = call_with(&toolbox, &open, "mcp__calc__explode", json!({})).await;
    assert_eq!(err(&r), "the calculator exploded");
    let r = call_with(&toolbox, &open, "mcp__calc__add", json!({"a": "two"})).await;
    assert!(err(&r).contains("expected i64"), "{}", r.output.content);
    let r = call_with(&toolbox, &open, "mcp__calc__add", json!([1, 2])).await;
    assert!(err(&r).contains("must be a JSON object"));

    hub.stop().await;
    let r = call_with(&toolbox, &open, "mcp__calc__add", json!({"a": 1, "b": 1})).await;
    err(&r);
}

#[tokio::test]
async fn a_server_that_fails_to_start_is_named() {
    let dir = scratch("agent-mcp-fail");
    let e = McpHub::start(
        &config(&[(
            "broken",
            McpServerConfig {
                command: Some("sh".into()),
                args: vec!["-c".into(), "echo 'missing API token' >&2; exit 3".into()],
                ..Default::default()
            },
        )]),
        &dir,
    )
    .await
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("MCP server `broken` failed to start"),
        "{text}"
    );
    assert!(text.contains("missing API token"), "{text}");

    let e = McpHub::start(
        &config(&[(
            "ghost",
            McpServerConfig {
                command: Some("/no/such/mcp-server".into()),
                ..Default::default()
            },
        )]),
        &dir,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&e, McpError::Start { server, reason } if server == "ghost" && reason.contains("could not run `/no/such/mcp-server`")),
        "{e}"
    );

    let both = McpServerConfig {
        command: Some("x".into()),
        url: Some("http://127.0.0.1:1/mcp".into()),
        ..Default::default()
    };
    let e = McpHub::start(&config(&[("both", both)]), &dir)
        .await
        .unwrap_err();
    assert!(e
        .to_string()
        .contains("either `command` or `url`, not both"));
    let e = McpHub::start(&config(&[("none", McpServerConfig::default())]), &dir)
        .await
        .unwrap_err();
    assert!(matches!(e, McpError::Config { server, .. } if server == "none"));
    let e = McpHub::start(
        &config(&[(
            "bad name",
            McpServerConfig {
                url: Some("http://127.0.0.1:1/mcp".into()),
                ..Default::default()
            },
        )]),
        &dir,
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("may only have letters"));
}

/// The published filesystem server, if `npm ci` installed it.
fn filesystem_server() -> Option<PathBuf> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if script.is_file() {
        return Some(script);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{} is missing: CI must install it (`npm ci --prefix vm/tests/mcp`)",
            script.display()
        );
    }
    eprintln!(
        "SKIPPED: the published MCP server test needs `npm ci --prefix vm/tests/mcp` (missing {})",
        script.display()
    );
    None
}

#[tokio::test]
async fn the_published_filesystem_server_over_stdio() {
    let Some(script) = filesystem_server() else {
        return;
    };
    let dir = scratch("agent-mcp-filesystem");
    std::fs::write(dir.join("hello.txt"), "hello from prose\n").unwrap();
    let hub = McpHub::start(
        &config(&[(
            "fs",
            McpServerConfig {
                command: Some("node".into()),
                args: vec![script.to_string_lossy().into_owned(), ".".into()],
                ..Default::default()
            },
        )]),
        &dir,
    )
    .await
    .expect("the filesystem server starts");
    let mut toolbox = Toolbox::new();
    hub.add_tools(&mut toolbox).unwrap();
    let names: Vec<String> = toolbox.specs().into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"mcp__fs__list_directory".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"mcp__fs__write_file".to_string()),
        "{names:?}"
    );

    // A stdio server does not reach the network by default: no permission needed.
    let sb = sandbox(&dir, &[], UserAllow::default());
    let canonical = dir.canonicalize().unwrap();
    let r = call_with(
        &toolbox,
        &sb,
        "mcp__fs__list_directory",
        json!({"path": canonical.to_str().unwrap()}),
    )
    .await;
    assert!(ok(&r).contains("hello.txt"), "{}", r.output.content);
    assert!(r.decisions.is_empty());
    let r = call_with(
        &toolbox,
        &sb,
        "mcp__fs__write_file",
        json!({"path": canonical.join("made.txt").to_str().unwrap(), "content": "made by mcp"}),
    )
    .await;
    ok(&r);
    assert_eq!(
        std::fs::read_to_string(dir.join("made.txt")).unwrap(),
        "made by mcp"
    );
    let r = call_with(
        &toolbox,
        &sb,
        "mcp__fs__list_directory",
        json!({"path": "/"}),
    )
    .await;
    err(&r);
    hub.stop().await;
}
