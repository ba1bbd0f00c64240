//! OpenTelemetry export, end to end: `prosevm` with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at
//! a receiver on loopback that decodes the real OTLP/HTTP payloads (protobuf with the
//! OpenTelemetry protocol's own message types, JSON by its documented field names), with a
//! session that calls a tool through a fake OpenAI-compatible provider. The span tree, names,
//! parent links and GenAI attributes are checked for both encodings.

use crate::support;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use support::provider::{provider, status, streamed, tool_calls};

const PROGRAM: &str = r#"agent builder:
  model: sonnet
  prompt: "You build."
let notes = session: builder
  prompt: "Write the notes"
output summary = session "Summarise"
  context: notes
"#;

/// A loopback port bound for as long as this lives and never listened on: connections to it
/// are refused, and nothing else can take it meanwhile (as another test could take a free
/// port found by binding port 0 and let go).
struct RefusingPort {
    /// The socket bound to the port.
    _socket: std::os::fd::OwnedFd,
    /// The port.
    port: u16,
}

impl RefusingPort {
    /// Binds a TCP socket to a free loopback port, without listening.
    fn bind() -> RefusingPort {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        // SAFETY: socket(2) has no preconditions; the descriptor it returns is owned here
        // alone.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just created and nothing else owns it.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an all-zero sockaddr_in is a valid value of it.
        let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `addr` is a sockaddr_in of `len` bytes, alive for both calls, and `socket`
        // is an open socket.
        let bound = unsafe {
            let at = (&raw mut addr).cast::<libc::sockaddr>();
            libc::bind(socket.as_raw_fd(), at, len) == 0
                && libc::getsockname(socket.as_raw_fd(), at, &mut len) == 0
        };
        assert!(bound, "bind: {}", std::io::Error::last_os_error());
        RefusingPort {
            _socket: socket,
            port: u16::from_be(addr.sin_port),
        }
    }
}

/// A span as received: ids in hex, attributes as text.
#[derive(Clone, Debug)]
struct Got {
    trace: String,
    id: String,
    parent: String,
    name: String,
    attributes: HashMap<String, String>,
}

/// What a receiver collects, shared with its thread.
type Shared<T> = Arc<Mutex<Vec<T>>>;

