//! A fake chat provider on 127.0.0.1 for the process-level tests: it answers each request
//! with the next canned response (both OpenAI's and Anthropic's shapes, as the test scripts
//! them) and records what it received.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a stream held after some events waits for the client to hang up.
const HANG_UP_WITHIN: Duration = Duration::from_secs(60);

/// A canned response: status, extra header lines, body, delay before answering.
#[derive(Clone)]
pub struct Canned {
    /// The HTTP status.
    pub status: u16,
    /// Extra header lines, each ending in `\r\n`.
    pub headers: &'static str,
    /// The body.
    pub body: String,
    /// How long to wait before answering.
    pub delay: Duration,
    /// A server-sent event stream to answer with instead of the body.
    pub stream: Option<Stream>,
}

/// A streamed answer: the events each API would send (each a complete `event:`/`data:`
/// block), written one at a time `gap` apart; with `hang`, the connection then stays open
/// without a word, as a stalled server's does.
#[derive(Clone)]
pub struct Stream {
    /// The events as OpenAI's chat completions send them.
    pub openai: Vec<String>,
    /// The events as Anthropic's messages API sends them.
    pub anthropic: Vec<String>,
    /// Time between events (and before the first).
    pub gap: Duration,
    /// Keep the connection open after the last event.
    pub hang: bool,
    /// After this many events, write no more until the client hangs up (or a minute has
    /// passed): how many events a client needed before hanging up is then known however
    /// slowly it reads (it is written at most that many), not raced against `gap`.
    pub until_hung_up: Option<usize>,
}

impl Canned {
    /// This streamed answer, written no further than `n` events until the client hangs up
    /// (see [`Stream::until_hung_up`]).
    pub fn held_after(mut self, n: usize) -> Canned {
        if let Some(s) = &mut self.stream {
            s.until_hung_up = Some(n);
        }
        self
    }
}

/// Whether the client of `stream` hangs up within `within` (reading, and dropping, anything
/// it sends meanwhile).
fn hangs_up(stream: &mut TcpStream, within: Duration) -> bool {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        let left = within.saturating_sub(started.elapsed());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

pub fn ok(content: &str) -> Canned {
    Canned {
        status: 200,
        headers: "",
        // Both APIs' shapes at once, so one fake serves either driver.
        body: json!({"choices": [{"message": {"role": "assistant", "content": content}}],
                     "content": [{"type": "text", "text": content}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 3,
                               "input_tokens": 10, "output_tokens": 3}})
        .to_string(),
        delay: Duration::ZERO,
        stream: None,
    }
}

pub fn status(code: u16, headers: &'static str, body: &str) -> Canned {
    Canned {
        status: code,
        headers,
        body: body.to_string(),
        delay: Duration::ZERO,
        stream: None,
    }
}

/// An OpenAI event: `data: {json}`.
fn openai_event(data: Value) -> String {
    format!("data: {data}\n\n")
}

/// An Anthropic event: its name and `data: {json}` with the same `type`.
fn anthropic_event(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap_or_default()
    )
}

