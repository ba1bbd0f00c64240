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

/// Tokens as the response reports them under `input` and `output`.
fn usage(v: &Value, input: &str, output: &str) -> Option<Usage> {
    Some(Usage {
        input_tokens: v[input].as_u64()?,
        output_tokens: v[output].as_u64()?,
        cost: None,
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
        TurnAnswer {
            text,
            tool_calls,
            stop,
            repeated: None,
        },
        usage(&resp["usage"], "prompt_tokens", "completion_tokens"),
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
        TurnAnswer {
            text,
            tool_calls,
            stop,
            repeated: None,
        },
        usage(&resp["usage"], "input_tokens", "output_tokens"),
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
        assert!(anthropic_answer(&json!({"content": []})).is_err());
    }
}
