//! One dialect per chat API. What the `openai` and `anthropic` drivers share (the agent
//! loop's turns, retries, pacing, tapes, the memo) is written once in the chat driver; what
//! differs between their wire formats is a [`Dialect`]: where requests go and how they are
//! authorised, a turn as a request body, a whole response or a stream's events as the
//! model's message, the tokens a provider reports, why an answer stopped, and the marks for
//! a provider's prompt cache. [`of`] is the only place that tells the APIs apart; nothing
//! outside this folder matches on a [`Provider`] to decide a byte on the wire.
//!
//! OpenAI chat completions ([`openai`]): the system prompt is a `system` message; an
//! assistant message carries `tool_calls` (arguments as a JSON string); each tool output is
//! a `tool` message with its `tool_call_id`; `finish_reason` is `stop`, `tool_calls` or
//! `length`. Anthropic messages ([`anthropic`]): the system prompt is a top-level field; an
//! assistant message is a list of `text` and `tool_use` blocks; tool outputs are
//! `tool_result` blocks of the next user message (consecutive ones in one message, as the
//! API requires alternating roles); `stop_reason` is `end_turn`, `tool_use` or `max_tokens`.

pub mod anthropic;
pub mod openai;
pub mod stream;

use prose_machine::protocol::{Stop, TurnAnswer, TurnAsk, Usage};
use prose_settings::cache::PromptCache;
pub use prose_settings::models::Provider;
use serde_json::Value;
use stream::{Added, Assembly};

/// What one chat API does its own way.
pub trait Dialect: Sync {
    /// Which API this is.
    fn provider(&self) -> Provider;

    /// The driver's name (`openai`, `anthropic`): on tapes, in memo keys, in messages.
    fn name(&self) -> &'static str {
        self.provider().name()
    }

    /// The prefix of the environment variables that configure it (`OPENAI_BASE_URL`,
    /// `OPENAI_MODEL`, ...).
    fn env_prefix(&self) -> &'static str;

    /// The environment variable its API key is read from.
    fn key_var(&self) -> &'static str;

    /// The provider's public base URL, used when none is given.
    fn public_base_url(&self) -> &'static str;

    /// Whether a server at `host` cannot be asked without a key.
    fn needs_key(&self, host: Option<&str>) -> bool;

    /// Where turns are posted, under the base URL `base` (no trailing slash).
    fn endpoint(&self, base: &str) -> String;

    /// Where the provider lists its models, under the base URL `base`.
    fn models_endpoint(&self, base: &str) -> String;

    /// The headers every request carries: the API's version, if it has one, and the key.
    fn headers(&self, key: Option<&str>) -> Vec<(&'static str, String)>;

    /// Whether agent-loop turns can be asked structured (one step decoded under a schema)
    /// rather than with the tools offered natively.
    fn structures_turns(&self) -> bool;

    /// The streaming request body for `turn` to `model`, its reply at most `max_out` tokens,
    /// asked structured when `structured` (and the turn offers tools); no cache marks.
    fn body(&self, model: &str, max_out: u32, turn: &TurnAsk, structured: bool) -> Value;

    /// Marks `body` for the provider's prompt cache to live as `cache` says (a provider that
    /// finds cached prefixes itself needs no marks).
    fn mark_cache(&self, body: &mut Value, cache: PromptCache);

    /// The model's message in a whole (not streamed) response, and the tokens it reports.
    fn answer(&self, resp: &Value) -> Result<(TurnAnswer, Option<Usage>), String>;

    /// Takes one streamed event (its `event:` name, if any, and its data) into `a`.
    fn feed(&self, a: &mut Assembly, event: Option<&str>, data: &str) -> Result<Added, String>;

    /// Whether the stream assembled in `a` said its answer is complete.
    fn complete(&self, a: &Assembly) -> bool;

    /// The tokens of the provider's `usage` object, when it has them.
    fn usage(&self, u: &Value) -> Option<Usage>;

    /// Why an answer stopped, from the provider's reason and whether it calls tools.
    fn stop(&self, reason: Option<&str>, has_calls: bool) -> Stop;
}