/// A well-formed stream in both APIs' shapes: the text in `pieces`, then the tool calls
/// (`(id, name, arguments)`, each call's arguments sent in two parts), then the usage
/// (`input`, `output` tokens).
pub fn streamed(pieces: &[&str], calls: &[(&str, &str, Value)], usage: (u64, u64)) -> Canned {
    let (input, output) = usage;
    let mut openai = vec![openai_event(
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}),
    )];
    let mut anthropic = vec![anthropic_event(json!({"type": "message_start",
        "message": {"role": "assistant", "usage": {"input_tokens": input, "output_tokens": 1}}}))];
    anthropic.push(anthropic_event(
        json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}}),
    ));
    for p in pieces {
        openai.push(openai_event(
            json!({"choices": [{"index": 0, "delta": {"content": p}}]}),
        ));
        anthropic.push(anthropic_event(
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": p}}),
        ));
        anthropic.push(anthropic_event(json!({"type": "ping"})));
    }
    anthropic.push(anthropic_event(
        json!({"type": "content_block_stop", "index": 0}),
    ));
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let args = args.to_string();
        let (a, b) = args.split_at(args.len() / 2);
        openai.push(openai_event(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": a}}]}}]})));
        openai.push(openai_event(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": i, "function": {"arguments": b}}]}}]}),
        ));
        let block = i + 1;
        anthropic.push(anthropic_event(
            json!({"type": "content_block_start", "index": block,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        for part in [a, b] {
            anthropic.push(anthropic_event(
                json!({"type": "content_block_delta", "index": block,
                "delta": {"type": "input_json_delta", "partial_json": part}}),
            ));
        }
        anthropic.push(anthropic_event(
            json!({"type": "content_block_stop", "index": block}),
        ));
    }
    let (finish, stop) = if calls.is_empty() {
        ("stop", "end_turn")
    } else {
        ("tool_calls", "tool_use")
    };
    openai.push(openai_event(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
    ));
    openai.push(openai_event(json!({"choices": [],
        "usage": {"prompt_tokens": input, "completion_tokens": output}})));
    openai.push("data: [DONE]\n\n".into());
    anthropic.push(anthropic_event(json!({"type": "message_delta",
        "delta": {"stop_reason": stop}, "usage": {"output_tokens": output}})));
    anthropic.push(anthropic_event(json!({"type": "message_stop"})));
    stream(openai, anthropic, Duration::ZERO, false)
}

/// A canned stream of these events.
pub fn stream(openai: Vec<String>, anthropic: Vec<String>, gap: Duration, hang: bool) -> Canned {
    Canned {
        status: 200,
        headers: "",
        body: String::new(),
        delay: Duration::ZERO,
        stream: Some(Stream {
            openai,
            anthropic,
            gap,
            hang,
            until_hung_up: None,
        }),
    }
}

/// A model that falls into a loop: after `intro`, `sentence` over and over (`times`
/// events, `gap` apart), never finishing.
pub fn runaway(intro: &str, sentence: &str, times: usize, gap: Duration) -> Canned {
    let mut openai = vec![openai_event(
        json!({"choices": [{"index": 0, "delta": {"content": intro}}]}),
    )];
    let mut anthropic = vec![
        anthropic_event(
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}),
        ),
        anthropic_event(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": intro}}),
        ),
    ];
    for _ in 0..times {
        openai.push(openai_event(
            json!({"choices": [{"index": 0, "delta": {"content": sentence}}]}),
        ));
        anthropic.push(anthropic_event(
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": sentence}}),
        ));
    }
    stream(openai, anthropic, gap, true)
}

/// One request the provider received: its path, header lines (lowercased names) and JSON
/// body.
#[derive(Debug)]
pub struct Seen {
    /// The request path.
    pub path: String,
    /// Header lines, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The JSON body (null if it is not JSON).
    pub body: Value,
}

/// Serves `responses` in order (then 500s) on a loopback port; returns its base URL and what
/// it receives. A 500 body containing `{auth}` echoes the request's authorization header.
pub fn provider(responses: Vec<Canned>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    provider_offering(responses, &[])
}

/// What the provider received, shared with the test.
pub type SeenLog = Arc<Mutex<Vec<Seen>>>;

/// Like [`provider`], and also how many events of each streamed answer were written before
/// the client hung up (or all of them), in the order the streams ended.
pub fn streaming_provider(responses: Vec<Canned>) -> (String, SeenLog, Arc<Mutex<Vec<usize>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let (url, seen) = serve(responses, &[], sent.clone(), false);
    (url, seen, sent)
}

/// Like [`provider`], and it answers `GET /props` beside `/v1` as llama.cpp's server does
/// (its chat template and slots), so that a driver takes it for one that decodes under a
/// JSON schema.
pub fn llama_provider(responses: Vec<Canned>) -> (String, SeenLog) {
    serve(responses, &[], Arc::new(Mutex::new(Vec::new())), true)
}

/// Like [`provider`], and `GET .../models` lists `models` (a 404 when there are none, as
/// from a server that does not list its models); GET requests are neither logged nor
/// answered from `responses`.
pub fn provider_offering(
    responses: Vec<Canned>,
    models: &[&str],
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    serve(responses, models, Arc::new(Mutex::new(Vec::new())), false)
}

fn serve(
    responses: Vec<Canned>,
    models: &[&str],
    sent: Arc<Mutex<Vec<usize>>>,
    llama: bool,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let props = json!({"chat_template": "{{ messages }}", "total_slots": 1}).to_string();
    let listing = json!({"object": "list", "data": models.iter().map(|m| json!({"id": m})).collect::<Vec<_>>()}).to_string();
    let offers = !models.is_empty();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        let mut queue = responses.into_iter();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_string();
            let get = request_line.starts_with("GET ");
            let mut headers = Vec::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.trim_end().split_once(':') {
                    let (k, v) = (k.to_lowercase(), v.trim().to_string());
                    if k == "content-length" {
                        length = v.parse().unwrap_or(0);
                    }
                    headers.push((k, v));
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            if get {
                // `GET .../models` lists the models offered; any other GET (a probe such as
                // llama.cpp's `/props`) finds nothing, as at a hosted API.
                let (status, body) = if offers && path.ends_with("/models") {
                    (200, listing.as_str())
                } else if llama && path == "/props" {
                    (200, props.as_str())
                } else {
                    (404, "{}")
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                continue;
            }
            let auth = headers
                .iter()
                .find(|(k, _)| k == "authorization" || k == "x-api-key")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let anthropic = path.ends_with("/messages");
            log.lock().expect("log").push(Seen {
                path,
                headers,
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            });
            let r = queue
                .next()
                .unwrap_or_else(|| status(500, "", "no more answers"));
            std::thread::sleep(r.delay);
            if let Some(st) = r.stream {
                let events = if anthropic { st.anthropic } else { st.openai };
                let sent = sent.clone();
                // Each stream on a thread of its own: a hung connection holds no one up.
                std::thread::spawn(move || {
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
                    if stream.write_all(head.as_bytes()).is_err() {
                        return;
                    }
                    let mut n = 0;
                    for e in events {
                        if st.until_hung_up == Some(n) && hangs_up(&mut stream, HANG_UP_WITHIN) {
                            break;
                        }
                        std::thread::sleep(st.gap);
                        if stream
                            .write_all(e.as_bytes())
                            .and_then(|()| stream.flush())
                            .is_err()
                        {
                            break;
                        }
                        n += 1;
                    }
                    sent.lock().expect("sent").push(n);
                    if st.hang {
                        std::thread::sleep(Duration::from_secs(300));
                    }
                });
                continue;
            }
            let body = r.body.replace("{auth}", &auth);
            let _ = write!(
                stream,
                "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n{}",
                r.status,
                body.len(),
                r.headers,
                body
            );
        }
    });
    (url, seen)
}

/// A turn that calls tools, in both APIs' shapes: each call is `(id, name, arguments)`.
pub fn tool_calls(text: &str, calls: &[(&str, &str, Value)]) -> Canned {
    let openai: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    let mut blocks = vec![json!({"type": "text", "text": text})];
    blocks.extend(calls.iter().map(
        |(id, name, args)| json!({"type": "tool_use", "id": id, "name": name, "input": args}),
    ));
    Canned {
        status: 200,
        headers: "",
        body: json!({
            "choices": [{"finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": text, "tool_calls": openai}}],
            "content": blocks,
            "stop_reason": "tool_use",
            "usage": {"prompt_tokens": 20, "completion_tokens": 5,
                      "input_tokens": 20, "output_tokens": 5}
        })
        .to_string(),
        delay: Duration::ZERO,
        stream: None,
    }
}
