//! The request protocol, defined once: every kind of question the VM asks while a program
//! runs, what each carries, and the answer each takes. The journal, the host protocols
//! (stdio, command), the drivers and the trace all use these types, so a new kind is one
//! line in `protocol!`'s invocation below and the compiler then points at every `match`
//! that must learn it.
//!
//! On the wire a request is `{"id": "0:3", "site": "prog:12", "kind": "session", ...fields}`
//! and a reply is `{"id": "0:3", "kind": "session", "answer": ...}` or
//! `{"id": "0:3", "kind": "session", "error": "why"}`, optionally with
//! `"usage": {"input_tokens": N, "output_tokens": N}` (and, when there are any,
//! `cache_read_tokens`, `cache_write_tokens`, `from_memo`, `asked`, `cost`).

mod asks;
mod permission;
mod tools;
mod turns;

pub use crate::id::{BadId, Lineage, RequestId, Step};
pub use asks::*;
pub use permission::*;
pub use tools::*;
pub use turns::*;

use crate::value::Value;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// Who answers a kind of request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Party {
    /// A model (through a driver).
    Model,
    /// A person (a flag, a terminal prompt, or the host of the stdio protocol).
    Person,
    /// The VM itself (a tool call it runs); journaled, never sent to anyone.
    Vm,
}

macro_rules! protocol {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal ($ask:ty) -> $answer:ty, by $party:ident; )*) => {
        /// What is asked: one variant per kind, carrying the kind's fields.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        pub enum Ask {
            $( $(#[$doc])* #[serde(rename = $name)] $variant($ask), )*
        }

        /// A kind of request.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Kind {
            $( $(#[$doc])* #[serde(rename = $name)] $variant, )*
        }

        /// An answer: one variant per kind, carrying that kind's answer.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Answer {
            $( $(#[$doc])* $variant($answer), )*
        }

        impl Kind {
            /// Every kind, in the order they are defined.
            pub const ALL: &'static [Kind] = &[ $( Kind::$variant, )* ];

            /// The kind's name on the wire (`session`, `evaluate`, ...).
            pub fn as_str(self) -> &'static str {
                match self { $( Kind::$variant => $name, )* }
            }

            /// Who answers it.
            pub fn party(self) -> Party {
                match self { $( Kind::$variant => Party::$party, )* }
            }
        }

        impl Ask {
            /// Its kind.
            pub fn kind(&self) -> Kind {
                match self { $( Ask::$variant(_) => Kind::$variant, )* }
            }
        }

        impl Answer {
            /// Its kind.
            pub fn kind(&self) -> Kind {
                match self { $( Answer::$variant(_) => Kind::$variant, )* }
            }

            /// Writes the answer's content (without its kind).
            fn serialize_content<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self { $( Answer::$variant(a) => a.serialize(s), )* }
            }

            /// The answer's content (without its kind) as JSON: what [`Answer::from_content`]
            /// reads back.
            pub fn to_content(&self) -> Result<serde_json::Value, serde_json::Error> {
                match self { $( Answer::$variant(a) => serde_json::to_value(a), )* }
            }

            /// An answer of `kind` from its JSON content.
            pub fn from_content(kind: Kind, content: serde_json::Value) -> Result<Answer, serde_json::Error> {
                match kind { $( Kind::$variant => serde_json::from_value(content).map(Answer::$variant), )* }
            }
        }
    };
}

protocol! {
    /// Run a session: a subagent does a task and answers with text.
    Session = "session" (SessionAsk) -> SessionAnswer, by Model;
    /// Judge a discretion condition: true or false.
    Evaluate = "evaluate" (EvaluateAsk) -> bool, by Model;
    /// Pick one of a choice's options: its 0-based index.
    Choose = "choose" (ChooseAsk) -> usize, by Model;
    /// Turn text into a structure: a value of the shape asked.
    Convert = "convert" (ConvertAsk) -> Value, by Model;
    /// Give a mid-program input: a value.
    Input = "input" (InputAsk) -> Value, by Person;
    /// One model turn of a session the VM runs as an agent loop: the model's next message.
    Turn = "turn" (TurnAsk) -> TurnAnswer, by Model;
    /// A tool call of a session's agent loop, run by the VM: the tool's output.
    Tool = "tool" (ToolCall) -> ToolOutput, by Vm;
    /// May an agent use a capability its permissions say `prompt` for: yes, no or always.
    Permission = "permission" (PermissionQuestion) -> PromptAnswer, by Person;
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where in the program a request comes from: a module of the artifact and a source line.
/// Its text form is `{program}:{line}`, with the program named by its import path (`@a/util`)
/// when it is imported and by its name when it is the program run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Site {
    /// The module's index in the artifact (0: the program run).
    pub module: u32,
    /// 1-based source line (0 if unknown).
    pub line: u32,
    /// How the module is named in the text form.
    pub program: Arc<str>,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.program, self.line)
    }
}

