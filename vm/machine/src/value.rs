//! Runtime values. Cloning is cheap: text, lists and records are shared (`Arc`), and a list
//! appended to while nothing else holds it is extended in place.
//!
//! A program from an untrusted source must not be able to exhaust memory or the stack with
//! its values, so the machine keeps every value within [`Bounds`]: a text's bytes, a list's
//! or record's entries, and how deeply lists and records nest. Values share their parts, so
//! a small amount of memory can stand for a huge value (`l = [l, l]` twenty times); every
//! walk over a value ([`Value::within`], [`Value::render`], [`Value::equals`]) is iterative
//! and stops as soon as it has seen more than the bound allows.

use crate::id::RequestId;
use bytecode_spec::Code;
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

/// Bytes a list element or record field counts for besides what it holds: the slot it takes.
pub const ENTRY_BYTES: usize = std::mem::size_of::<Value>();

/// How large the values of a run may grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Bytes a value may take: its texts' bytes and [`ENTRY_BYTES`] per list element or
    /// record field (plus the field's name), counting a shared part each time it is reached.
    pub bytes: usize,
    /// How deeply lists and records may nest.
    pub depth: usize,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            bytes: 256 << 20,
            depth: 1000,
        }
    }
}

/// A bound a value would go past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    /// More bytes than this.
    Bytes(usize),
    /// Deeper nesting than this.
    Depth(usize),
}

impl Exceeded {
    /// The runtime error (E213) for `what` going past this bound.
    pub fn error(self, what: &str) -> ErrorValue {
        match self {
            Exceeded::Bytes(max) => ErrorValue::new(
                Code::E213,
                format!(
                    "{what} would be larger than {} (the value size limit, --max-value-size)",
                    human_bytes(max)
                ),
            ),
            Exceeded::Depth(max) => ErrorValue::new(
                Code::E213,
                format!("{what} would nest lists and records more than {max} deep"),
            ),
        }
    }
}

