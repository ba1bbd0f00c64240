//! Text used as structure: sessions answer in text, yet programs iterate over answers, read
//! their fields, count with them and filter on yes/no. Local parsing comes first (JSON, JSON
//! in a fenced block, bulleted or numbered lines, yes/no, numbers); only when it fails does
//! the VM ask the driver to convert.

use crate::value::Value;
use bytecode_spec::Shape;
use std::sync::Arc;

/// Converts `v` to `shape` without asking anyone, if it can.
pub fn local(v: &Value, shape: Shape) -> Option<Value> {
    match (shape, v) {
        (Shape::List, Value::List(_))
        | (Shape::Record, Value::Record(_))
        | (Shape::Int, Value::Int(_))
        | (Shape::Bool, Value::Bool(_)) => Some(v.clone()),
        (Shape::Record, Value::Error(e)) => Some(Value::record(vec![(
            Arc::from("message"),
            Value::text(e.message.as_str()),
        )])),
        (Shape::Bool, Value::Null) => Some(Value::Bool(false)),
        (Shape::Bool, Value::Int(i)) => Some(Value::Bool(*i != 0)),
        (Shape::Bool, Value::List(l)) => Some(Value::Bool(!l.is_empty())),
        (Shape::Int, Value::Float(f)) if f.fract() == 0.0 => Some(Value::Int(*f as i64)),
        (Shape::List, Value::Null) => Some(Value::List(Arc::new(Vec::new()))),
        (Shape::Record, Value::Null) => Some(Value::record(Vec::new())),
        (_, Value::Text(t)) => parse_text(t, shape),
        _ => None,
    }
}

fn json_of(text: &str) -> Option<serde_json::Value> {
    let t = text.trim();
    if let Ok(j) = serde_json::from_str(t) {
        return Some(j);
    }
    // JSON inside a fenced block.
    let start = t.find("```")?;
    let rest = &t[start + 3..];
    let rest = rest.find('\n').map(|n| &rest[n + 1..]).unwrap_or(rest);
    let end = rest.find("```")?;
    serde_json::from_str(rest[..end].trim()).ok()
}

fn parse_text(text: &str, shape: Shape) -> Option<Value> {
    let t = text.trim();
    match shape {
        Shape::Bool => {
            let first: String = t
                .chars()
                .take_while(|c| c.is_alphanumeric())
                .collect::<String>()
                .to_lowercase();
            match first.as_str() {
                "yes" | "true" | "y" => Some(Value::Bool(true)),
                "no" | "false" | "n" => Some(Value::Bool(false)),
                _ => match json_of(t) {
                    Some(serde_json::Value::Bool(b)) => Some(Value::Bool(b)),
                    _ => None,
                },
            }
        }
        Shape::Int => t.parse::<i64>().ok().map(Value::Int).or_else(|| {
            let digits: String = t
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(|c| c.is_ascii_digit())
                .collect();
            // Only a lone number in short text counts ("3", "about 3 items" does not).
            if t.len() <= 12 {
                digits.parse().ok().map(Value::Int)
            } else {
                None
            }
        }),
        Shape::Record => match json_of(t)? {
            j @ serde_json::Value::Object(_) => Some(Value::from_json(&j)),
            _ => None,
        },
        Shape::List => {
            if let Some(j @ serde_json::Value::Array(_)) = json_of(t) {
                return Some(Value::from_json(&j));
            }
            let items: Vec<Value> = t
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(list_item)
                .collect::<Option<Vec<_>>>()?;
            if items.is_empty() {
                None
            } else {
                Some(Value::List(Arc::new(items)))
            }
        }
    }
}

/// A bulleted (`-`, `*`, `•`) or numbered (`1.`, `2)`) line, as its text.
fn list_item(line: &str) -> Option<Value> {
    for bullet in ["- ", "* ", "• "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return Some(Value::text(rest.trim()));
        }
    }
    let digits = line.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 {
        let rest = &line[digits..];
        if let Some(rest) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some(Value::text(rest.trim()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Value {
        Value::text(s)
    }

    #[test]
    fn parses_json_fenced_json_and_lists() {
        assert_eq!(
            local(&t("[1, 2]"), Shape::List),
            Some(Value::from_json(&serde_json::json!([1, 2])))
        );
        assert_eq!(
            local(&t("Here:\n```json\n{\"a\": 1}\n```\nDone"), Shape::Record),
            Some(Value::from_json(&serde_json::json!({"a": 1})))
        );
        assert_eq!(
            local(&t("- alpha\n- beta\n"), Shape::List),
            Some(Value::List(Arc::new(vec![t("alpha"), t("beta")])))
        );
        assert_eq!(
            local(&t("1. one\n2) two"), Shape::List).map(|v| v.to_json()),
            Some(serde_json::json!(["one", "two"]))
        );
    }

    #[test]
    fn parses_yes_no_and_numbers() {
        assert_eq!(
            local(&t("Yes, it is."), Shape::Bool),
            Some(Value::Bool(true))
        );
        assert_eq!(local(&t("no"), Shape::Bool), Some(Value::Bool(false)));
        assert_eq!(local(&t(" 42 "), Shape::Int), Some(Value::Int(42)));
        assert_eq!(local(&t("3 items"), Shape::Int), Some(Value::Int(3)));
    }

    #[test]
    fn prose_needs_the_driver() {
        assert_eq!(local(&t("It depends on the weather."), Shape::Bool), None);
        assert_eq!(local(&t("A paragraph of findings."), Shape::List), None);
        assert_eq!(local(&t("several hundred, give or take"), Shape::Int), None);
    }
}