impl Serialize for Site {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Request {
    /// Its stable id.
    pub id: RequestId,
    /// Where in the program it comes from.
    pub site: Site,
    /// What is asked.
    #[serde(flatten)]
    pub ask: Ask,
}

impl Request {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        self.ask.kind()
    }
}

/// Why a request failed (after its answerer's own handling, such as HTTP retries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure(pub String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

/// Tokens a provider reports, and what they cost when the model's price is known; and,
/// while a memo is kept, how many model requests it answered and how many were asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read, other than those read from or written to the provider's prompt cache.
    pub input_tokens: u64,
    /// Tokens written.
    pub output_tokens: u64,
    /// Input tokens the provider read from its prompt cache (billed at its own, lower
    /// price).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Input tokens the provider wrote to its prompt cache (billed at its own price).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Model requests answered from the memo, without a call.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub from_memo: u64,
    /// Model requests sent to the provider while a memo was kept (those it could not
    /// answer).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub asked: u64,
    /// Their cost in US dollars (none when the model has no price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Tokens read and written, cached input included.
    pub fn tokens(&self) -> u64 {
        self.input_tokens() + self.output_tokens
    }

    /// Every token read: plain, read from the cache and written to it.
    pub fn input_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    /// The usage of `input` plain input tokens and `output` output tokens, unpriced.
    pub fn plain(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.from_memo += other.from_memo;
        self.asked += other.asked;
        self.cost = match (self.cost, other.cost) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
    }
}

/// What came back for a request: an answer of its kind, or a failure; and the tokens spent
/// on it when the answerer reports them.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The request answered.
    pub id: RequestId,
    /// The kind of the request (an answer's own kind; kept for failures too).
    pub kind: Kind,
    /// The answer, or why there is none.
    pub outcome: Result<Answer, Failure>,
    /// Tokens spent, over every exchange the answer took.
    pub usage: Option<Usage>,
}

impl Reply {
    /// The reply `answer` to request `id`.
    pub fn answer(id: RequestId, answer: Answer) -> Reply {
        Reply {
            id,
            kind: answer.kind(),
            outcome: Ok(answer),
            usage: None,
        }
    }

    /// The failure of request `id` of kind `kind`.
    pub fn failed(id: RequestId, kind: Kind, why: impl Into<String>) -> Reply {
        Reply {
            id,
            kind,
            outcome: Err(Failure(why.into())),
            usage: None,
        }
    }

    /// Reads a reply from its wire form.
    pub fn from_json(json: serde_json::Value) -> Result<Reply, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Wire {
            id: RequestId,
            kind: Kind,
            #[serde(default)]
            answer: Option<serde_json::Value>,
            #[serde(default)]
            error: Option<String>,
            #[serde(default)]
            usage: Option<Usage>,
        }
        let w: Wire = serde_json::from_value(json).map_err(|e| e.to_string())?;
        let outcome = match (w.answer, w.error) {
            (Some(a), None) => Ok(Answer::from_content(w.kind, a)
                .map_err(|e| format!("not a `{}` answer: {e}", w.kind))?),
            (None, Some(e)) => Err(Failure(e)),
            _ => return Err("a reply has exactly one of `answer` and `error`".into()),
        };
        Ok(Reply {
            id: w.id,
            kind: w.kind,
            outcome,
            usage: w.usage,
        })
    }
}

