//! The agent loop's part of the protocol: a session run by the VM is a conversation of model
//! turns and tool calls. A turn asks the model for its next message given the conversation
//! so far and the tools on offer; each tool call the message makes is run by the VM and its
//! output joins the conversation.

use super::{ToolCall, ToolSpec};
use serde::{Deserialize, Serialize};

/// One message of a session's conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// The task (and later a nudge from the VM).
    User {
        /// Its text.
        content: String,
    },
    /// What the model said: text, and the tools it wants called.
    Assistant {
        /// Its text (possibly empty when it only calls tools).
        text: String,
        /// The calls it makes, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// A tool call's output.
    Tool {
        /// The call it answers (the provider's id).
        call_id: String,
        /// The tool's name.
        name: String,
        /// The output.
        content: String,
        /// Whether the call failed or was refused.
        is_error: bool,
    },
}

/// One model turn: everything the model sees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnAsk {
    /// The agent whose session this is.
    #[serde(default)]
    pub agent: Option<String>,
    /// `sonnet`, `opus`, `haiku` or a provider id.
    pub model: Option<String>,
    /// The system prompt: the agent's prompt and its skills' instructions.
    pub system: Option<String>,
    /// The conversation so far, oldest first; it ends with a user message or tool outputs.
    pub messages: Vec<Message>,
    /// The tools on offer.
    pub tools: Vec<ToolSpec>,
    /// The model may not call them this turn (it was asked for a plain answer): the tools
    /// stay declared, as a conversation holding tool calls requires, but the request says
    /// `tool_choice: none`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tools_off: bool,
}

/// Why the model stopped writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// It finished its message.
    End,
    /// It wants tools called.
    ToolUse,
    /// It ran into its output limit: the message is cut off.
    Length,
    /// It fell into a loop, writing the same text again and again, and the VM hung up: the
    /// message is cut after the first copy (see [`TurnAnswer::repeated`]).
    Repeating,
    /// It went astray before answering, and the VM hung up: it began writing the tool
    /// declarations back (the `<tools>` block of its chat template), or a call, as text, of
    /// a tool it does not have. The message is what it wrote.
    Astray,
}

/// The model's message for a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnAnswer {
    /// Its text.
    pub text: String,
    /// The tool calls it makes (none ends the session).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped.
    pub stop: Stop,
    /// What it kept repeating, when it stopped for that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeated: Option<String>,
}

impl TurnAnswer {
    /// A message that stopped for `stop` (not for repeating itself).
    pub fn new(text: String, tool_calls: Vec<ToolCall>, stop: Stop) -> TurnAnswer {
        TurnAnswer {
            text,
            tool_calls,
            stop,
            repeated: None,
        }
    }

    /// A plain answer that ends the session: text, no tool calls.
    pub fn text(text: String) -> TurnAnswer {
        TurnAnswer::new(text, Vec::new(), Stop::End)
    }
}
