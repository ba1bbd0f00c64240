//! The Anthropic messages dialect. The key goes as `x-api-key` with the API's version, and
//! is always needed. Streams carry `message_start` (with the input tokens),
//! `content_block_start` (a `text` or `tool_use` block), `content_block_delta`
//! (`text_delta` or `input_json_delta`), `content_block_stop`, `message_delta` (the stop
//! reason and output tokens) and `message_stop`; `ping`s in between, and `error` when the
//! provider fails mid-answer. Prefixes for the provider's prompt cache are marked
//! ([`breakpoints`]).

use super::stream::{Added, Assembly};
use super::{error_text, event_json, Dialect, Provider};
use prose_machine::protocol::{Message, Stop, ToolCall, TurnAnswer, TurnAsk, Usage};
use prose_settings::cache::PromptCache;
use serde_json::{json, Value};

/// The version of the Messages API the requests are written for.
const VERSION: &str = "2023-06-01";

/// Anthropic's Messages API.
pub struct Anthropic;

impl Dialect for Anthropic {
    fn provider(&self) -> Provider {
        Provider::Anthropic
    }

    fn env_prefix(&self) -> &'static str {
        "ANTHROPIC"
    }

    fn key_var(&self) -> &'static str {
        "ANTHROPIC_API_KEY"
    }

    fn public_base_url(&self) -> &'static str {
        "https://api.anthropic.com"
    }

    fn needs_key(&self, _host: Option<&str>) -> bool {
        true
    }

    fn endpoint(&self, base: &str) -> String {
        format!("{base}/v1/messages")
    }

    fn models_endpoint(&self, base: &str) -> String {
        format!("{base}/v1/models")
    }

    fn headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", VERSION.to_string())];
        if let Some(k) = key {
            headers.push(("x-api-key", k.to_string()));
        }
        headers
    }

    fn structures_turns(&self) -> bool {
        // Tools are offered natively; there is no schema-constrained decoding to ask for.
        false
    }

    fn body(&self, model: &str, max_out: u32, turn: &TurnAsk, _structured: bool) -> Value {
        let mut body = body(model, max_out, turn);
        body["stream"] = true.into();
        body
    }

    fn mark_cache(&self, body: &mut Value, cache: PromptCache) {
        breakpoints(body, cache);
    }

    fn answer(&self, resp: &Value) -> Result<(TurnAnswer, Option<Usage>), String> {
        answer(resp)
    }

    fn feed(&self, a: &mut Assembly, event: Option<&str>, data: &str) -> Result<Added, String> {
        feed(a, event, data)
    }

    fn complete(&self, a: &Assembly) -> bool {
        a.ended()
    }

    fn usage(&self, u: &Value) -> Option<Usage> {
        usage(u)
    }

    fn stop(&self, reason: Option<&str>, has_calls: bool) -> Stop {
        stop(reason, has_calls)
    }
}

