//! Streamed answers, assembled. Both APIs stream a reply as server-sent events; an
//! [`Assembly`] takes them one at a time and builds exactly the message and usage the whole
//! response would have held, so that journals, resumes and replays do not depend on whether
//! a reply streamed.
//!
//! How each API's events read is its dialect's ([`super`]); the assembly keeps
//! what they add up to: the text, the tool calls by the provider's index, the stop reason
//! and the usage reported so far.
//!
//! Every fault (an event that is not JSON, an `error` event, anything after the end, a stream
//! that stops before the end) is an error the driver treats like a 5xx: the turn is tried
//! again, and a half answer is never taken for a whole one.

use super::{parse_arguments, Dialect};
use prose_machine::protocol::ToolCall;
use prose_machine::protocol::{TurnAnswer, Usage};
use serde_json::Value;

/// What one event added.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Added {
    /// Text of the answer.
    pub text: String,
    /// Whether it carried content of any kind (text or a tool call's piece).
    pub content: bool,
}

/// A tool call as its pieces arrive.
#[derive(Debug, Default)]
pub struct PartialCall {
    /// The provider's id of the call.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments' JSON text so far.
    pub arguments: String,
    /// Anthropic: the `input` of `content_block_start`, used when no JSON pieces follow.
    pub input: Option<Value>,
}

/// A streamed answer being put together.
pub struct Assembly {
    dialect: &'static dyn Dialect,
    text: String,
    /// Tool calls by the provider's index (OpenAI's `index`, Anthropic's block index).
    calls: Vec<(u64, PartialCall)>,
    /// The provider's stop or finish reason, once given.
    reason: Option<String>,
    /// The provider's `usage` as reported so far (later reports' fields over earlier ones').
    usage: serde_json::Map<String, Value>,
    ended: bool,
}

impl Assembly {
    /// Nothing received yet.
    pub fn new(dialect: &'static dyn Dialect) -> Assembly {
        Assembly {
            dialect,
            text: String::new(),
            calls: Vec::new(),
            reason: None,
            usage: serde_json::Map::new(),
            ended: false,
        }
    }

    /// The answer's text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the stream said it is complete.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The usage so far, when the provider said its input tokens before the end
    /// (Anthropic): the output tokens are those reported, or none.
    pub fn input_usage(&self) -> Option<Usage> {
        let mut u = self.usage.clone();
        for out in ["output_tokens", "completion_tokens"] {
            u.entry(out).or_insert(0.into());
        }
        self.usage_of(&Value::Object(u))
    }

    /// Takes the fields of a `usage` object the provider reported.
    pub fn report(&mut self, usage: &Value) {
        if let Some(fields) = usage.as_object() {
            for (k, v) in fields {
                if !v.is_null() {
                    self.usage.insert(k.clone(), v.clone());
                }
            }
        }
    }

    fn usage_of(&self, u: &Value) -> Option<Usage> {
        self.dialect.usage(u)
    }

    /// Takes one event: its name (`event:`, if any) and its data.
    pub fn feed(&mut self, event: Option<&str>, data: &str) -> Result<Added, String> {
        if self.ended {
            return Err("the provider's stream went on after its end".into());
        }
        let dialect = self.dialect;
        dialect.feed(self, event, data)
    }

    /// The tool call at the provider's `index`, begun if new.
    pub fn call(&mut self, index: u64) -> &mut PartialCall {
        let at = match self.calls.iter().position(|(i, _)| *i == index) {
            Some(at) => at,
            None => {
                self.calls.push((index, PartialCall::default()));
                self.calls.len() - 1
            }
        };
        &mut self.calls[at].1
    }

    /// Adds the text `t` of the answer, saying so in `added`.
    pub fn push_text(&mut self, t: &str, added: &mut Added) {
        self.text.push_str(t);
        added.text.push_str(t);
        added.content |= !t.is_empty();
    }

    /// Keeps the provider's stop or finish reason.
    pub fn set_reason(&mut self, reason: &str) {
        self.reason = Some(reason.to_string());
    }

    /// The provider's stop or finish reason, once given.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// Notes that the stream said it is complete.
    pub fn end(&mut self) {
        self.ended = true;
    }

