//! A fake chat provider on 127.0.0.1 that bills prompt caching as the real APIs do, for the
//! tests of caching and of the memo. It speaks both APIs (OpenAI's chat completions at
//! `/v1/chat/completions`, Anthropic's messages at `/v1/messages`), streams its answers,
//! counts tokens at four bytes each, and reports usage the way each provider does:
//!
//! - **Anthropic**: a prefix is cached only where the request marks it (`cache_control`,
//!   at most four marks, `ephemeral` with a `ttl` of `5m` or `1h`; anything else is refused
//!   with a 400 as the API refuses it), in the order tools, system, messages, and only when
//!   it is at least 1,024 tokens long (4,096 for Haiku). A request reads the longest cached
//!   prefix ending at a block boundary up to 20 blocks before one of its marks, and writes
//!   the prefixes of the marks after that. `input_tokens` counts what was neither read nor
//!   written; `cache_read_input_tokens` and `cache_creation_input_tokens` the rest.
//! - **OpenAI**: every prompt of 1,024 tokens or more is cached by itself (the tools, then
//!   the messages); a later prompt sharing a prefix with an earlier one reads it, in steps
//!   of 128 tokens from 1,024, reported as `prompt_tokens_details.cached_tokens` within
//!   `prompt_tokens`.
//!
//! With caching off (`Fake::new(.., false)`) nothing is ever read or written: the same run
//! billed as a provider without a cache would bill it. What it answers is the test's
//! [`Answerer`]: by default, a line naming the task it was given.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the fake says to a request.
#[derive(Clone, Debug)]
pub enum Say {
    /// This text.
    Text(String),
    /// These tool calls: `(name, arguments)`.
    Calls(Vec<(String, Value)>),
}

/// Decides the answer to a request: its body, and how many requests came before it.
pub type Answerer = Box<dyn Fn(&Value, usize) -> Say + Send>;

/// One request the fake answered: its body, and the usage it reported (in the API's own
/// fields), or the error it refused it with.
#[derive(Clone, Debug)]
pub struct Billed {
    /// The request's JSON body.
    pub body: Value,
    /// The usage reported.
    pub usage: Value,
    /// Why the request was refused, if it was.
    pub refused: Option<String>,
}

/// A fake provider serving on loopback.
pub struct Fake {
    /// Its base URL, ending in `/v1` (the `openai` driver's form; the `anthropic` driver
    /// takes it without).
    pub url: String,
    /// What it answered, in order.
    pub log: Arc<Mutex<Vec<Billed>>>,
}

impl Fake {
    /// Serves on a free loopback port, caching prompts when `caching`, answering each
    /// request with `answer`'s reply.
    pub fn new(answer: Answerer, caching: bool) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let billed = log.clone();
        std::thread::spawn(move || {
            let mut cache = Cache::default();
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { break };
                let Some((method, path, body)) = read_request(&mut stream) else {
                    continue;
                };
                if method != "POST" {
                    // `GET .../models`: this provider does not list its models.
                    let _ = write!(
                        stream,
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
                    );
                    continue;
                }
                let n = billed.lock().expect("log").len();
                let anthropic = path.ends_with("/messages");
                let bill = if anthropic {
                    cache.anthropic(&body, caching)
                } else {
                    Ok(cache.openai(&body, caching))
                };
                match bill {
                    Err(why) => {
                        let error = json!({"type": "error", "error":
                            {"type": "invalid_request_error", "message": why}})
                        .to_string();
                        let _ = write!(
                            stream,
                            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{error}",
                            error.len()
                        );
                        billed.lock().expect("log").push(Billed {
                            body,
                            usage: Value::Null,
                            refused: Some(why),
                        });
                    }
                    Ok(input) => {
                        let say = answer(&body, n);
                        let (events, usage) = if anthropic {
                            anthropic_stream(&say, &input)
                        } else {
                            openai_stream(&say, &input)
                        };
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
                        );
                        let _ = stream.write_all(events.as_bytes());
                        let _ = stream.flush();
                        billed.lock().expect("log").push(Billed {
                            body,
                            usage,
                            refused: None,
                        });
                    }
                }
            }
        });
        Fake { url, log }
    }

    /// The base URL as the `anthropic` driver takes it.
    pub fn anthropic_url(&self) -> String {
        self.url.trim_end_matches("/v1").to_string()
    }

    /// What it answered so far.
    pub fn billed(&self) -> Vec<Billed> {
        self.log.lock().expect("log").clone()
    }
}

/// The default answerer: a line naming the first line of the request's last user text, so
/// that an answer changes exactly when its task does.
pub fn echo() -> Answerer {
    Box::new(|body, _| Say::Text(format!("Done: {}", last_user_line(body))))
}

