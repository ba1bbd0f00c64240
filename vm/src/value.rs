//! Runtime values. Cloning is cheap: text, lists and records are shared (`Arc`), and a list
//! appended to while nothing else holds it is extended in place.

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
    /// What went wrong.
    pub message: String,
    /// Where it was raised: module name and source line.
    pub location: Option<(String, u32)>,
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
            other => {
                let mut out = String::new();
                other.write_json(&mut out);
                out
            }
        }
    }

    /// Writes the value as compact JSON. Unlike [`Value::to_json`] (whose objects sort their
    /// keys), records are written in their own key order, the order the program gave.
    fn write_json(&self, out: &mut String) {
        match self {
            Value::List(l) => {
                out.push('[');
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write_json(out);
                }
                out.push(']');
            }
            Value::Record(r) => {
                out.push('{');
                for (i, (k, v)) in r.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(k.to_string()).to_string());
                    out.push(':');
                    v.write_json(out);
                }
                out.push('}');
            }
            other => out.push_str(&other.to_json().to_string()),
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