    /// The whole answer and its usage. A stream that ended before the provider said the
    /// answer was complete is an error: a half answer is never an answer.
    pub fn finish(self) -> Result<(TurnAnswer, Option<Usage>), String> {
        if !self.dialect.complete(&self) {
            return Err(format!(
                "the provider's stream stopped before the answer was complete (after {} bytes of text)",
                self.text.len()
            ));
        }
        let usage = self.usage_of(&Value::Object(self.usage.clone()));
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, (_, c))| ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: match (c.arguments.is_empty(), c.input) {
                    (true, Some(input)) => input,
                    _ => parse_arguments(&c.arguments),
                },
            })
            .collect();
        let has_calls = !tool_calls.is_empty();
        let reason = self.reason.as_deref();
        let stop = self.dialect.stop(reason, has_calls);
        Ok((TurnAnswer::new(self.text, tool_calls, stop), usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::chat::dialect::{self, Provider};
    use prose_machine::protocol::Stop;
    use serde_json::json;

    fn feed_all(api: Provider, events: &[(Option<&str>, Value)]) -> Assembly {
        let mut a = Assembly::new(dialect::of(api));
        for (name, data) in events {
            a.feed(*name, &data.to_string()).expect("event");
        }
        a
    }

    #[test]
    fn openai_text_and_tool_call_pieces_make_the_whole_message() {
        let mut a = feed_all(
            Provider::OpenAi,
            &[
                (
                    None,
                    json!({"choices": [{"delta": {"role": "assistant", "content": null}}]}),
                ),
                (
                    None,
                    json!({"choices": [{"delta": {"content": "Let me "}}]}),
                ),
                (None, json!({"choices": [{"delta": {"content": "look."}}]})),
                (
                    None,
                    json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "read_file", "arguments": ""}}]}}]}),
                ),
                (
                    None,
                    json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]}}]}),
                ),
                (
                    None,
                    json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "th\": \"a.md\"}"}}]}}]}),
                ),
                (
                    None,
                    json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
                ),
                (
                    None,
                    json!({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 9,
                        "prompt_tokens_details": {"cached_tokens": 32}}}),
                ),
            ],
        );
        a.feed(None, "[DONE]").expect("done");
        assert!(a.feed(None, "{}").is_err(), "nothing after [DONE]");
        let (answer, usage) = a.finish().expect("complete");
        assert_eq!(answer.text, "Let me look.");
        assert_eq!(answer.stop, Stop::ToolUse);
        assert_eq!(answer.tool_calls[0].name, "read_file");
        assert_eq!(answer.tool_calls[0].arguments, json!({"path": "a.md"}));
        // The cached part of the prompt is kept apart.
        assert_eq!(
            usage.map(|u| (u.input_tokens, u.cache_read_tokens, u.output_tokens)),
            Some((8, 32, 9))
        );
    }

    #[test]
    fn anthropic_blocks_make_the_whole_message() {
        let a = feed_all(
            Provider::Anthropic,
            &[
                (
                    Some("message_start"),
                    json!({"type": "message_start", "message": {"usage": {"input_tokens": 25, "output_tokens": 1,
                        "cache_read_input_tokens": 2400, "cache_creation_input_tokens": 50}}}),
                ),
                (
                    Some("content_block_start"),
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                ),
                (Some("ping"), json!({"type": "ping"})),
                (
                    Some("content_block_delta"),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking"}}),
                ),
                (
                    Some("content_block_start"),
                    json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "grep", "input": {}}}),
                ),
                (
                    Some("content_block_delta"),
                    json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"pattern\":"}}),
                ),
                (
                    Some("content_block_delta"),
                    json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": " \"fn\"}"}}),
                ),
                (
                    Some("message_delta"),
                    json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}}),
                ),
                (Some("message_stop"), json!({"type": "message_stop"})),
            ],
        );
        let (answer, usage) = a.finish().expect("complete");
        assert_eq!(answer.text, "Checking");
        assert_eq!(answer.stop, Stop::ToolUse);
        assert_eq!(answer.tool_calls[0].id, "t1");
        assert_eq!(answer.tool_calls[0].arguments, json!({"pattern": "fn"}));
        // The output of message_delta over message_start's; the cache's reads and writes
        // from message_start.
        assert_eq!(
            usage.map(|u| (
                u.input_tokens,
                u.output_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens
            )),
            Some((25, 12, 2400, 50))
        );
    }

    #[test]
    fn faults_are_errors_never_answers() {
        let mut a = Assembly::new(dialect::of(Provider::OpenAi));
        assert!(a.feed(None, "{not json").is_err());
        a.feed(
            None,
            &json!({"choices": [{"delta": {"content": "half an ans"}}]}).to_string(),
        )
        .expect("piece");
        let cut = a.finish().expect_err("cut off");
        assert!(
            cut.contains("stopped before the answer was complete"),
            "{cut}"
        );

        let mut a = Assembly::new(dialect::of(Provider::Anthropic));
        let e = a
            .feed(
                Some("error"),
                &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
                    .to_string(),
            )
            .expect_err("an error event");
        assert!(e.contains("Overloaded"), "{e}");
        let a = feed_all(
            Provider::Anthropic,
            &[(
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "partial"}}),
            )],
        );
        assert!(a.finish().is_err(), "no message_stop: not complete");
        let mut a = Assembly::new(dialect::of(Provider::Anthropic));
        a.feed(None, &json!({"type": "message_stop"}).to_string())
            .expect("stop");
        assert!(a.feed(None, &json!({"type": "ping"}).to_string()).is_err());
    }

    #[test]
    fn a_cut_off_answer_says_so() {
        let a = feed_all(
            Provider::OpenAi,
            &[(
                None,
                json!({"choices": [{"delta": {"content": "and so"}, "finish_reason": "length"}]}),
            )],
        );
        let (answer, usage) = a.finish().expect("complete, if cut by the limit");
        assert_eq!(answer.stop, Stop::Length);
        assert_eq!(usage, None);
    }
}
