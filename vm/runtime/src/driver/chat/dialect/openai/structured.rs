//! Structured turns on the wire: an agent-loop turn asked of an OpenAI-compatible server as
//! one JSON object decoded under a schema (`response_format` of type `json_schema`), instead
//! of offering the tools natively. The schema admits exactly one step: a call of one tool
//! on offer, `{"tool": NAME, "arguments": {...}}` with that tool's arguments, or the answer,
//! `{"answer": TEXT}`. A server that decodes under the schema (llama.cpp, vLLM, OpenAI)
//! cannot produce anything else, so a small model's markdown plans, calls of made-up tools
//! and declarations written back cannot happen; what the model is shown in such a session
//! is the runner's business (its `structured` module).
//!
//! The reply is read back into the turn's answer: a step calling a tool becomes a call
//! written in text ([`ToolCall::in_text`]), its results going back as text, as for any model
//! that writes its calls; the answer step becomes the answer's text.

use prose_machine::protocol::{Stop, ToolCall, ToolSpec, TurnAnswer, TurnAsk};
use serde_json::{json, Value};
use std::time::Duration;

/// The schema's name in `response_format`: how a tape shows it was recorded structured.
pub const SCHEMA_NAME: &str = "prose_step";

/// Whether `turn` is asked structured, by a driver whose turns are: it declares tools
/// (when it has switched them off, as for a persistent agent's memory, the only step it
/// admits is the answer).
pub fn applies(turn: &TurnAsk) -> bool {
    !turn.tools.is_empty()
}

/// The OpenAI body asking `turn` structured: the conversation without `tools`, and the
/// schema of one step as `response_format`.
pub fn body(model: &str, turn: &TurnAsk) -> Value {
    let mut body = super::body(model, turn);
    if let Some(map) = body.as_object_mut() {
        map.remove("tools");
        map.remove("tool_choice");
    }
    body["response_format"] = json!({
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "schema": schema(callable(turn))},
    });
    body
}

/// The tools `turn` lets the model call: none when it has switched them off.
fn callable(turn: &TurnAsk) -> &[ToolSpec] {
    match turn.tools_off {
        true => &[],
        false => &turn.tools,
    }
}

/// Whether a request body was asked structured.
pub fn asked(body: &Value) -> bool {
    body["response_format"]["json_schema"]["name"] == SCHEMA_NAME
}

/// The schema of one step with `tools` on offer: one alternative per tool (its name as a
/// constant, its arguments' schema with every property required unless the schema says
/// which are), and the answer.
fn schema(tools: &[ToolSpec]) -> Value {
    let mut steps: Vec<Value> = tools
        .iter()
        .map(|t| {
            let mut arguments = t.input_schema.clone();
            if arguments.get("required").is_none() {
                let names: Vec<Value> = arguments["properties"]
                    .as_object()
                    .map(|p| p.keys().cloned().map(Value::String).collect())
                    .unwrap_or_default();
                arguments["required"] = Value::Array(names);
            }
            if arguments.get("type").is_none() {
                arguments["type"] = "object".into();
            }
            json!({
                "type": "object",
                "properties": {"tool": {"const": t.name}, "arguments": arguments},
                "required": ["tool", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    steps.push(json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": false,
    }));
    json!({ "anyOf": steps })
}

/// `answer`, the reply to a structured request whose conversation held `messages` messages,
/// read as the step it is: a tool call (with the id `text_call_s{messages}`, unique in the
/// session's conversation), or the answer's text. A reply that is no step (cut off by the
/// output limit, or hung up on) stays as it came.
pub fn read(answer: TurnAnswer, messages: usize) -> TurnAnswer {
    if !matches!(answer.stop, Stop::End | Stop::ToolUse) {
        return answer;
    }
    let Ok(Value::Object(mut step)) = serde_json::from_str::<Value>(answer.text.trim()) else {
        return answer;
    };
    if let (Some(Value::String(name)), Some(arguments @ Value::Object(_))) =
        (step.remove("tool"), step.remove("arguments"))
    {
        let call = ToolCall::in_text(&format!("s{messages}"), name, arguments);
        return TurnAnswer {
            tool_calls: vec![call],
            stop: Stop::ToolUse,
            ..answer
        };
    }
    match step.remove("answer") {
        Some(Value::String(text)) => TurnAnswer {
            text,
            stop: Stop::End,
            ..answer
        },
        _ => answer,
    }
}

/// Whether the OpenAI-compatible server at `base_url` is one known to decode under a JSON
/// schema: llama.cpp's server, which answers `GET /props` (beside `/v1`) with its chat
/// template. Asked once, briefly; no answer means no.
pub async fn decodes_under_schema(client: &reqwest::Client, base_url: &str) -> bool {
    let root = base_url
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .trim_end_matches('/');
    let Ok(resp) = client
        .get(format!("{root}/props"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
    else {
        return false;
    };
    if !resp.status().is_success() {
        return false;
    }
    let Ok(props) = resp.json::<Value>().await else {
        return false;
    };
    props.get("chat_template").is_some() && props.get("total_slots").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prose_machine::protocol::Message;

    fn turn() -> TurnAsk {
        TurnAsk {
            agent: None,
            model: None,
            system: Some("Do it.".into()),
            messages: vec![Message::User {
                content: "sum numbers.txt".into(),
            }],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Read a file.".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            }],
            tools_off: false,
        }
    }

    #[test]
    fn the_body_offers_no_tools_and_admits_one_step() {
        let b = body("m", &turn());
        assert!(b.get("tools").is_none());
        assert!(asked(&b));
        let steps = &b["response_format"]["json_schema"]["schema"]["anyOf"];
        assert_eq!(steps[0]["properties"]["tool"]["const"], "read_file");
        assert_eq!(
            steps[0]["properties"]["arguments"]["required"],
            json!(["path"])
        );
        assert_eq!(steps[1]["required"], json!(["answer"]));
        assert!(!asked(&super::super::body("m", &turn())));
        // Tools switched off: the answer is the only step.
        let off = TurnAsk {
            tools_off: true,
            ..turn()
        };
        let steps = &body("m", &off)["response_format"]["json_schema"]["schema"]["anyOf"];
        assert_eq!(steps.as_array().map(Vec::len), Some(1));
        assert_eq!(steps[0]["required"], json!(["answer"]));
    }

    #[test]
    fn a_step_reads_as_a_call_or_the_answer() {
        let call = read(
            TurnAnswer::new(
                "{\"tool\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}".into(),
                Vec::new(),
                Stop::End,
            ),
            3,
        );
        assert_eq!(call.stop, Stop::ToolUse);
        assert_eq!(call.tool_calls[0].name, "read_file");
        assert_eq!(call.tool_calls[0].id, "text_call_s3");
        assert!(call.tool_calls[0].is_in_text());
        let answer = read(
            TurnAnswer::new("{\"answer\": \"50\"}".into(), Vec::new(), Stop::End),
            3,
        );
        assert_eq!((answer.text.as_str(), answer.stop), ("50", Stop::End));
        assert!(answer.tool_calls.is_empty());
        // Cut off, or no step at all: as it came.
        let cut = TurnAnswer::new("{\"tool\": \"read_".into(), Vec::new(), Stop::Length);
        assert_eq!(read(cut.clone(), 3), cut);
        let prose = TurnAnswer::new("The total is 50.".into(), Vec::new(), Stop::End);
        assert_eq!(read(prose.clone(), 3), prose);
    }
}
