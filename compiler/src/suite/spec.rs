//! The test file: `NAME.test.toml`, beside the program it tests.
//!
//! ```toml
//! program = "count-lines.prose"        # default: the `.prose` file of the same name
//!
//! [[test]]
//! name = "counts the lines of a file"
//! inputs = { file = "notes.txt" }
//! files = { "notes.txt" = "one\ntwo\nthree\n" }   # the working directory it starts with
//! answers = { tape = "count-lines.tape" }          # or { script = "x.mock.json" }; default: the mock
//!
//! [test.expect]
//! status = "finished"                   # the default
//! sessions = { max = 2 }
//! tools = ["read_file", "write_file"]   # no call of any other tool
//! outputs.count = { min = 3, max = 3 }
//! files."count.txt" = { matches = '^\s*3\s*$' }
//! ```
//!
//! Every name is checked against the program by `prosec check` ([`super::static_check`]).

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// A test file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    /// The program tested, relative to the file (default: the `.prose` file of the same
    /// name, `hello.test.toml` testing `hello.prose`); a `.pbc` artifact may be named.
    pub program: Option<Spanned<String>>,
    /// The cases.
    #[serde(rename = "test", default)]
    pub tests: Vec<Case>,
}

/// One case: a run of the program and what must hold of it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// What it checks, in words (its name in the summary).
    pub name: Spanned<String>,
    /// The program's inputs, by name.
    #[serde(default)]
    pub inputs: BTreeMap<Spanned<String>, toml::Value>,
    /// The files the run's working directory starts with, by path relative to it.
    #[serde(default)]
    pub files: BTreeMap<Spanned<String>, String>,
    /// Where answers come from.
    #[serde(default)]
    pub answers: Answers,
    /// What must hold of the run.
    #[serde(default)]
    pub expect: Expect,
    /// Left out of runs: `true`, or why.
    #[serde(default)]
    pub ignore: Ignore,
}

/// Where a case's answers come from: the deterministic mock (the default), a mock script,
/// or a tape recorded from a real model with `--record`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answers {
    /// A tape (`prosevm run --record FILE`), relative to the test file: every model request
    /// is answered from it, and one it does not hold fails the case.
    pub tape: Option<Spanned<String>>,
    /// A mock script (a JSON list of rules, as `--mock-script` takes), relative to the test
    /// file.
    pub script: Option<Spanned<String>>,
    /// How the mock judges conditions: `true`, `false` or `after:N` (default `after:1`).
    pub conditions: Option<Spanned<String>>,
}

/// Whether a case is left out, and why.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub enum Ignore {
    /// It runs.
    #[default]
    No,
    /// It is left out (`ignore = true`).
    Yes,
    /// It is left out, for this reason (`ignore = "needs a key"`).
    Because(String),
}

impl<'de> Deserialize<'de> for Ignore {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ignore, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Flag(bool),
            Reason(String),
        }
        Ok(match Repr::deserialize(d)? {
            Repr::Flag(false) => Ignore::No,
            Repr::Flag(true) => Ignore::Yes,
            Repr::Reason(r) => Ignore::Because(r),
        })
    }
}

/// What must hold of a run.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// How it ends: `finished` (the default), `failed`, `waiting` or `paused`.
    pub status: Option<Spanned<String>>,
    /// How many sessions it asks, exactly (`sessions = 3`) or within a range.
    pub sessions: Option<Range>,
    /// What it costs, in US dollars (`cost = { max = 0.05 }`).
    pub cost: Option<Range>,
    /// The only tools its sessions may call (a call of any other fails the case).
    pub tools: Option<Vec<Spanned<String>>>,
    /// Checks of its outputs, by output name.
    #[serde(default)]
    pub outputs: BTreeMap<Spanned<String>, CheckText>,
    /// Checks of the files its working directory holds when it ends, by path.
    #[serde(default)]
    pub files: BTreeMap<Spanned<String>, CheckText>,
    /// A check of its error's message, for a case expected to fail.
    pub error: Option<CheckText>,
}

/// A number that must be within bounds: exactly `n` (`sessions = 3`), or `{ min, max }`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// The least allowed.
    pub min: Option<f64>,
    /// The most allowed.
    pub max: Option<f64>,
}