/// The dialect of `provider`'s API.
pub fn of(provider: Provider) -> &'static dyn Dialect {
    match provider {
        Provider::OpenAi => &openai::OpenAi,
        Provider::Anthropic => &anthropic::Anthropic,
    }
}

/// A tool call's arguments as the provider wrote them (a JSON string): unparseable ones
/// reach the tool as text, which refuses them with an error the model can read.
pub fn parse_arguments(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// The text of a provider's `error` object.
pub fn error_text(e: &Value) -> String {
    e["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| e.to_string().chars().take(200).collect())
}

/// A streamed event's data as JSON, or the error saying it is not.
pub fn event_json(data: &str) -> Result<Value, String> {
    serde_json::from_str(data).map_err(|e| {
        format!(
            "the provider sent an event that is not JSON ({e}): {:?}",
            data.chars().take(80).collect::<String>()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prose_machine::protocol::{Message, ToolCall, ToolSpec};
    use serde_json::json;

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
        let b = openai::body("m", &conversation());
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
        let b = anthropic::body("m", 100, &conversation());
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
        let (a, u) = openai::answer(&json!({
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
        let (a, _) = anthropic::answer(&json!({
            "content": [{"type": "text", "text": "Done"}], "stop_reason": "max_tokens"
        }))
        .expect("parses");
        assert_eq!((a.text.as_str(), a.stop), ("Done", Stop::Length));
        assert!(openai::answer(&json!({"choices": [{"message": {}}]})).is_err());
        assert!(openai::answer(&json!({"choices": [{"message": {}}]})).is_err());
    }

    #[test]
    fn anthropic_marks_fall_after_tools_and_system_and_on_the_conversations_end() {
        let mut b = anthropic::body("m", 100, &conversation());
        anthropic::breakpoints(&mut b, PromptCache::FiveMinutes);
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
        let mut b = anthropic::body("m", 100, &turn);
        anthropic::breakpoints(&mut b, PromptCache::OneHour);
        let hour = json!({"type": "ephemeral", "ttl": "1h"});
        assert_eq!(b["tools"][0]["cache_control"], hour);
        assert_eq!(b["messages"][0]["content"][0]["cache_control"], hour);
        // Off: the body is as it was.
        let mut b = anthropic::body("m", 100, &conversation());
        anthropic::breakpoints(&mut b, PromptCache::Off);
        assert_eq!(b, anthropic::body("m", 100, &conversation()));
        // A plain question is not marked.
        let plain = TurnAsk {
            system: None,
            tools: Vec::new(),
            ..turn
        };
        let mut b = anthropic::body("m", 100, &plain);
        anthropic::breakpoints(&mut b, PromptCache::FiveMinutes);
        assert_eq!(b, anthropic::body("m", 100, &plain));
    }

    #[test]
    fn cached_tokens_are_read_apart_from_plain_input() {
        let u = openai::usage(&json!({"prompt_tokens": 2000, "completion_tokens": 9,
            "prompt_tokens_details": {"cached_tokens": 1536}}))
        .expect("usage");
        assert_eq!(
            (u.input_tokens, u.cache_read_tokens, u.output_tokens),
            (464, 1536, 9)
        );
        assert_eq!(u.input_tokens(), 2000);
        let u = anthropic::usage(&json!({"input_tokens": 12, "output_tokens": 40,
            "cache_read_input_tokens": 2400, "cache_creation_input_tokens": 300}))
        .expect("usage");
        assert_eq!(
            (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens),
            (12, 2400, 300)
        );
        // A provider that reports no cache fields: all input is plain.
        let u = openai::usage(&json!({"prompt_tokens": 7, "completion_tokens": 2})).expect("usage");
        assert_eq!((u.input_tokens, u.cache_read_tokens), (7, 0));
        assert_eq!(anthropic::usage(&json!({"input_tokens": 7})), None);
        assert!(anthropic::answer(&json!({"content": []})).is_err());
    }
}