/// The first line of the last user message's text in `body` (either API's shape).
pub fn last_user_line(body: &Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .cloned()
        .unwrap_or(Value::Null);
    let text = match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    text.lines().next().unwrap_or_default().to_string()
}

/// Tokens in `text`, at four bytes a token.
pub fn tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Reads one HTTP request: its method, path and JSON body.
fn read_request(stream: &mut std::net::TcpStream) -> Option<(String, String, Value)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let mut words = request_line.split_whitespace();
    let method = words.next()?.to_string();
    let path = words.next()?.to_string();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.trim_end().split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((
        method,
        path,
        serde_json::from_slice(&body).unwrap_or(Value::Null),
    ))
}

/// What a request's input came to: every token, those read from the cache, those written.
#[derive(Clone, Copy, Debug, Default)]
pub struct Input {
    /// Every input token.
    pub total: u64,
    /// Those read from the cache.
    pub read: u64,
    /// Those written to it.
    pub written: u64,
}

/// The provider's cache: prefixes by their text, with when they expire (Anthropic), and the
/// prompts seen (OpenAI).
#[derive(Default)]
pub struct Cache {
    prefixes: HashMap<String, (Instant, Duration)>,
    prompts: Vec<String>,
}

/// `v` without its `cache_control` (the mark is not part of what is cached).
fn unmarked(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("cache_control");
    }
    v
}

impl Cache {
    /// Bills an Anthropic request: its blocks in prefix order, the marks among them, what
    /// is read and written.
    pub fn anthropic(&mut self, body: &Value, caching: bool) -> Result<Input, String> {
        // (block text, its mark if any)
        let mut blocks: Vec<(String, Option<Value>)> = Vec::new();
        for t in body["tools"].as_array().into_iter().flatten() {
            blocks.push((
                format!("tool:{}", unmarked(t)),
                t.get("cache_control").cloned(),
            ));
        }
        match &body["system"] {
            Value::String(s) => blocks.push((format!("system:{s}"), None)),
            Value::Array(parts) => {
                for p in parts {
                    blocks.push((
                        format!("system:{}", unmarked(p)),
                        p.get("cache_control").cloned(),
                    ));
                }
            }
            _ => {}
        }
        for m in body["messages"].as_array().into_iter().flatten() {
            let role = m["role"].as_str().unwrap_or_default();
            match &m["content"] {
                Value::String(s) => blocks.push((format!("{role}:{s}"), None)),
                Value::Array(parts) => {
                    for p in parts {
                        blocks.push((
                            format!("{role}:{}", unmarked(p)),
                            p.get("cache_control").cloned(),
                        ));
                    }
                }
                _ => {}
            }
        }
        let mut marks = Vec::new();
        for (i, (_, mark)) in blocks.iter().enumerate() {
            let Some(mark) = mark else { continue };
            let ttl = match (
                mark["type"].as_str(),
                mark.get("ttl").and_then(Value::as_str),
            ) {
                (Some("ephemeral"), None | Some("5m")) => Duration::from_secs(300),
                (Some("ephemeral"), Some("1h")) => Duration::from_secs(3600),
                _ => return Err(format!("cache_control: unexpected value {mark}")),
            };
            marks.push((i, ttl));
        }
        if marks.len() > 4 {
            return Err(format!(
                "A maximum of 4 blocks with cache_control may be provided. Found {}.",
                marks.len()
            ));
        }
        let model = body["model"].as_str().unwrap_or_default();
        let least = if model.contains("haiku") { 4096 } else { 1024 };
        // Each block boundary's prefix (keyed with the model) and its tokens so far.
        let mut keys = Vec::with_capacity(blocks.len());
        let mut upto = Vec::with_capacity(blocks.len());
        let (mut key, mut sum) = (format!("{model}\n"), 0);
        for (text, _) in &blocks {
            key.push_str(text);
            key.push('\n');
            sum += tokens(text);
            keys.push(key.clone());
            upto.push(sum);
        }
        let total = sum;
        if !caching {
            return Ok(Input {
                total,
                ..Input::default()
            });
        }
        let now = Instant::now();
        self.prefixes
            .retain(|_, (at, ttl)| now.duration_since(*at) < *ttl);
        // Read: the longest cached prefix within 20 blocks before a mark.
        let mut read_to: Option<usize> = None;
        for &(m, _) in &marks {
            for j in (m.saturating_sub(19)..=m).rev() {
                if self.prefixes.contains_key(&keys[j]) {
                    read_to = read_to.max(Some(j));
                    break;
                }
            }
        }
        if let Some(j) = read_to {
            // A read renews the entry's life.
            if let Some(e) = self.prefixes.get_mut(&keys[j]) {
                e.0 = now;
            }
        }
        let read = read_to.map_or(0, |j| upto[j]);
        // Written: every mark past what was read whose prefix is long enough.
        let mut written_to = None;
        for &(m, ttl) in &marks {
            if read_to.is_some_and(|j| m <= j) || upto[m] < least {
                continue;
            }
            self.prefixes.insert(keys[m].clone(), (now, ttl));
            written_to = written_to.max(Some(m));
        }
        let written = written_to.map_or(0, |m| upto[m] - read);
        Ok(Input {
            total,
            read,
            written,
        })
    }

