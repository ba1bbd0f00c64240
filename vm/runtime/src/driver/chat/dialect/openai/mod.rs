//! The OpenAI chat completions dialect: what `openai` servers (OpenAI's, and the local ones
//! speaking its API: llama.cpp, vLLM, Ollama) read and write. The key goes as a bearer
//! token, and only OpenAI's own API needs one. Streams (`"stream": true`, with
//! `stream_options.include_usage`) carry chunks whose `choices[0].delta` holds `content`
//! text or `tool_calls` pieces (by `index`: the `id` and `function.name` once,
//! `function.arguments` in parts); `finish_reason` comes with the message's last chunk, the
//! usage in a chunk of its own after it, and the stream ends with `data: [DONE]`.

pub mod structured;

use super::stream::{Added, Assembly};
use super::{error_text, event_json, parse_arguments, Dialect, Provider};
use prose_machine::protocol::{Message, Stop, ToolCall, ToolSpec, TurnAnswer, TurnAsk, Usage};
use prose_settings::cache::PromptCache;
use serde_json::{json, Value};

/// OpenAI's chat completions API.
pub struct OpenAi;

impl Dialect for OpenAi {
    fn provider(&self) -> Provider {
        Provider::OpenAi
    }

    fn env_prefix(&self) -> &'static str {
        "OPENAI"
    }

    fn key_var(&self) -> &'static str {
        "OPENAI_API_KEY"
    }

    fn public_base_url(&self) -> &'static str {
        "https://api.openai.com/v1"
    }

    fn needs_key(&self, host: Option<&str>) -> bool {
        // Local servers speaking the API take none.
        host == Some("api.openai.com")
    }

    fn endpoint(&self, base: &str) -> String {
        format!("{base}/chat/completions")
    }

    fn models_endpoint(&self, base: &str) -> String {
        format!("{base}/models")
    }

    fn headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        key.map(|k| ("authorization", format!("Bearer {k}")))
            .into_iter()
            .collect()
    }

    fn structures_turns(&self) -> bool {
        true
    }

    fn body(&self, model: &str, max_out: u32, turn: &TurnAsk, structured: bool) -> Value {
        let mut body = if structured && structured::applies(turn) {
            structured::body(model, turn)
        } else {
            body(model, turn)
        };
        body["max_tokens"] = max_out.into();
        body["stream"] = true.into();
        body["stream_options"] = json!({"include_usage": true});
        body
    }

    fn mark_cache(&self, _body: &mut Value, _cache: PromptCache) {
        // OpenAI-compatible servers find cached prefixes themselves.
    }

    fn answer(&self, resp: &Value) -> Result<(TurnAnswer, Option<Usage>), String> {
        answer(resp)
    }

    fn feed(&self, a: &mut Assembly, _event: Option<&str>, data: &str) -> Result<Added, String> {
        feed(a, data)
    }

    fn complete(&self, a: &Assembly) -> bool {
        // `[DONE]` may be missing from a server that closes after the finish reason.
        a.reason().is_some()
    }

    fn usage(&self, u: &Value) -> Option<Usage> {
        usage(u)
    }

    fn stop(&self, reason: Option<&str>, has_calls: bool) -> Stop {
        stop(reason, has_calls)
    }
}

/// The body of a chat completions request for `turn`, as the API takes it (no streaming,
/// no limit on the reply).
pub fn body(model: &str, turn: &TurnAsk) -> Value {
    let mut messages = Vec::new();
    if let Some(s) = &turn.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    for m in &turn.messages {
        messages.push(match m {
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant { text, tool_calls } => {
                let mut msg = json!({"role": "assistant", "content": text});
                if !tool_calls.is_empty() {
                    msg["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments.to_string()},
                            })
                        })
                        .collect();
                }
                msg
            }
            Message::Tool {
                call_id,
                content,
                is_error,
                ..
            } => json!({
                "role": "tool",
                "tool_call_id": call_id,
                "content": if *is_error { format!("Error: {content}") } else { content.clone() },
            }),
        });
    }
    let mut body = json!({"model": model, "messages": messages});
    if !turn.tools.is_empty() {
        body["tools"] = turn
            .tools
            .iter()
            .map(|t: &ToolSpec| {
                json!({
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                })
            })
            .collect();
        if turn.tools_off {
            body["tool_choice"] = "none".into();
        }
    }
    body
}

/// The tokens of an OpenAI `usage` object: `prompt_tokens`, of which
/// `prompt_tokens_details.cached_tokens` were read from the provider's prefix cache, and
/// `completion_tokens`. Cached input is kept apart from the rest.
pub fn usage(u: &Value) -> Option<Usage> {
    let prompt = u["prompt_tokens"].as_u64()?;
    let cached = u["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0)
        .min(prompt);
    Some(Usage {
        cache_read_tokens: cached,
        ..Usage::plain(prompt - cached, u["completion_tokens"].as_u64()?)
    })
}

/// Why an OpenAI answer stopped, from its `finish_reason` and whether it calls tools.
fn stop(finish_reason: Option<&str>, has_calls: bool) -> Stop {
    match finish_reason {
        Some("length") => Stop::Length,
        _ if has_calls => Stop::ToolUse,
        _ => Stop::End,
    }
}

/// The model's message in an OpenAI chat completions response.
pub fn answer(resp: &Value) -> Result<(TurnAnswer, Option<Usage>), String> {
    let choice = &resp["choices"][0];
    let message = &choice["message"];
    let tool_calls: Vec<ToolCall> = message["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let raw = c["function"]["arguments"].as_str().unwrap_or("{}");
                    ToolCall {
                        id: c["id"]
                            .as_str()
                            .map_or_else(|| format!("call_{i}"), str::to_string),
                        name: c["function"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        arguments: parse_arguments(raw),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let text = match message["content"].as_str() {
        Some(t) => t.to_string(),
        None if !tool_calls.is_empty() => String::new(),
        None => return Err("the provider's response has no choices[0].message.content".into()),
    };
    let stop = stop(choice["finish_reason"].as_str(), !tool_calls.is_empty());
    Ok((
        TurnAnswer::new(text, tool_calls, stop),
        usage(&resp["usage"]),
    ))
}

/// Takes one chunk of a stream into `a`.
fn feed(a: &mut Assembly, data: &str) -> Result<Added, String> {
    if data.trim() == "[DONE]" {
        a.end();
        return Ok(Added::default());
    }
    let chunk = event_json(data)?;
    if !chunk["error"].is_null() {
        return Err(format!(
            "the provider failed mid-answer: {}",
            error_text(&chunk["error"])
        ));
    }
    if let Some(u) = chunk.get("usage") {
        a.report(u);
    }
    let mut added = Added::default();
    let Some(choice) = chunk["choices"].get(0) else {
        return Ok(added);
    };
    let delta = &choice["delta"];
    if let Some(t) = delta["content"].as_str() {
        a.push_text(t, &mut added);
    }
    if let Some(pieces) = delta["tool_calls"].as_array() {
        for (n, piece) in pieces.iter().enumerate() {
            let index = piece["index"].as_u64().unwrap_or(n as u64);
            let call = a.call(index);
            if let Some(id) = piece["id"].as_str() {
                call.id = id.to_string();
            }
            if let Some(name) = piece["function"]["name"].as_str() {
                call.name.push_str(name);
            }
            if let Some(args) = piece["function"]["arguments"].as_str() {
                call.arguments.push_str(args);
            }
            added.content = true;
        }
    }
    if let Some(r) = choice["finish_reason"].as_str() {
        a.set_reason(r);
    }
    Ok(added)
}