/// An OTLP/HTTP receiver on loopback: every span of every export request it gets, and the
/// content types the requests came with.
fn receiver() -> (String, Shared<Got>, Shared<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let spans = Arc::new(Mutex::new(Vec::new()));
    let types = Arc::new(Mutex::new(Vec::new()));
    let (got, seen) = (spans.clone(), types.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let (mut length, mut kind) = (0, String::new());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.trim_end().split_once(':') {
                    match k.to_ascii_lowercase().as_str() {
                        "content-length" => length = v.trim().parse().unwrap_or(0),
                        "content-type" => kind = v.trim().to_string(),
                        _ => {}
                    }
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            assert!(
                request_line.starts_with("POST /v1/traces "),
                "{request_line}"
            );
            let decoded = if kind == "application/json" {
                from_json(&serde_json::from_slice(&body).expect("OTLP JSON"))
            } else {
                assert_eq!(kind, "application/x-protobuf");
                from_proto(
                    ExportTraceServiceRequest::decode(body.as_slice()).expect("OTLP protobuf"),
                )
            };
            got.lock().expect("spans").extend(decoded);
            seen.lock().expect("types").push(kind.clone());
            let reply = if kind == "application/json" { "{}" } else { "" };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (url, spans, types)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_proto(req: ExportTraceServiceRequest) -> Vec<Got> {
    let mut out = Vec::new();
    for rs in req.resource_spans {
        for ss in rs.scope_spans {
            for s in ss.spans {
                let attributes = s
                    .attributes
                    .iter()
                    .map(|kv| {
                        let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                            Some(Any::StringValue(t)) => t.clone(),
                            Some(Any::IntValue(i)) => i.to_string(),
                            Some(Any::BoolValue(b)) => b.to_string(),
                            Some(Any::DoubleValue(d)) => d.to_string(),
                            other => format!("{other:?}"),
                        };
                        (kv.key.clone(), v)
                    })
                    .collect();
                out.push(Got {
                    trace: hex(&s.trace_id),
                    id: hex(&s.span_id),
                    parent: hex(&s.parent_span_id),
                    name: s.name,
                    attributes,
                });
            }
        }
    }
    out
}

/// OTLP JSON: camelCase fields, ids in hex, 64-bit integers as strings or numbers.
fn from_json(req: &Value) -> Vec<Got> {
    let mut out = Vec::new();
    let list = |v: &Value, k: &str| v[k].as_array().cloned().unwrap_or_default();
    for rs in list(req, "resourceSpans") {
        for ss in list(&rs, "scopeSpans") {
            for s in list(&ss, "spans") {
                let attributes = list(&s, "attributes")
                    .iter()
                    .map(|kv| {
                        let v = &kv["value"];
                        let text = if let Some(t) = v["stringValue"].as_str() {
                            t.to_string()
                        } else if let Some(i) = v["intValue"].as_str() {
                            i.to_string()
                        } else if let Some(i) = v["intValue"].as_i64() {
                            i.to_string()
                        } else if let Some(d) = v["doubleValue"].as_f64() {
                            d.to_string()
                        } else {
                            v.to_string()
                        };
                        (kv["key"].as_str().unwrap_or_default().to_string(), text)
                    })
                    .collect();
                let text = |k: &str| s[k].as_str().unwrap_or_default().to_lowercase();
                out.push(Got {
                    trace: text("traceId"),
                    id: text("spanId"),
                    parent: text("parentSpanId"),
                    name: s["name"].as_str().unwrap_or_default().to_string(),
                    attributes,
                });
            }
        }
    }
    out
}

/// Runs the program with export on, in `protocol`; returns the spans received.
fn exported(name: &str, protocol: &str) -> (Vec<Got>, Vec<String>, std::path::PathBuf) {
    let dir = support::scratch(&format!("otel-{name}"));
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    let (model_url, _) = provider(vec![
        tool_calls(
            "Writing.",
            &[(
                "c1",
                "write_file",
                json!({"path": "notes.md", "content": "# Notes\n"}),
            )],
        ),
        // The second turn reads 8 of its 10 tokens from the provider's cache.
        status(
            200,
            "",
            &json!({"choices": [{"message": {"role": "assistant", "content": "Notes written."}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 3,
                          "prompt_tokens_details": {"cached_tokens": 8}}})
            .to_string(),
        ),
        // The summary's answer streams in two pieces: its time to the first token is kept.
        streamed(&["All ", "summarised."], &[], (12, 2)),
    ]);
    let (otlp, spans, types) = receiver();
    let mut cmd = support::prosevm();
    for var in [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
    ] {
        cmd.env_remove(var);
    }
    let (code, _, err) = support::output(
        cmd.current_dir(&dir)
            .stdin(Stdio::null())
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
            .env("OPENAI_API_KEY", "sk-test")
            .args([
                "run",
                "prog.prose",
                "--driver",
                "openai",
                "--model",
                "gpt-test",
            ])
            .args(["--base-url", &model_url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    let spans = spans.lock().expect("spans").clone();
    let types = types.lock().expect("types").clone();
    (spans, types, dir)
}

fn the_span_tree_is_right(spans: &[Got], dir: &Path) {
    let named = |prefix: &str| -> Vec<&Got> {
        spans
            .iter()
            .filter(|s| s.name.starts_with(prefix))
            .collect()
    };
    let runs = named("invoke_workflow");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    let run = runs[0];
    assert_eq!(run.name, "invoke_workflow prog");
    assert!(
        run.parent.is_empty() || run.parent.chars().all(|c| c == '0'),
        "{run:?}"
    );
    assert!(spans.iter().all(|s| s.trace == run.trace), "one trace");
    assert_eq!(run.attributes["gen_ai.operation.name"], "invoke_workflow");

    let agents = named("invoke_agent");
    assert_eq!(agents.len(), 2, "{spans:#?}");
    let builder = agents
        .iter()
        .find(|s| s.name == "invoke_agent builder")
        .expect("the builder's session");
    let summary = agents
        .iter()
        .find(|s| s.name == "invoke_agent session")
        .expect("the summary session");
    for (a, line) in [(builder, "4"), (summary, "6")] {
        assert_eq!(a.parent, run.id, "{a:?}");
        assert_eq!(a.attributes["gen_ai.operation.name"], "invoke_agent");
        assert_eq!(a.attributes["code.lineno"], line);
        let file = Path::new(&a.attributes["code.filepath"]);
        assert_eq!(
            std::fs::canonicalize(file).ok(),
            std::fs::canonicalize(dir.join("prog.prose")).ok(),
            "{a:?}"
        );
        assert_eq!(a.attributes["gen_ai.request.model"], "gpt-test");
    }
    assert_eq!(builder.attributes["gen_ai.agent.name"], "builder");
    // The builder's two turns cost 20 + 10 tokens in, 5 + 3 out.
    assert_eq!(builder.attributes["gen_ai.usage.input_tokens"], "30");
    assert_eq!(builder.attributes["gen_ai.usage.output_tokens"], "8");

    let chats = named("chat");
    assert_eq!(chats.len(), 3, "{spans:#?}");
    let under = |parent: &Got| chats.iter().filter(|c| c.parent == parent.id).count();
    assert_eq!((under(builder), under(summary)), (2, 1));
    for c in &chats {
        assert_eq!(c.name, "chat gpt-test");
        assert_eq!(c.attributes["gen_ai.operation.name"], "chat");
        assert_eq!(c.attributes["gen_ai.request.model"], "gpt-test");
        assert_eq!(c.attributes["gen_ai.provider.name"], "openai");
        assert!(
            c.attributes.contains_key("gen_ai.usage.input_tokens"),
            "{c:?}"
        );
    }
    let first = chats
        .iter()
        .find(|c| c.attributes["prose.request.id"] == "0:0#t0")
        .expect("the first turn");
    assert_eq!(first.attributes["gen_ai.usage.input_tokens"], "20");
    assert_eq!(first.attributes["gen_ai.usage.output_tokens"], "5");
    assert!(!first
        .attributes
        .contains_key("gen_ai.usage.cache_read.input_tokens"));
    // Input counts every token, those read from the provider's cache included; the cached
    // ones are also said apart.
    let second = chats
        .iter()
        .find(|c| c.attributes["prose.request.id"] == "0:0#t1")
        .expect("the second turn");
    assert_eq!(second.attributes["gen_ai.usage.input_tokens"], "10");
    assert_eq!(
        second.attributes["gen_ai.usage.cache_read.input_tokens"],
        "8"
    );
    assert_eq!(
        builder.attributes["gen_ai.usage.cache_read.input_tokens"],
        "8"
    );

    // The streamed answer's time to its first token, in seconds, on its chat span.
    let streamed_chat = chats
        .iter()
        .find(|c| c.parent == summary.id)
        .expect("the summary's turn");
    let ttft: f64 = streamed_chat.attributes["gen_ai.server.time_to_first_token"]
        .parse()
        .expect("a number of seconds");
    assert!((0.0..30.0).contains(&ttft), "{streamed_chat:?}");
    assert_eq!(streamed_chat.attributes["gen_ai.usage.input_tokens"], "12");

    let tools = named("execute_tool");
    assert_eq!(tools.len(), 1, "{spans:#?}");
    assert_eq!(tools[0].name, "execute_tool write_file");
    assert_eq!(tools[0].parent, builder.id);
    assert_eq!(tools[0].attributes["gen_ai.tool.name"], "write_file");
    assert_eq!(tools[0].attributes["gen_ai.operation.name"], "execute_tool");
    assert_eq!(spans.len(), 7, "{spans:#?}");
}

#[test]
fn spans_go_out_as_otlp_protobuf() {
    let (spans, types, dir) = exported("protobuf", "http/protobuf");
    assert!(
        types.iter().all(|t| t == "application/x-protobuf"),
        "{types:?}"
    );
    the_span_tree_is_right(&spans, &dir);
}

#[test]
fn spans_go_out_as_otlp_json() {
    let (spans, types, dir) = exported("json", "http/json");
    assert!(
        !types.is_empty() && types.iter().all(|t| t == "application/json"),
        "{types:?}"
    );
    the_span_tree_is_right(&spans, &dir);
}

#[test]
fn an_unsupported_protocol_is_a_clear_error() {
    let dir = support::scratch("otel-grpc");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    let (code, _, err) = support::output(
        support::prosevm()
            .current_dir(&dir)
            .stdin(Stdio::null())
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            .args(["run", "prog.prose", "--trace", "quiet"]),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("http/protobuf or http/json"), "{err}");
    // Refused before the run started: no run was left behind.
    assert!(!dir.join(".prose/runs").exists());
}

#[test]
fn spans_that_cannot_be_sent_are_a_warning_not_a_failure() {
    let dir = support::scratch("otel-down");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    // A port nobody listens on, held so for the whole test.
    let refusing = RefusingPort::bind();
    let port = refusing.port;
    let run = |trace: &str| {
        support::output(
            support::prosevm()
                .current_dir(&dir)
                .stdin(Stdio::null())
                .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
                .env(
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    format!("http://127.0.0.1:{port}"),
                )
                .args(["run", "prog.prose", "--trace", trace]),
        )
    };
    let (code, out, err) = run("quiet");
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("summary: "), "{out}");
    assert!(
        err.contains("prosevm: warning: OpenTelemetry export failed: ")
            && err.contains("span(s) not sent"),
        "{err}"
    );
    // In JSON, the warning is an event like the rest.
    let (code, _, err) = run("json");
    assert_eq!(code, 0, "{err}");
    let events: Vec<Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(events.iter().any(|e| e["event"] == "warning"
        && e["message"]
            .as_str()
            .is_some_and(|m| m.contains("OpenTelemetry"))));
    assert_eq!(events.last().map(|e| &e["event"]), Some(&"end".into()));
}
