//! Runtime values. Cloning is cheap: text, lists and records are shared (`Arc`), and a list
//! appended to while nothing else holds it is extended in place.

use crate::protocol::RequestId;
use prosec::diagnostics::Code;
use std::sync::Arc;

/// A value in a register.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Value {
    /// `null`, and every register before it is written.
    #[default]
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A decimal number.
    Float(f64),
    /// Text (session answers are text).
    Text(Arc<str>),
    /// A list.
    List(Arc<Vec<Value>>),
    /// A record with ordered keys.
    Record(Arc<Vec<(Arc<str>, Value)>>),
    /// An error caught by `catch as err`.
    Error(Arc<ErrorValue>),
    /// A running fork group (only `Join` reads it).
    Group(u32),
}

/// What an error carries.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorValue {
    /// Its stable code (runtime codes are listed with the compiler's).
    pub code: Code,
    /// What went wrong.
    pub message: String,
    /// Where it was raised: the module's index in the artifact and the source line.
    pub location: Option<(u32, u32)>,
    /// The request whose failure it is, when a request failed.
    pub request: Option<RequestId>,
}

impl ErrorValue {
    /// An error with `code` and `message`, located where it is raised.
    pub fn new(code: Code, message: impl Into<String>) -> ErrorValue {
        ErrorValue {
            code,
            message: message.into(),
            location: None,
            request: None,
        }
    }
}

impl Value {
    /// Text from a string.
    pub fn text(s: impl Into<Arc<str>>) -> Value {
        Value::Text(s.into())
    }

    /// A record from pairs.
    pub fn record(pairs: Vec<(Arc<str>, Value)>) -> Value {
        Value::Record(Arc::new(pairs))
    }

    /// The kind of value, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Text(_) => "text",
            Value::List(_) => "a list",
            Value::Record(_) => "a record",
            Value::Error(_) => "an error",
            Value::Group(_) => "a fork group",
        }
    }

    /// A field of a record (null when absent).
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Record(r) => r.iter().find(|(k, _)| &**k == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value as a person or a model reads it: text verbatim, structures as JSON (records
    /// keep their keys in order).
    pub fn display(&self) -> String {
        match self {
            Value::Text(t) => t.to_string(),
            Value::Null => "null".into(),
            Value::Error(e) => e.message.clone(),
            other => serde_json::to_string(other).unwrap_or_default(),
        }
    }

    /// The value as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null | Value::Group(_) => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(J::Number)
                .unwrap_or(J::Null),
            Value::Text(t) => J::String(t.to_string()),
            Value::List(l) => J::Array(l.iter().map(Value::to_json).collect()),
            Value::Record(r) => J::Object(
                r.iter()
                    .map(|(k, v)| (k.to_string(), v.to_json()))
                    .collect(),
            ),
            Value::Error(e) => serde_json::json!({ "error": e.message }),
        }
    }

    /// A value from JSON.
    pub fn from_json(j: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match j {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(0.0)),
            },
            J::String(s) => Value::text(s.as_str()),
            J::Array(a) => Value::List(Arc::new(a.iter().map(Value::from_json).collect())),
            J::Object(o) => Value::record(
                o.iter()
                    .map(|(k, v)| (Arc::from(k.as_str()), Value::from_json(v)))
                    .collect(),
            ),
        }
    }
}

impl serde::Serialize for Value {
    /// As JSON, records keeping their key order (fork groups and errors as in
    /// [`Value::to_json`]).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Value::Null | Value::Group(_) => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::Float(f) if f.is_finite() => s.serialize_f64(*f),
            Value::Float(_) => s.serialize_unit(),
            Value::Text(t) => s.serialize_str(t),
            Value::List(l) => {
                let mut seq = s.serialize_seq(Some(l.len()))?;
                for v in l.iter() {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Value::Record(r) => {
                let mut map = s.serialize_map(Some(r.len()))?;
                for (k, v) in r.iter() {
                    map.serialize_entry(&**k, v)?;
                }
                map.end()
            }
            Value::Error(e) => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("error", &e.message)?;
                map.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        serde_json::Value::deserialize(d).map(|j| Value::from_json(&j))
    }
}
