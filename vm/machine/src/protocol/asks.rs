//! What each kind of request carries, and what each kind of answer is made of. The kinds
//! themselves, and which answer goes with which question, are listed once in
//! [`super::protocol!`]'s invocation.

use bytecode_spec::{Backoff, Shape};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A named piece of text given to a model with a question: a context value, a binding a
/// condition names, the latest answer of a loop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Labelled {
    /// What it is (a variable's name, or a description).
    pub label: String,
    /// Its text.
    pub value: String,
}

impl Labelled {
    /// `value` under `label`.
    pub fn new(label: impl Into<String>, value: impl Into<String>) -> Labelled {
        Labelled {
            label: label.into(),
            value: value.into(),
        }
    }
}

/// One rule of an agent's `permissions:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRule {
    /// `read`, `write`, `execute`, `bash`, `network`, or another key as written.
    pub kind: String,
    /// Glob patterns, or the one word `allow`, `deny` or `prompt`.
    pub values: Vec<String>,
}

/// Everything a session needs: one task for a subagent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionAsk {
    /// `resume:` a persistent agent (with its memory) rather than a fresh session.
    pub resume: bool,
    /// The agent's name.
    pub agent: Option<String>,
    /// A short label for traces.
    pub label: Option<String>,
    /// The task.
    pub prompt: String,
    /// The agent's prompt (the system prompt).
    pub system: Option<String>,
    /// `sonnet`, `opus`, `haiku` or a provider id.
    pub model: Option<String>,
    /// Labelled context values, rendered as text.
    pub context: Vec<Labelled>,
    /// Permission rules.
    pub permissions: Vec<PermissionRule>,
    /// Skills.
    pub skills: Vec<String>,
    /// The tools the session may use (for agent hosts that run sessions themselves; the VM's
    /// own agent loop offers them with their schemas).
    #[serde(default)]
    pub tools: Arc<[String]>,
    /// The tools the agent's `tools:` names (empty for `tools: none`); none when it says
    /// nothing, or `all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_tools: Option<Vec<String>>,
    /// The agent is persistent: the answer may carry its updated memory.
    pub persistent: bool,
    /// The agent's memory, sent with `resume:` (a fresh `session:` starts without it).
    pub memory: Option<String>,
    /// Extra attempts after a failure.
    pub retry: u32,
    /// Delay policy between attempts (the runner's business, not the answerer's).
    #[serde(skip, default = "no_backoff")]
    pub backoff: Backoff,
}

fn no_backoff() -> Backoff {
    Backoff::None
}

/// A session's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionAnswer {
    /// The answer text.
    pub text: String,
    /// A persistent agent's memory after the session (it replaces the old one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

impl SessionAnswer {
    /// An answer without a memory update.
    pub fn text(text: impl Into<String>) -> SessionAnswer {
        SessionAnswer {
            text: text.into(),
            memory: None,
        }
    }
}

/// A discretion condition to judge true or false.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvaluateAsk {
    /// The condition, interpolated.
    pub condition: String,
    /// What the judgment sees besides the condition.
    pub context: Vec<Labelled>,
}

/// A choice among labelled options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChooseAsk {
    /// What to decide on.
    pub criteria: String,
    /// The option labels, in order.
    pub options: Vec<String>,
    /// What the judgment sees besides the criteria.
    pub context: Vec<Labelled>,
}

/// A mid-program input, asked of a person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputAsk {
    /// The input's name.
    pub name: String,
    /// Its question or description.
    pub question: String,
}

/// Text to turn into a structure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvertAsk {
    /// The text.
    pub text: String,
    /// The shape wanted.
    #[serde(with = "shape_name")]
    pub shape: Shape,
}

/// Shapes by the names the protocol uses: `list`, `record`, `integer`, `boolean`.
pub mod shape_name {
    use bytecode_spec::Shape;
    use serde::{Deserialize, Deserializer, Serializer};

    /// The protocol's name for `shape`.
    pub fn name(shape: Shape) -> &'static str {
        match shape {
            Shape::List => "list",
            Shape::Record => "record",
            Shape::Int => "integer",
            Shape::Bool => "boolean",
        }
    }

    /// Writes a shape as its name.
    pub fn serialize<S: Serializer>(shape: &Shape, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(name(*shape))
    }

    /// Reads a shape from its name.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Shape, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        [Shape::List, Shape::Record, Shape::Int, Shape::Bool]
            .into_iter()
            .find(|sh| name(*sh) == s)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown shape {s:?} (want list, record, integer or boolean)"
                ))
            })
    }
}