impl<'de> Deserialize<'de> for Range {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Range, D::Error> {
        Range::read(&toml::Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl Range {
    /// The bounds `v` gives: a number, or a table of `min` and `max`.
    pub fn read(v: &toml::Value) -> Result<Range, String> {
        let number = |v: &toml::Value| match v {
            toml::Value::Integer(i) => Some(*i as f64),
            toml::Value::Float(f) => Some(*f),
            _ => None,
        };
        if let Some(n) = number(v) {
            return Ok(Range {
                min: Some(n),
                max: Some(n),
            });
        }
        let toml::Value::Table(t) = v else {
            return Err(format!("expected a number or {{ min, max }}, found {v}"));
        };
        let mut range = Range {
            min: None,
            max: None,
        };
        for (k, v) in t {
            let n = number(v).ok_or_else(|| format!("`{k}` must be a number, not {v}"))?;
            match k.as_str() {
                "min" => range.min = Some(n),
                "max" => range.max = Some(n),
                other => return Err(format!("unknown bound `{other}` (expected `min` or `max`)")),
            }
        }
        Ok(range)
    }

    /// Whether `n` is within the bounds.
    pub fn holds(&self, n: f64) -> bool {
        self.min.is_none_or(|m| n >= m) && self.max.is_none_or(|m| n <= m)
    }

    /// The bounds in words: `3`, `at least 1`, `at most 0.05`, `from 1 to 3`.
    pub fn describe(&self) -> String {
        match (self.min, self.max) {
            (Some(a), Some(b)) if a == b => format!("{a}"),
            (Some(a), Some(b)) => format!("from {a} to {b}"),
            (Some(a), None) => format!("at least {a}"),
            (None, Some(b)) => format!("at most {b}"),
            (None, None) => "any".into(),
        }
    }
}

/// A check as written: a text (the value must equal it) or a table of checks, with where it
/// was written. [`Check::read`] reads it.
pub type CheckText = Spanned<toml::Value>;

/// What a value (an output, a file's text, an error message) must be. A plain string is
/// `equals`; a table may combine several checks, all of which must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Check {
    /// Equal to this value (a text, a number, a list, a table).
    pub equals: Option<serde_json::Value>,
    /// Its text contains each of these.
    pub contains: Vec<String>,
    /// Its text does not contain any of these.
    pub excludes: Vec<String>,
    /// Its text matches this regular expression (Rust's `regex` syntax).
    pub matches: Option<String>,
    /// It validates against this JSON schema (written as a TOML table or a JSON text).
    pub schema: Option<serde_json::Value>,
    /// It is a number (or a text reading as one) within these bounds.
    pub range: Option<Range>,
    /// For a file: whether it exists (`exists = false`: the run must not make it).
    pub exists: Option<bool>,
}

/// The keys a check's table may have.
pub const CHECK_KEYS: [&str; 8] = [
    "equals", "contains", "excludes", "matches", "schema", "min", "max", "exists",
];

impl Check {
    /// The check `v` writes, or what is wrong with it.
    pub fn read(v: &toml::Value) -> Result<Check, String> {
        let table = match v {
            toml::Value::String(s) => {
                return Ok(Check {
                    equals: Some(serde_json::Value::String(s.clone())),
                    ..Check::default()
                })
            }
            toml::Value::Table(t) => t,
            other => {
                return Err(format!(
                    "a check is a text (the value must equal it) or a table of {}, not {other}",
                    CHECK_KEYS.join(", ")
                ))
            }
        };
        let texts = |key: &str, v: &toml::Value| -> Result<Vec<String>, String> {
            match v {
                toml::Value::String(s) => Ok(vec![s.clone()]),
                toml::Value::Array(a) => a
                    .iter()
                    .map(|x| match x {
                        toml::Value::String(s) => Ok(s.clone()),
                        other => Err(format!("`{key}` takes texts, not {other}")),
                    })
                    .collect(),
                other => Err(format!(
                    "`{key}` takes a text or a list of texts, not {other}"
                )),
            }
        };
        let mut check = Check::default();
        let mut bounds = toml::map::Map::new();
        for (key, value) in table {
            match key.as_str() {
                "equals" => check.equals = Some(to_json(value.clone())),
                "contains" => check.contains = texts(key, value)?,
                "excludes" => check.excludes = texts(key, value)?,
                "matches" => match value {
                    toml::Value::String(re) => {
                        regex::Regex::new(re)
                            .map_err(|e| format!("`matches` is not a regular expression: {e}"))?;
                        check.matches = Some(re.clone());
                    }
                    other => return Err(format!("`matches` takes a text, not {other}")),
                },
                "schema" => {
                    let schema = match value {
                        toml::Value::String(text) => serde_json::from_str(text)
                            .map_err(|e| format!("`schema` is not JSON: {e}"))?,
                        other => to_json(other.clone()),
                    };
                    jsonschema::validator_for(&schema)
                        .map_err(|e| format!("`schema` is not a JSON schema: {e}"))?;
                    check.schema = Some(schema);
                }
                "min" | "max" => {
                    bounds.insert(key.clone(), value.clone());
                }
                "exists" => match value {
                    toml::Value::Boolean(b) => check.exists = Some(*b),
                    other => return Err(format!("`exists` takes true or false, not {other}")),
                },
                other => {
                    let hint = crate::diagnostics::closest(other, CHECK_KEYS)
                        .map(|k| format!(" (did you mean `{k}`?)"))
                        .unwrap_or_default();
                    return Err(format!(
                        "unknown check `{other}`{hint}; a check may have {}",
                        CHECK_KEYS.join(", ")
                    ));
                }
            }
        }
        if !bounds.is_empty() {
            check.range = Some(Range::read(&toml::Value::Table(bounds))?);
        }
        Ok(check)
    }
}

/// A TOML value as JSON (dates as their text).
pub fn to_json(v: toml::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        toml::Value::String(s) => J::String(s),
        toml::Value::Integer(i) => J::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
        toml::Value::Boolean(b) => J::Bool(b),
        toml::Value::Datetime(d) => J::String(d.to_string()),
        toml::Value::Array(a) => J::Array(a.into_iter().map(to_json).collect()),
        toml::Value::Table(t) => J::Object(t.into_iter().map(|(k, v)| (k, to_json(v))).collect()),
    }
}

/// A test file read from `text`, or TOML's error with the byte range it points at.
pub fn parse(text: &str) -> Result<TestFile, (String, Option<std::ops::Range<usize>>)> {
    toml::from_str(text).map_err(|e: toml::de::Error| (e.message().to_string(), e.span()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_file_reads_with_every_kind_of_check() {
        let file = parse(
            r#"
program = "count.prose"

[[test]]
name = "counts"
inputs = { file = "notes.txt", n = 3 }
files = { "notes.txt" = "a\nb\n" }
answers = { tape = "count.tape" }
ignore = "needs a model"

[test.expect]
sessions = 2
cost = { max = 0.05 }
tools = ["read_file"]
outputs.count = { min = 2, max = 2 }
outputs.title = "Notes"
outputs.data = { schema = '{"type": "object", "required": ["a"]}', contains = ["a", "b"] }
files."count.txt" = { matches = '^\s*2\s*$' }
files."secret.txt" = { exists = false }

[[test]]
name = "the mock"
"#,
        )
        .expect("reads");
        assert_eq!(
            file.program.as_ref().map(|p| p.get_ref().as_str()),
            Some("count.prose")
        );
        let t = &file.tests[0];
        assert_eq!(t.ignore, Ignore::Because("needs a model".into()));
        assert_eq!(
            t.expect.sessions,
            Some(Range {
                min: Some(2.0),
                max: Some(2.0)
            })
        );
        let outputs: Vec<&str> = t
            .expect
            .outputs
            .keys()
            .map(|k| k.get_ref().as_str())
            .collect();
        assert_eq!(outputs, ["count", "data", "title"]);
        let check = |name: &str| {
            let raw = t
                .expect
                .outputs
                .iter()
                .find(|(k, _)| k.get_ref() == name)
                .unwrap()
                .1;
            Check::read(raw.get_ref()).expect("a check")
        };
        let data = check("data");
        assert_eq!(data.contains, ["a", "b"]);
        assert_eq!(data.schema.unwrap()["required"], serde_json::json!(["a"]));
        assert_eq!(check("title").equals, Some(serde_json::json!("Notes")));
        assert_eq!(
            check("count").range,
            Some(Range {
                min: Some(2.0),
                max: Some(2.0)
            })
        );
        assert_eq!(file.tests[1].ignore, Ignore::No);
        assert!(file.tests[1].answers.tape.is_none());
    }

    #[test]
    fn a_check_that_does_not_read_says_why() {
        for (text, says) in [
            ("{ contain = \"x\" }", "did you mean `contains`?"),
            ("{ matches = \"(\" }", "not a regular expression"),
            ("{ schema = '{\"type\": 3}' }", "not a JSON schema"),
            ("{ min = \"one\" }", "must be a number"),
            ("3", "a check is a text"),
        ] {
            let v: toml::Value = toml::from_str(&format!("c = {text}")).expect("toml");
            let e = Check::read(&v["c"]).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn an_unknown_key_is_an_error_where_it_is() {
        let text = "[[test]]\nname = \"x\"\n[test.expect]\nstatuss = \"finished\"\n";
        let (message, span) = parse(text).unwrap_err();
        assert!(message.contains("statuss"), "{message}");
        let span = span.expect("located");
        assert!(text[span].contains("statuss"));
    }
}
