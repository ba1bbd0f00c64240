//! The tools of a session's agent loop as the protocol carries them: what is offered to the
//! model ([`ToolSpec`]), what the model asks to run ([`ToolCall`]) and what comes back
//! ([`ToolOutput`]). Plain data: running tools is the runtime's business.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as offered to a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Its name (letters, digits, `_` and `-`, at most 64 characters, as both APIs require).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// A JSON schema of its arguments: an object schema, usable as OpenAI's
    /// `tools[].function.parameters` and Anthropic's `tools[].input_schema`.
    pub input_schema: Value,
}

/// A model's request to run a tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (echoed with the result).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments (a JSON object).
    pub arguments: Value,
}

impl ToolCall {
    /// The id prefix of a call the model wrote in its text (or as a structured turn's
    /// step) rather than through the API's tool calling: no provider knows its id, so its
    /// result goes back to the model as text.
    pub const IN_TEXT: &'static str = "text_call_";

    /// A call written in the model's text, with the id `text_call_{tag}`.
    pub fn in_text(tag: &str, name: String, arguments: Value) -> ToolCall {
        ToolCall {
            id: format!("{}{tag}", ToolCall::IN_TEXT),
            name,
            arguments,
        }
    }

    /// Whether the model wrote this call in its text.
    pub fn is_in_text(&self) -> bool {
        self.id.starts_with(ToolCall::IN_TEXT)
    }
}

/// What a tool call returns to the model: plain text, and whether it is an error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The text the model reads.
    pub content: String,
    /// Whether the call failed (refused, bad arguments, a failing command, ...).
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful output.
    pub fn ok(content: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: content.into(),
            is_error: false,
        }
    }

    /// An error output.
    pub fn error(content: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: content.into(),
            is_error: true,
        }
    }
}

impl From<Result<String, String>> for ToolOutput {
    fn from(result: Result<String, String>) -> ToolOutput {
        match result {
            Ok(text) => ToolOutput::ok(text),
            Err(text) => ToolOutput::error(text),
        }
    }
}