    /// Bills an OpenAI request: the prompt is the tools, then the messages; the longest
    /// prefix shared with an earlier prompt is read, in steps of 128 tokens from 1,024.
    pub fn openai(&mut self, body: &Value, caching: bool) -> Input {
        let mut prompt = format!("{}\n", body["model"]);
        prompt.push_str(&body["tools"].to_string());
        for m in body["messages"].as_array().into_iter().flatten() {
            prompt.push('\n');
            prompt.push_str(&m.to_string());
        }
        let total = tokens(&prompt);
        if !caching {
            return Input {
                total,
                ..Input::default()
            };
        }
        let shared = self
            .prompts
            .iter()
            .map(|p| common_prefix(p, &prompt))
            .max()
            .unwrap_or(0);
        let shared = shared as u64 / 4;
        let read = if total < 1024 || shared < 1024 {
            0
        } else {
            (1024 + (shared - 1024) / 128 * 128).min(total)
        };
        if total >= 1024 {
            self.prompts.push(prompt);
        }
        Input {
            total,
            read,
            written: 0,
        }
    }
}

/// Bytes `a` and `b` share from the start.
fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// The tokens of what `say` writes.
fn output_tokens(say: &Say) -> u64 {
    match say {
        Say::Text(t) => tokens(t),
        Say::Calls(calls) => calls
            .iter()
            .map(|(name, args)| tokens(name) + tokens(&args.to_string()))
            .sum(),
    }
}

/// An Anthropic stream saying `say`, and the usage it reports.
fn anthropic_stream(say: &Say, input: &Input) -> (String, Value) {
    let event = |v: Value| {
        format!(
            "event: {}\ndata: {v}\n\n",
            v["type"].as_str().unwrap_or_default()
        )
    };
    let out = output_tokens(say);
    let usage = json!({
        "input_tokens": input.total - input.read - input.written,
        "cache_read_input_tokens": input.read,
        "cache_creation_input_tokens": input.written,
        "output_tokens": out,
    });
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = 1.into();
    let mut s = event(
        json!({"type": "message_start", "message": {"id": "msg_fake",
        "type": "message", "role": "assistant", "content": [], "stop_reason": null,
        "usage": start_usage}}),
    );
    let stop = match say {
        Say::Text(text) => {
            s.push_str(&event(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}})));
            s.push_str(&event(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}})));
            s.push_str(&event(json!({"type": "content_block_stop", "index": 0})));
            "end_turn"
        }
        Say::Calls(calls) => {
            for (i, (name, args)) in calls.iter().enumerate() {
                s.push_str(&event(json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": "tool_use", "id": format!("toolu_{i}"),
                    "name": name, "input": {}}})));
                s.push_str(&event(json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": args.to_string()}})));
                s.push_str(&event(json!({"type": "content_block_stop", "index": i})));
            }
            "tool_use"
        }
    };
    s.push_str(&event(
        json!({"type": "message_delta", "delta": {"stop_reason": stop},
        "usage": {"output_tokens": out}}),
    ));
    s.push_str(&event(json!({"type": "message_stop"})));
    (s, usage)
}

/// An OpenAI stream saying `say`, and the usage it reports.
fn openai_stream(say: &Say, input: &Input) -> (String, Value) {
    let data = |v: Value| format!("data: {v}\n\n");
    let usage = json!({
        "prompt_tokens": input.total,
        "completion_tokens": output_tokens(say),
        "total_tokens": input.total + output_tokens(say),
        "prompt_tokens_details": {"cached_tokens": input.read},
    });
    let mut s = data(json!({"choices": [{"index": 0,
        "delta": {"role": "assistant", "content": ""}}]}));
    let finish = match say {
        Say::Text(text) => {
            s.push_str(&data(
                json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
            ));
            "stop"
        }
        Say::Calls(calls) => {
            for (i, (name, args)) in calls.iter().enumerate() {
                s.push_str(&data(
                    json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": i, "id": format!("call_{i}"), "type": "function",
                     "function": {"name": name, "arguments": args.to_string()}}]}}]}),
                ));
            }
            "tool_calls"
        }
    };
    s.push_str(&data(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
    ));
    s.push_str(&data(json!({"choices": [], "usage": usage})));
    s.push_str("data: [DONE]\n\n");
    (s, usage)
}