impl Serialize for Reply {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Content<'a>(&'a Answer);
        impl Serialize for Content<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.0.serialize_content(s)
            }
        }
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("kind", &self.kind)?;
        match &self.outcome {
            Ok(a) => m.serialize_entry("answer", &Content(a))?,
            Err(e) => m.serialize_entry("error", &e.0)?,
        }
        if let Some(u) = &self.usage {
            m.serialize_entry("usage", u)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> RequestId {
        RequestId::new(Lineage::root(), n)
    }

    #[test]
    fn every_answer_kind_round_trips_through_its_wire_form() {
        let replies = vec![
            Reply::answer(id(0), Answer::Session(SessionAnswer::text("hello"))),
            Reply::answer(
                id(1),
                Answer::Session(SessionAnswer {
                    text: "t".into(),
                    memory: Some("m".into()),
                }),
            ),
            Reply::answer(id(2), Answer::Evaluate(true)),
            Reply::answer(id(3), Answer::Choose(2)),
            Reply::answer(id(4), Answer::Convert(Value::Int(7))),
            Reply::answer(id(5), Answer::Input(Value::text("x"))),
            Reply {
                usage: Some(Usage {
                    cost: Some(0.5),
                    cache_read_tokens: 9,
                    from_memo: 1,
                    ..Usage::plain(3, 4)
                }),
                ..Reply::failed(id(6), Kind::Session, "boom")
            },
        ];
        for r in replies {
            let json = serde_json::to_value(&r).expect("serialize");
            assert_eq!(json["kind"], r.kind.as_str());
            assert_eq!(Reply::from_json(json.clone()), Ok(r), "{json}");
        }
        // Every kind is covered above or in the agent loop's round trip below.
        assert_eq!(Kind::ALL.len(), 8);
    }

    #[test]
    fn the_agent_loops_kinds_round_trip() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "read_file".into(),
            arguments: serde_json::json!({"path": "README.md"}),
        };
        let replies = vec![
            Reply::answer(
                id(0).step(Step::Turn(0)),
                Answer::Turn(TurnAnswer {
                    text: "Reading it.".into(),
                    tool_calls: vec![call],
                    stop: Stop::ToolUse,
                    repeated: None,
                }),
            ),
            Reply::answer(
                id(0).step(Step::Call { turn: 0, call: 0 }),
                Answer::Tool(ToolOutput::ok("     1\t# Title")),
            ),
            Reply::answer(
                id(0).step(Step::Grant { turn: 1, call: 0 }),
                Answer::Permission(PromptAnswer::Always),
            ),
        ];
        for r in replies {
            let json = serde_json::to_value(&r).expect("serialize");
            assert_eq!(Reply::from_json(json.clone()), Ok(r), "{json}");
        }
    }

    #[test]
    fn wire_forms_are_as_documented() {
        let r = Reply::answer(id(2), Answer::Evaluate(false));
        assert_eq!(
            serde_json::to_string(&r).expect("json"),
            r#"{"id":"0:2","kind":"evaluate","answer":false}"#
        );
        let req = Request {
            id: id(1),
            site: Site {
                module: 0,
                line: 4,
                program: Arc::from("prog"),
            },
            ask: Ask::Choose(ChooseAsk {
                criteria: "which".into(),
                options: vec!["a".into(), "b".into()],
                context: vec![Labelled::new("draft", "text")],
            }),
        };
        assert_eq!(
            serde_json::to_string(&req).expect("json"),
            r#"{"id":"0:1","site":"prog:4","kind":"choose","criteria":"which","options":["a","b"],"context":[{"label":"draft","value":"text"}]}"#
        );
    }

    #[test]
    fn malformed_replies_are_refused_with_a_reason() {
        for (json, why) in [
            (r#"{"id":"0:1","kind":"evaluate"}"#, "exactly one"),
            (
                r#"{"id":"0:1","kind":"evaluate","answer":true,"error":"x"}"#,
                "exactly one",
            ),
            (
                r#"{"id":"0:1","kind":"evaluate","answer":"yes"}"#,
                "evaluate",
            ),
            (r#"{"id":"0:1","kind":"dance","answer":1}"#, "dance"),
            (r#"{"id":"zero","kind":"choose","answer":1}"#, "zero"),
            (r#"{"id":"0:1","kind":"choose","answer":1,"x":2}"#, "x"),
        ] {
            let e = Reply::from_json(serde_json::from_str(json).expect("json")).expect_err(json);
            assert!(e.contains(why), "{json}: {e}");
        }
    }
}