/// The body of a messages request for `turn` (no streaming), the reply at most
/// `max_tokens` long.
pub fn body(model: &str, max_tokens: u32, turn: &TurnAsk) -> Value {
    // Content blocks by role, merging neighbours of the same role.
    let mut messages: Vec<(&str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, block: Value| match messages.last_mut() {
        Some((r, blocks)) if *r == role => blocks.push(block),
        _ => messages.push((role, vec![block])),
    };
    for m in &turn.messages {
        match m {
            Message::User { content } => push("user", json!({"type": "text", "text": content})),
            Message::Assistant { text, tool_calls } => {
                if !text.is_empty() || tool_calls.is_empty() {
                    push("assistant", json!({"type": "text", "text": text}));
                }
                for c in tool_calls {
                    let input = if c.arguments.is_object() {
                        c.arguments.clone()
                    } else {
                        json!({})
                    };
                    push(
                        "assistant",
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
            }
            Message::Tool {
                call_id,
                content,
                is_error,
                ..
            } => push(
                "user",
                json!({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}),
            ),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, blocks)| match &blocks[..] {
            // A lone text block is sent as plain content.
            [b] if b["type"] == "text" => json!({"role": role, "content": b["text"]}),
            _ => json!({"role": role, "content": blocks}),
        })
        .collect();
    let mut body = json!({"model": model, "max_tokens": max_tokens, "messages": messages});
    if let Some(s) = &turn.system {
        body["system"] = s.as_str().into();
    }
    if !turn.tools.is_empty() {
        body["tools"] = turn
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        if turn.tools_off {
            body["tool_choice"] = json!({"type": "none"});
        }
    }
    body
}

/// Marks an Anthropic request `body` for the provider's prompt cache, each mark made to live
/// as `ttl` says (nothing is marked when it is off). The provider caches a prefix in the
/// order tools, system prompt, messages, up to and including a marked block:
///
/// - the end of the tools and system prompt (the system prompt's block, else the last
///   tool's), which every session of the same agent shares;
/// - in a conversation (a turn offering tools, or one with more than one message), its
///   newest message, so that the next turn reads all of this one's prefix; and the message
///   the previous turn's request ended with, whose prefix that turn wrote, so that it is
///   read even when more than the provider's look-back of blocks came since.
///
/// Three marks at most, within the provider's limit of four. Plain questions (conditions,
/// choices, conversions: one message, no system prompt, no tools) are not marked: nothing
/// would read their prefix again.
pub fn breakpoints(body: &mut Value, ttl: PromptCache) {
    let mark = match ttl {
        PromptCache::Off => return,
        PromptCache::FiveMinutes => json!({"type": "ephemeral"}),
        PromptCache::OneHour => json!({"type": "ephemeral", "ttl": "1h"}),
    };
    let tools = body["tools"].as_array().map_or(0, Vec::len);
    if let Some(system) = body["system"].as_str() {
        body["system"] = json!([{"type": "text", "text": system, "cache_control": mark}]);
    } else if let Some(last) = body
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .and_then(|t| t.last_mut())
    {
        last["cache_control"] = mark.clone();
    }
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    if tools == 0 && messages.len() < 2 {
        return;
    }
    let n = messages.len();
    // Roles alternate: the newest message is the user's, and the user's before it, two
    // back, ended the previous turn's request.
    for at in [n.checked_sub(3), n.checked_sub(1)].into_iter().flatten() {
        mark_last_block(&mut messages[at], &mark);
    }
}

/// Puts `mark` on the last content block of `message` (plain text content becoming one text
/// block).
fn mark_last_block(message: &mut Value, mark: &Value) {
    if let Some(text) = message["content"].as_str() {
        message["content"] = json!([{"type": "text", "text": text, "cache_control": mark}]);
    } else if let Some(last) = message["content"]
        .as_array_mut()
        .and_then(|blocks| blocks.last_mut())
    {
        last["cache_control"] = mark.clone();
    }
}

/// The tokens of an Anthropic `usage` object: `input_tokens` (the input neither read from
/// nor written to the cache), `cache_read_input_tokens`, `cache_creation_input_tokens` and
/// `output_tokens`.
pub fn usage(u: &Value) -> Option<Usage> {
    Some(Usage {
        cache_read_tokens: u["cache_read_input_tokens"].as_u64().unwrap_or(0),
        cache_write_tokens: u["cache_creation_input_tokens"].as_u64().unwrap_or(0),
        ..Usage::plain(u["input_tokens"].as_u64()?, u["output_tokens"].as_u64()?)
    })
}

/// Why an Anthropic answer stopped, from its `stop_reason` and whether it calls tools.
fn stop(stop_reason: Option<&str>, has_calls: bool) -> Stop {
    match stop_reason {
        Some("max_tokens") => Stop::Length,
        _ if has_calls => Stop::ToolUse,
        _ => Stop::End,
    }
}

/// The model's message in an Anthropic messages response.
pub fn answer(resp: &Value) -> Result<(TurnAnswer, Option<Usage>), String> {
    let Some(blocks) = resp["content"].as_array() else {
        return Err("the provider's response has no content[0].text".into());
    };
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for b in blocks {
        match b["type"].as_str() {
            Some("text") => text.push_str(b["text"].as_str().unwrap_or_default()),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: b["id"].as_str().unwrap_or_default().to_string(),
                name: b["name"].as_str().unwrap_or_default().to_string(),
                arguments: b["input"].clone(),
            }),
            _ => {}
        }
    }
    if tool_calls.is_empty() && !blocks.iter().any(|b| b["type"] == "text") {
        return Err("the provider's response has no content[0].text".into());
    }
    let stop = stop(resp["stop_reason"].as_str(), !tool_calls.is_empty());
    Ok((
        TurnAnswer::new(text, tool_calls, stop),
        usage(&resp["usage"]),
    ))
}

/// Takes one event of a stream into `a`.
fn feed(a: &mut Assembly, event: Option<&str>, data: &str) -> Result<Added, String> {
    let ev = event_json(data)?;
    let kind = ev["type"].as_str().or(event).unwrap_or_default();
    let mut added = Added::default();
    match kind {
        "message_start" => a.report(&ev["message"]["usage"]),
        "content_block_start" => {
            let index = ev["index"].as_u64().unwrap_or_default();
            let block = &ev["content_block"];
            match block["type"].as_str() {
                Some("text") => {
                    let t = block["text"].as_str().unwrap_or_default();
                    a.push_text(t, &mut added);
                }
                Some("tool_use") => {
                    let call = a.call(index);
                    call.id = block["id"].as_str().unwrap_or_default().to_string();
                    call.name = block["name"].as_str().unwrap_or_default().to_string();
                    call.input = Some(block["input"].clone());
                    added.content = true;
                }
                _ => {}
            }
        }
        "content_block_delta" => {
            let index = ev["index"].as_u64().unwrap_or_default();
            let delta = &ev["delta"];
            match delta["type"].as_str() {
                Some("text_delta") => {
                    let t = delta["text"].as_str().unwrap_or_default();
                    a.push_text(t, &mut added);
                }
                Some("input_json_delta") => {
                    let piece = delta["partial_json"].as_str().unwrap_or_default();
                    a.call(index).arguments.push_str(piece);
                    added.content = true;
                }
                _ => {}
            }
        }
        "message_delta" => {
            if let Some(r) = ev["delta"]["stop_reason"].as_str() {
                a.set_reason(r);
            }
            a.report(&ev["usage"]);
        }
        "message_stop" => a.end(),
        "error" => {
            return Err(format!(
                "the provider failed mid-answer: {}",
                error_text(&ev["error"])
            ))
        }
        // `ping`, `content_block_stop` and kinds added later carry nothing to keep.
        _ => {}
    }
    Ok(added)
}
