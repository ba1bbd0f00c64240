//! The two chat APIs' wire formats: a turn (the conversation and the tools on offer) as a
//! request body, and a response as the model's message and the tokens it reports.
//!
//! OpenAI chat completions: the system prompt is a `system` message; an assistant message
//! carries `tool_calls` (arguments as a JSON string); each tool output is a `tool` message
//! with its `tool_call_id`; `finish_reason` is `stop`, `tool_calls` or `length`.
//! Anthropic messages: the system prompt is a top-level field; an assistant message is a
//! list of `text` and `tool_use` blocks; tool outputs are `tool_result` blocks of the next
//! user message (consecutive ones in one message, as the API requires alternating roles);
//! `stop_reason` is `end_turn`, `tool_use` or `max_tokens`.

use prose_machine::protocol::{Message, Stop, TurnAnswer, TurnAsk, Usage};
use prose_machine::protocol::{ToolCall, ToolSpec};
use prose_settings::cache::PromptCache;
use serde_json::{json, Value};

/// The body of an OpenAI chat completions request for `turn`.
pub fn openai_body(model: &str, turn: &TurnAsk) -> Value {
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

/// The body of an Anthropic messages request for `turn`.
pub fn anthropic_body(model: &str, max_tokens: u32, turn: &TurnAsk) -> Value {
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
pub fn anthropic_breakpoints(body: &mut Value, ttl: PromptCache) {
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

/// The tokens of an OpenAI `usage` object: `prompt_tokens`, of which
/// `prompt_tokens_details.cached_tokens` were read from the provider's prefix cache, and
/// `completion_tokens`. Cached input is kept apart from the rest.
pub fn openai_usage(u: &Value) -> Option<Usage> {
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

/// The tokens of an Anthropic `usage` object: `input_tokens` (the input neither read from
/// nor written to the cache), `cache_read_input_tokens`, `cache_creation_input_tokens` and
/// `output_tokens`.
pub fn anthropic_usage(u: &Value) -> Option<Usage> {
    Some(Usage {
        cache_read_tokens: u["cache_read_input_tokens"].as_u64().unwrap_or(0),
        cache_write_tokens: u["cache_creation_input_tokens"].as_u64().unwrap_or(0),
        ..Usage::plain(u["input_tokens"].as_u64()?, u["output_tokens"].as_u64()?)
    })
}

/// Why an OpenAI answer stopped, from its `finish_reason` and whether it calls tools.
pub fn openai_stop(finish_reason: Option<&str>, has_calls: bool) -> Stop {
    match finish_reason {
        Some("length") => Stop::Length,
        _ if has_calls => Stop::ToolUse,
        _ => Stop::End,
    }
}

/// Why an Anthropic answer stopped, from its `stop_reason` and whether it calls tools.
pub fn anthropic_stop(stop_reason: Option<&str>, has_calls: bool) -> Stop {
    match stop_reason {
        Some("max_tokens") => Stop::Length,
        _ if has_calls => Stop::ToolUse,
        _ => Stop::End,
    }
}

/// A tool call's arguments as the provider wrote them (a JSON string): unparseable ones
/// reach the tool as text, which refuses them with an error the model can read.
pub fn parse_arguments(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// The model's message in an OpenAI chat completions response.
pub fn openai_answer(resp: &Value) -> Result<(TurnAnswer, Option<Usage>), String> {
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
    let stop = openai_stop(choice["finish_reason"].as_str(), !tool_calls.is_empty());
    Ok((
        TurnAnswer::new(text, tool_calls, stop),
        openai_usage(&resp["usage"]),
    ))
}

/// The model's message in an Anthropic messages response.
pub fn anthropic_answer(resp: &Value) -> Result<(TurnAnswer, Option<Usage>), String> {
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
    let stop = anthropic_stop(resp["stop_reason"].as_str(), !tool_calls.is_empty());
    Ok((
        TurnAnswer::new(text, tool_calls, stop),
        anthropic_usage(&resp["usage"]),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation() -> TurnAsk {
        TurnAsk {
            agent: None,
            model: None,
            system: Some("You fix bugs.".into()),
            messages: vec![
                Message::User {
                    content: "Fix it".into(),
                },
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![
                        ToolCall {
                            id: "c1".into(),
                            name: "read_file".into(),
                            arguments: json!({"path": "a.rs"}),
                        },
                        ToolCall {
                            id: "c2".into(),
                            name: "bash".into(),
                            arguments: json!({"command": "ls"}),
                        },
                    ],
                },
                Message::Tool {
                    call_id: "c1".into(),
                    name: "read_file".into(),
                    content: "fn main() {}".into(),
                    is_error: false,
                },
                Message::Tool {
                    call_id: "c2".into(),
                    name: "bash".into(),
                    content: "refused".into(),
                    is_error: true,
                },
            ],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Reads".into(),
                input_schema: json!({"type": "object"}),
            }],
            tools_off: false,
        }
    }

    #[test]
    fn openai_bodies_carry_tool_calls_and_results() {
        let b = openai_body("m", &conversation());
        assert_eq!(
            b["messages"][0],
            json!({"role": "system", "content": "You fix bugs."})
        );
        assert_eq!(
            b["messages"][2]["tool_calls"][0],
            json!({"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}})
        );
        assert_eq!(
            b["messages"][4],
            json!({"role": "tool", "tool_call_id": "c2", "content": "Error: refused"})
        );
        assert_eq!(
            b["tools"][0]["function"]["parameters"],
            json!({"type": "object"})
        );
    }

    #[test]
    fn anthropic_bodies_group_tool_results_in_one_user_message() {
        let b = anthropic_body("m", 100, &conversation());
        assert_eq!(b["system"], "You fix bugs.");
        let msgs = b["messages"].as_array().expect("messages");
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[0], json!({"role": "user", "content": "Fix it"}));
        assert_eq!(msgs[1]["content"][1]["type"], "tool_use");
        assert_eq!(msgs[1]["content"][1]["input"], json!({"command": "ls"}));
        assert_eq!(msgs[2]["role"], "user");
        assert_eq!(msgs[2]["content"][1]["is_error"], true);
        assert_eq!(b["tools"][0]["input_schema"], json!({"type": "object"}));
    }

    #[test]
    fn responses_become_messages() {
        let (a, u) = openai_answer(&json!({
            "choices": [{"finish_reason": "tool_calls", "message": {"content": null,
                "tool_calls": [{"id": "x", "function": {"name": "grep", "arguments": "{\"pattern\":\"a\"}"}},
                               {"id": "y", "function": {"name": "grep", "arguments": "not json"}}]}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2}
        }))
        .expect("parses");
        assert_eq!(a.stop, Stop::ToolUse);
        assert_eq!(a.tool_calls[0].arguments, json!({"pattern": "a"}));
        assert_eq!(a.tool_calls[1].arguments, json!("not json"));
        assert_eq!(u.map(|u| u.input_tokens), Some(7));
        let (a, _) = anthropic_answer(&json!({
            "content": [{"type": "text", "text": "Done"}], "stop_reason": "max_tokens"
        }))
        .expect("parses");
        assert_eq!((a.text.as_str(), a.stop), ("Done", Stop::Length));
        assert!(openai_answer(&json!({"choices": [{"message": {}}]})).is_err());
        assert!(openai_answer(&json!({"choices": [{"message": {}}]})).is_err());
    }

    #[test]
    fn anthropic_marks_fall_after_tools_and_system_and_on_the_conversations_end() {
        let mut b = anthropic_body("m", 100, &conversation());
        anthropic_breakpoints(&mut b, PromptCache::FiveMinutes);
        let mark = json!({"type": "ephemeral"});
        assert_eq!(
            b["system"],
            json!([{"type": "text", "text": "You fix bugs.", "cache_control": mark}])
        );
        assert!(
            b["tools"][0].get("cache_control").is_none(),
            "the system's mark covers the tools"
        );
        let msgs = b["messages"].as_array().expect("messages");
        // The newest message (the tool results) and the user's message two back.
        assert_eq!(msgs[2]["content"][1]["cache_control"], mark);
        assert!(msgs[2]["content"][0].get("cache_control").is_none());
        assert_eq!(
            msgs[0]["content"],
            json!([{"type": "text", "text": "Fix it", "cache_control": mark}])
        );
        assert!(msgs[1].to_string().matches("cache_control").count() == 0);
        let marks = b.to_string().matches("cache_control").count();
        assert!(marks <= 4, "{marks} marks");
        // An hour's marks say so; without a system prompt the last tool is marked.
        let mut turn = conversation();
        turn.system = None;
        turn.messages.truncate(1);
        let mut b = anthropic_body("m", 100, &turn);
        anthropic_breakpoints(&mut b, PromptCache::OneHour);
        let hour = json!({"type": "ephemeral", "ttl": "1h"});
        assert_eq!(b["tools"][0]["cache_control"], hour);
        assert_eq!(b["messages"][0]["content"][0]["cache_control"], hour);
        // Off: the body is as it was.
        let mut b = anthropic_body("m", 100, &conversation());
        anthropic_breakpoints(&mut b, PromptCache::Off);
        assert_eq!(b, anthropic_body("m", 100, &conversation()));
        // A plain question is not marked.
        let plain = TurnAsk {
            system: None,
            tools: Vec::new(),
            ..turn
        };
        let mut b = anthropic_body("m", 100, &plain);
        anthropic_breakpoints(&mut b, PromptCache::FiveMinutes);
        assert_eq!(b, anthropic_body("m", 100, &plain));
    }

    #[test]
    fn cached_tokens_are_read_apart_from_plain_input() {
        let u = openai_usage(&json!({"prompt_tokens": 2000, "completion_tokens": 9,
            "prompt_tokens_details": {"cached_tokens": 1536}}))
        .expect("usage");
        assert_eq!(
            (u.input_tokens, u.cache_read_tokens, u.output_tokens),
            (464, 1536, 9)
        );
        assert_eq!(u.input_tokens(), 2000);
        let u = anthropic_usage(&json!({"input_tokens": 12, "output_tokens": 40,
            "cache_read_input_tokens": 2400, "cache_creation_input_tokens": 300}))
        .expect("usage");
        assert_eq!(
            (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens),
            (12, 2400, 300)
        );
        // A provider that reports no cache fields: all input is plain.
        let u = openai_usage(&json!({"prompt_tokens": 7, "completion_tokens": 2})).expect("usage");
        assert_eq!((u.input_tokens, u.cache_read_tokens), (7, 0));
        assert_eq!(anthropic_usage(&json!({"input_tokens": 7})), None);
        assert!(anthropic_answer(&json!({"content": []})).is_err());
    }
}
