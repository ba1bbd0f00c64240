//! An eval's dataset: one row per run, as JSON lines (`.jsonl`) or CSV (`.csv`).
//!
//! A JSON line is either the inputs themselves (`{"text": "…", "city": "Lyon"}`) or a row
//! with parts: `inputs`, `expected` (values the eval's checks and judges may name as
//! `{expected.NAME}`), `files` (the working directory the run starts with, by path), `expect`
//! (checks of this row alone, in the test file's vocabulary) and `name`. In CSV the header
//! names the columns: a column `expected.NAME` is an expected value, any other an input.

use super::spec::Expect;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One row of a dataset.
#[derive(Debug, Default)]
pub struct Row {
    /// Its line (JSON lines) or record (CSV) number, from 1.
    pub line: usize,
    /// What the row is called in reports (default: `row N`).
    pub name: String,
    /// The program's inputs.
    pub inputs: Map<String, Value>,
    /// Expected values, for checks and judges to name.
    pub expected: Map<String, Value>,
    /// The files the run's working directory starts with.
    pub files: BTreeMap<String, String>,
    /// Checks of this row alone.
    pub expect: Option<Expect>,
}

/// A row that does not read: where, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct RowError {
    /// The line (or CSV record) it is on, from 1.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The keys that make a JSON line a row with parts rather than bare inputs.
const PARTS: [&str; 5] = ["inputs", "expected", "files", "expect", "name"];

/// The rows of `text`, read as CSV when `csv`, else as JSON lines (blank lines skipped).
pub fn parse(text: &str, csv: bool) -> Result<Vec<Row>, RowError> {
    if csv {
        parse_csv(text)
    } else {
        parse_jsonl(text)
    }
}

fn parse_jsonl(text: &str) -> Result<Vec<Row>, RowError> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let err = |message: String| RowError {
            line: line_no,
            message,
        };
        let value: Value =
            serde_json::from_str(line).map_err(|e| err(format!("not a JSON object: {e}")))?;
        let Value::Object(mut object) = value else {
            return Err(err("a row is a JSON object".into()));
        };
        let mut row = Row {
            line: line_no,
            name: format!("row {}", rows.len() + 1),
            ..Row::default()
        };
        if !object.keys().any(|k| PARTS.contains(&k.as_str())) {
            row.inputs = object;
            rows.push(row);
            continue;
        }
        if let Some(other) = object.keys().find(|k| !PARTS.contains(&k.as_str())) {
            return Err(err(format!(
                "unknown part `{other}` (a row has {}; or give the inputs alone)",
                PARTS.join(", ")
            )));
        }
        let table = |v: Option<Value>, part: &str| match v {
            None => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m),
            Some(other) => Err(err(format!("`{part}` is an object, not {other}"))),
        };
        row.inputs = table(object.remove("inputs"), "inputs")?;
        row.expected = table(object.remove("expected"), "expected")?;
        for (path, v) in table(object.remove("files"), "files")? {
            match v {
                Value::String(s) => {
                    row.files.insert(path, s);
                }
                other => return Err(err(format!("file `{path}` is a text, not {other}"))),
            }
        }
        match object.remove("name") {
            None => {}
            Some(Value::String(s)) => row.name = s,
            Some(other) => return Err(err(format!("`name` is a text, not {other}"))),
        }
        if let Some(expect) = object.remove("expect") {
            row.expect = Some(expect_from_json(expect).map_err(err)?);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// A row's `expect`, in JSON, read as the test file's (through its TOML form, so both are
/// read by one definition).
fn expect_from_json(v: Value) -> Result<Expect, String> {
    let as_toml = toml::Value::try_from(&v).map_err(|e| format!("`expect`: {e}"))?;
    let text = toml::to_string(&as_toml).map_err(|e| format!("`expect`: {e}"))?;
    toml::from_str(&text).map_err(|e: toml::de::Error| format!("`expect`: {}", e.message()))
}

fn parse_csv(text: &str) -> Result<Vec<Row>, RowError> {
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| RowError {
            line: 1,
            message: format!("no header: {e}"),
        })?
        .clone();
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let line = record
            .as_ref()
            .ok()
            .and_then(|r| r.position())
            .map_or(i + 2, |p| p.line() as usize);
        let record = record.map_err(|e| RowError {
            line,
            message: e.to_string(),
        })?;
        let mut row = Row {
            line,
            name: format!("row {}", rows.len() + 1),
            ..Row::default()
        };
        for (column, cell) in headers.iter().zip(record.iter()) {
            let value = Value::String(cell.to_string());
            match column.strip_prefix("expected.") {
                Some(name) => {
                    row.expected.insert(name.to_string(), value);
                }
                None => {
                    row.inputs.insert(column.to_string(), value);
                }
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

impl Row {
    /// `text` with the row's `{expected.NAME}` and `{inputs.NAME}` filled in (a name the
    /// row lacks is left as written).
    pub fn fill(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find('{') {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                return out;
            };
            let name = &after[..end];
            let value = name
                .strip_prefix("expected.")
                .and_then(|n| self.expected.get(n))
                .or_else(|| {
                    name.strip_prefix("inputs.")
                        .and_then(|n| self.inputs.get(n))
                });
            match value {
                Some(v) => out.push_str(&super::checks::text_of(v)),
                None => out.push_str(&rest[start..start + end + 2]),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// `v`, a check as written, with every text in it filled in ([`Row::fill`]).
    pub fn fill_value(&self, v: &toml::Value) -> toml::Value {
        match v {
            toml::Value::String(s) => toml::Value::String(self.fill(s)),
            toml::Value::Array(a) => {
                toml::Value::Array(a.iter().map(|x| self.fill_value(x)).collect())
            }
            toml::Value::Table(t) => toml::Value::Table(
                t.iter()
                    .map(|(k, x)| (k.clone(), self.fill_value(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_lines_are_inputs_or_rows_with_parts() {
        let rows = parse(
            "{\"text\": \"a\"}\n\n{\"name\": \"sum\", \"inputs\": {\"task\": \"add\"}, \"expected\": {\"total\": 7}, \"files\": {\"n.txt\": \"3\\n4\\n\"}, \"expect\": {\"files\": {\"total.txt\": {\"matches\": \"^7\"}}}}\n",
            false,
        )
        .expect("reads");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].inputs["text"], json!("a"));
        assert_eq!(rows[0].name, "row 1");
        assert_eq!(rows[1].line, 3);
        assert_eq!(rows[1].name, "sum");
        assert_eq!(rows[1].files["n.txt"], "3\n4\n");
        let expect = rows[1].expect.as_ref().expect("expect");
        assert_eq!(expect.files.len(), 1);
        assert_eq!(
            rows[1].fill("total {expected.total}, {inputs.task}, {other}"),
            "total 7, add, {other}"
        );
    }

    #[test]
    fn csv_columns_are_inputs_or_expected_values() {
        let rows = parse(
            "city,expected.country\nLyon,France\n\"Porto, PT\",Portugal\n",
            true,
        )
        .expect("reads");
        assert_eq!(rows[1].inputs["city"], json!("Porto, PT"));
        assert_eq!(rows[1].expected["country"], json!("Portugal"));
        assert_eq!(rows[1].line, 3);
    }

    #[test]
    fn a_bad_row_names_its_line() {
        let e = parse("{\"a\": 1}\n[1]\n", false).unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("{\"inputs\": {}, \"expectd\": {}}\n", false).unwrap_err();
        assert!(e.message.contains("expectd"), "{}", e.message);
    }
}
