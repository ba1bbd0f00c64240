//! A fake chat provider on 127.0.0.1 for the process-level tests: it answers each request
//! with the next canned response (both OpenAI's and Anthropic's shapes, as the test scripts
//! them) and records what it received.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A canned response: status, extra header lines, body, delay before answering.
pub struct Canned {
    /// The HTTP status.
    pub status: u16,
    /// Extra header lines, each ending in `\r\n`.
    pub headers: &'static str,
    /// The body.
    pub body: String,
    /// How long to wait before answering.
    pub delay: Duration,
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
    }
}

pub fn status(code: u16, headers: &'static str, body: &str) -> Canned {
    Canned {
        status: code,
        headers,
        body: body.to_string(),
        delay: Duration::ZERO,
    }
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

/// Like [`provider`], and `GET .../models` lists `models` (a 404 when there are none, as
/// from a server that does not list its models); those requests are neither logged nor
/// answered from `responses`.
pub fn provider_offering(
    responses: Vec<Canned>,
    models: &[&str],
) -> (String, Arc<Mutex<Vec<Seen>>>) {
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
            if get && path.ends_with("/models") {
                let (status, body) = if offers {
                    (200, listing.as_str())
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
            log.lock().expect("log").push(Seen {
                path,
                headers,
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            });
            let r = queue
                .next()
                .unwrap_or_else(|| status(500, "", "no more answers"));
            std::thread::sleep(r.delay);
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
    }
}
