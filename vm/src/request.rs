//! Requests the VM hands to a driver, and the replies that resume the fiber that asked.

use crate::value::Value;
use bytecode_spec::{Backoff, Shape};
use serde::Serialize;

/// A stable request id: the asking fiber's lineage and its per-fiber request count, so a
/// replayed run asks the same questions under the same ids.
pub type RequestId = String;

/// Everything a driver needs for one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionRequest {
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
    pub context: Vec<(String, String)>,
    /// Permission rules: kind and values.
    pub permissions: Vec<(String, Vec<String>)>,
    /// Skills.
    pub skills: Vec<String>,
    /// The agent is persistent: the driver may return a memory update with the answer.
    pub persistent: bool,
    /// The agent's memory, sent with `resume:` (a fresh `session:` starts without it).
    pub memory: Option<String>,
    /// Extra attempts after a failure.
    pub retry: u32,
    /// Delay policy between attempts.
    #[serde(skip)]
    pub backoff: Backoff,
}

/// What is asked.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RequestKind {
    /// Run a session; the answer is text.
    Session(Box<SessionRequest>),
    /// Judge a discretion condition; the answer is a boolean.
    Evaluate {
        /// The condition.
        condition: String,
        /// The most recent answer this fiber received, for context.
        context: Option<String>,
    },
    /// Pick one option; the answer is a 0-based index.
    Choose {
        /// What to decide on.
        criteria: String,
        /// The option labels.
        options: Vec<String>,
    },
    /// Ask the host for a mid-program input; the answer is a value.
    Input {
        /// The input's name.
        name: String,
        /// Its question or description.
        question: String,
    },
    /// Turn text into a structure; the answer is a value of that shape.
    Convert {
        /// The text.
        text: String,
        /// The shape wanted.
        #[serde(serialize_with = "shape_name")]
        shape: Shape,
    },
}

fn shape_name<S: serde::Serializer>(shape: &Shape, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match shape {
        Shape::List => "list",
        Shape::Record => "record",
        Shape::Int => "integer",
        Shape::Bool => "boolean",
    })
}

/// One request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Request {
    /// Its stable id.
    pub id: RequestId,
    /// Where in the program it comes from: `module:line`.
    pub site: String,
    /// What is asked.
    #[serde(flatten)]
    pub kind: RequestKind,
}

/// A driver's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// A session's answer.
    Text(String),
    /// A persistent agent's answer with its updated memory (which replaces the old one).
    Remembered {
        /// The answer.
        text: String,
        /// The agent's memory after this session.
        memory: String,
    },
    /// An evaluation's verdict.
    Bool(bool),
    /// A choice's 0-based option index.
    Choice(usize),
    /// An input's or a conversion's value.
    Value(Value),
    /// The request failed (a session error after the driver's own handling).
    Failed(String),
}