/// `n` bytes for people: `512 MiB`, `4 KiB`, `100 bytes`.
pub fn human_bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// A writer that refuses to hold more than `max` bytes.
struct Capped {
    out: Vec<u8>,
    max: usize,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len() + buf.len() > self.max {
            return Err(std::io::Error::other("over the limit"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Value {
    /// Checks that this value stays within `bounds`, walking it without recursion and
    /// stopping at the first bound passed.
    pub fn within(&self, bounds: Bounds) -> Result<(), Exceeded> {
        let mut bytes = 0usize;
        let mut stack: Vec<(&Value, usize)> = vec![(self, 0)];
        while let Some((v, depth)) = stack.pop() {
            let (own, children): (usize, &mut dyn Iterator<Item = &Value>) = match v {
                Value::Text(t) => (t.len(), &mut std::iter::empty()),
                Value::Error(e) => (e.message.len(), &mut std::iter::empty()),
                Value::List(l) => (l.len().saturating_mul(ENTRY_BYTES), &mut l.iter()),
                Value::Record(r) => (
                    r.iter()
                        .fold(0usize, |n, (k, _)| n.saturating_add(k.len() + ENTRY_BYTES)),
                    &mut r.iter().map(|(_, v)| v),
                ),
                _ => (0, &mut std::iter::empty()),
            };
            bytes = bytes.saturating_add(own);
            if bytes > bounds.bytes {
                return Err(Exceeded::Bytes(bounds.bytes));
            }
            for c in children {
                if matches!(c, Value::List(_) | Value::Record(_)) {
                    if depth + 1 >= bounds.depth {
                        return Err(Exceeded::Depth(bounds.depth));
                    }
                    stack.push((c, depth + 1));
                } else {
                    stack.push((c, depth));
                }
            }
        }
        Ok(())
    }

    /// The value as a person or a model reads it, as [`Value::display`] gives it, or an error
    /// if that takes more than `max` bytes (found without writing more than `max`).
    pub fn render(&self, max: usize) -> Result<String, Exceeded> {
        let text = match self {
            Value::Text(t) => t,
            Value::Error(e) => e.message.as_str(),
            Value::Null => "null",
            other => {
                let mut w = Capped {
                    out: Vec::new(),
                    max,
                };
                serde_json::to_writer(&mut w, other).map_err(|_| Exceeded::Bytes(max))?;
                return String::from_utf8(w.out).map_err(|_| Exceeded::Bytes(max));
            }
        };
        if text.len() > max {
            return Err(Exceeded::Bytes(max));
        }
        Ok(text.to_string())
    }

    /// Whether two values are equal, as `==` says, comparing at most `budget` pairs of parts
    /// (none when the budget runs out first). Iterative, so shared parts cost time only up
    /// to the budget.
    pub fn equals(&self, other: &Value, budget: usize) -> Option<bool> {
        let mut left = budget;
        let mut stack: Vec<(&Value, &Value)> = vec![(self, other)];
        while let Some((a, b)) = stack.pop() {
            left = left.checked_sub(1)?;
            match (a, b) {
                (Value::List(x), Value::List(y)) => {
                    if x.len() != y.len() {
                        return Some(false);
                    }
                    stack.extend(x.iter().zip(y.iter()));
                }
                (Value::Record(x), Value::Record(y)) => {
                    if x.len() != y.len() || x.iter().zip(y.iter()).any(|((k, _), (j, _))| k != j) {
                        return Some(false);
                    }
                    stack.extend(x.iter().zip(y.iter()).map(|((_, v), (_, w))| (v, w)));
                }
                (a, b) => {
                    if a != b {
                        return Some(false);
                    }
                }
            }
        }
        Some(true)
    }

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
    /// keep their keys in order). Values past the default [`Bounds`] are not written out: a
    /// note says how large they are instead (the machine never hands such a value out; see
    /// [`Value::render`]).
    pub fn display(&self) -> String {
        let max = Bounds::default().bytes;
        self.render(max)
            .unwrap_or_else(|_| format!("(a value larger than {})", human_bytes(max)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: Vec<Value>) -> Value {
        Value::List(Arc::new(items))
    }

    /// A list holding the one before it twice, `n` times over: a few hundred bytes of memory
    /// standing for 2^n elements.
    fn doubled(n: usize) -> Value {
        (0..n).fold(Value::text("x"), |v, _| list(vec![v.clone(), v]))
    }

    const SMALL: Bounds = Bounds {
        bytes: 1 << 20,
        depth: 50,
    };

    #[test]
    fn within_counts_texts_entries_and_depth() {
        assert_eq!(Value::text("x".repeat(1 << 20)).within(SMALL), Ok(()));
        assert_eq!(
            Value::text("x".repeat((1 << 20) + 1)).within(SMALL),
            Err(Exceeded::Bytes(1 << 20))
        );
        let entries = (1 << 20) / ENTRY_BYTES;
        assert_eq!(list(vec![Value::Null; entries]).within(SMALL), Ok(()));
        assert!(list(vec![Value::Null; entries + 1]).within(SMALL).is_err());
        let deep = |n: usize| (0..n).fold(Value::Null, |v, _| list(vec![v]));
        assert_eq!(deep(50).within(SMALL), Ok(()));
        assert_eq!(deep(51).within(SMALL), Err(Exceeded::Depth(50)));
        let rec = Value::record(vec![(Arc::from("k"), Value::text("v"))]);
        assert_eq!(rec.within(SMALL), Ok(()));
    }

    #[test]
    fn shared_parts_count_each_time_they_are_reached_and_walks_stop_early() {
        let huge = doubled(40);
        let started = std::time::Instant::now();
        assert_eq!(huge.within(SMALL), Err(Exceeded::Bytes(1 << 20)));
        assert_eq!(huge.render(1 << 20), Err(Exceeded::Bytes(1 << 20)));
        assert_eq!(huge.equals(&doubled(40), 10_000), None);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn render_is_display_within_a_limit() {
        let v = Value::record(vec![
            (
                Arc::from("a"),
                list(vec![Value::Int(1), Value::text("two")]),
            ),
            (Arc::from("b"), Value::Null),
        ]);
        let text = v.display();
        assert_eq!(text, r#"{"a":[1,"two"],"b":null}"#);
        assert_eq!(v.render(text.len()), Ok(text.clone()));
        assert_eq!(
            v.render(text.len() - 1),
            Err(Exceeded::Bytes(text.len() - 1))
        );
        assert_eq!(Value::text("abc").render(2), Err(Exceeded::Bytes(2)));
    }

    #[test]
    fn equals_agrees_with_eq() {
        let a = list(vec![Value::Int(1), Value::text("x"), doubled(3)]);
        let b = list(vec![Value::Int(1), Value::text("x"), doubled(3)]);
        let c = list(vec![Value::Int(1), Value::text("y"), doubled(3)]);
        assert_eq!(a.equals(&b, 1000), Some(a == b));
        assert_eq!(a.equals(&c, 1000), Some(a == c));
        assert_eq!(
            Value::Float(f64::NAN).equals(&Value::Float(f64::NAN), 10),
            Some(false)
        );
        let r1 = Value::record(vec![(Arc::from("k"), Value::Int(1))]);
        let r2 = Value::record(vec![(Arc::from("j"), Value::Int(1))]);
        assert_eq!(r1.equals(&r2, 10), Some(false));
        assert_eq!(r1.equals(&r1.clone(), 10), Some(true));
    }

    #[test]
    fn sizes_read_for_people() {
        assert_eq!(human_bytes(256 << 20), "256 MiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
        assert_eq!(human_bytes(8 << 10), "8 KiB");
        assert_eq!(human_bytes(4095), "4095 bytes");
    }
}
