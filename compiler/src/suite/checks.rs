//! What the checks of a test or an eval say about a finished run: each check against the
//! facts the VM gathered ([`RunFacts`]), and the first difference of each that does not
//! hold ([`Failure`]).

use super::spec::{Check, Expect};
use serde_json::Value;

/// What a finished run did, as the checks see it.
pub struct RunFacts<'a> {
    /// How it ended: `finished`, `failed`, `waiting`, `paused` or `interrupted`.
    pub status: &'a str,
    /// Its error's message, when it failed or stopped.
    pub error: Option<&'a str>,
    /// The sessions it asked.
    pub sessions: usize,
    /// What it cost, where prices are known.
    pub cost: Option<f64>,
    /// The tools its sessions called, in order (each call once).
    pub tools: &'a [String],
    /// Its outputs, by name.
    pub outputs: &'a serde_json::Map<String, Value>,
    /// The text of a file of its working directory, by path relative to it (`None` when
    /// there is no such file).
    pub file: &'a dyn Fn(&str) -> Option<String>,
}

/// A check that does not hold: what was checked, and the first difference.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// What was checked: `status`, `output summary`, `file total.txt`, ...
    pub what: String,
    /// What it should have been, in words.
    pub expected: String,
    /// What it was.
    pub found: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: expected {}, found {}",
            self.what, self.expected, self.found
        )
    }
}

/// The most of a value a failure quotes.
const QUOTED: usize = 300;

/// `text` quoted for a failure, cut to [`QUOTED`] characters.
fn quoted(text: &str) -> String {
    let cut: String = text.chars().take(QUOTED).collect();
    if cut.len() < text.len() {
        format!("{cut:?}… ({} characters)", text.chars().count())
    } else {
        format!("{cut:?}")
    }
}

/// A value's text: a text as itself, anything else as JSON.
pub fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether `found` is `expected`: equal JSON, or a text whose JSON reading is (an output
/// that is a model's answer is text, where a test writes a number or a list).
fn same(found: &Value, expected: &Value) -> bool {
    if found == expected {
        return true;
    }
    match (found, expected) {
        (Value::String(s), e) if !e.is_string() => {
            serde_json::from_str::<Value>(s.trim()).is_ok_and(|v| &v == e)
        }
        _ => false,
    }
}

/// A value as a number: a number, or a text that reads as one.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The first way `value` (named `what`) fails `check`, if any.
pub fn check_value(what: &str, check: &Check, value: &Value) -> Option<Failure> {
    let fail = |expected: String, found: String| {
        Some(Failure {
            what: what.to_string(),
            expected,
            found,
        })
    };
    let text = text_of(value);
    if let Some(e) = &check.equals {
        if !same(value, e) {
            return fail(quoted(&text_of(e)), quoted(&text));
        }
    }
    for part in &check.contains {
        if !text.contains(part.as_str()) {
            return fail(format!("a text containing {}", quoted(part)), quoted(&text));
        }
    }
    for part in &check.excludes {
        if text.contains(part.as_str()) {
            return fail(format!("a text without {}", quoted(part)), quoted(&text));
        }
    }
    if let Some(re) = &check.matches {
        match regex::Regex::new(re) {
            Ok(r) if r.is_match(&text) => {}
            Ok(_) => return fail(format!("a text matching /{re}/"), quoted(&text)),
            Err(e) => {
                return fail(
                    format!("a text matching /{re}/"),
                    format!("a bad pattern: {e}"),
                )
            }
        }
    }
    if let Some(schema) = &check.schema {
        // A model's answer is text: read as JSON when it is.
        let instance = match value {
            Value::String(s) => match serde_json::from_str::<Value>(s.trim()) {
                Ok(v) => v,
                Err(_) => return fail("JSON fitting the schema".into(), quoted(&text)),
            },
            other => other.clone(),
        };
        match jsonschema::validator_for(schema) {
            Ok(v) => {
                if let Some(e) = v.iter_errors(&instance).next() {
                    let at = e.instance_path().to_string();
                    let at = if at.is_empty() { "/".into() } else { at };
                    return fail(
                        "JSON fitting the schema".into(),
                        format!("{} (at {at}: {e})", quoted(&text)),
                    );
                }
            }
            Err(e) => {
                return fail(
                    "JSON fitting the schema".into(),
                    format!("a bad schema: {e}"),
                )
            }
        }
    }
    if let Some(range) = &check.range {
        match number(value) {
            Some(n) if range.holds(n) => {}
            Some(n) => return fail(format!("a number {}", range.describe()), format!("{n}")),
            None => return fail(format!("a number {}", range.describe()), quoted(&text)),
        }
    }
    None
}

/// The name of every check `expect` makes, in the order [`verdict`] makes them (the status
/// always, then what is written): the names its failures carry, and an eval's scores.
pub fn names(expect: &Expect) -> Vec<String> {
    let mut names = vec!["status".to_string()];
    for (written, name) in [
        (expect.sessions.is_some(), "sessions"),
        (expect.cost.is_some(), "cost"),
        (expect.tools.is_some(), "tools"),
    ] {
        if written {
            names.push(name.into());
        }
    }
    names.extend(
        expect
            .outputs
            .keys()
            .map(|k| format!("output {}", k.get_ref())),
    );
    names.extend(expect.files.keys().map(|k| format!("file {}", k.get_ref())));
    if expect.error.is_some() {
        names.push("error".into());
    }
    names
}

/// Every check of `expect` that `run` fails, in the order written (the status first), with
/// `read` turning each written check into a [`Check`] (a check that does not read fails).
pub fn verdict(
    expect: &Expect,
    run: &RunFacts<'_>,
    read: &dyn Fn(&toml::Value) -> Result<Check, String>,
) -> Vec<Failure> {
    let mut failures = Vec::new();
    let mut push = |f: Option<Failure>| failures.extend(f);
    let status = expect
        .status
        .as_ref()
        .map_or("finished", |s| s.get_ref().as_str());
    if run.status != status {
        push(Some(Failure {
            what: "status".into(),
            expected: status.into(),
            found: match run.error {
                Some(e) => format!("{} ({})", run.status, quoted(e)),
                None => run.status.into(),
            },
        }));
    }
    if let Some(r) = &expect.sessions {
        if !r.holds(run.sessions as f64) {
            push(Some(Failure {
                what: "sessions".into(),
                expected: r.describe(),
                found: run.sessions.to_string(),
            }));
        }
    }
    if let Some(r) = &expect.cost {
        match run.cost {
            Some(c) if r.holds(c) => {}
            found => push(Some(Failure {
                what: "cost".into(),
                expected: format!("${}", r.describe()),
                found: found.map_or("unknown (no price for its model)".into(), |c| {
                    format!("${c}")
                }),
            })),
        }
    }
    if let Some(allowed) = &expect.tools {
        let allowed: Vec<&str> = allowed.iter().map(|t| t.get_ref().as_str()).collect();
        if let Some(other) = run.tools.iter().find(|t| !allowed.contains(&t.as_str())) {
            push(Some(Failure {
                what: "tools".into(),
                expected: format!("calls of {} only", allowed.join(", ")),
                found: format!("a call of {other}"),
            }));
        }
    }
    let mut read_or_fail = |what: &str, raw: &toml::Value| match read(raw) {
        Ok(c) => Some(c),
        Err(e) => {
            push(Some(Failure {
                what: what.to_string(),
                expected: "a check that reads".into(),
                found: e,
            }));
            None
        }
    };
    let mut checked = Vec::new();
    for (name, raw) in &expect.outputs {
        let what = format!("output {}", name.get_ref());
        if let Some(check) = read_or_fail(&what, raw.get_ref()) {
            checked.push((
                what,
                check,
                run.outputs.get(name.get_ref().as_str()).cloned(),
            ));
        }
    }
    for (path, raw) in &expect.files {
        let what = format!("file {}", path.get_ref());
        if let Some(check) = read_or_fail(&what, raw.get_ref()) {
            checked.push((what, check, (run.file)(path.get_ref()).map(Value::String)));
        }
    }
    if let Some(raw) = &expect.error {
        if let Some(check) = read_or_fail("error", raw.get_ref()) {
            checked.push((
                "error".into(),
                check,
                run.error.map(|e| Value::String(e.into())),
            ));
        }
    }
    for (what, check, value) in checked {
        let wants = check.exists.unwrap_or(true);
        match (value, wants) {
            (None, true) => failures.push(Failure {
                what,
                expected: "it to exist".into(),
                found: "none".into(),
            }),
            (Some(v), false) => failures.push(Failure {
                what,
                expected: "none".into(),
                found: quoted(&text_of(&v)),
            }),
            (None, false) => {}
            (Some(v), true) => failures.extend(check_value(&what, &check, &v)),
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::spec::Range;
    use serde_json::json;

    fn check(text: &str) -> Check {
        let v: toml::Value = toml::from_str(&format!("c = {text}")).expect("toml");
        Check::read(&v["c"]).expect("a check")
    }

    #[test]
    fn each_check_holds_or_says_the_first_difference() {
        let holds = |c: &str, v: Value| check_value("x", &check(c), &v).is_none();
        assert!(holds("\"Hello\"", json!("Hello")));
        assert!(!holds("\"Hello\"", json!("Hello!")));
        assert!(holds("{ equals = 3 }", json!("3")));
        assert!(holds("{ equals = [1, 2] }", json!("[1, 2]")));
        assert!(holds("{ contains = [\"a\", \"b\"] }", json!("abc")));
        assert!(!holds("{ contains = [\"a\", \"z\"] }", json!("abc")));
        assert!(holds("{ excludes = \"TODO\" }", json!("done")));
        assert!(holds("{ matches = '^\\d+$' }", json!("42")));
        assert!(holds("{ min = 1, max = 3 }", json!(" 2\n")));
        assert!(!holds("{ min = 1, max = 3 }", json!(4)));
        assert!(!holds("{ min = 1 }", json!("many")));
        let schema = "{ schema = '{\"type\": \"object\", \"required\": [\"a\"]}' }";
        assert!(holds(schema, json!("{\"a\": 1}")));
        let f = check_value("output data", &check(schema), &json!("{\"b\": 1}")).expect("fails");
        assert_eq!(f.what, "output data");
        assert!(f.found.contains("\"a\""), "{f}");
    }

    #[test]
    fn a_run_is_checked_status_first_then_in_the_order_written() {
        let file = crate::suite::spec::parse(
            "[[test]]\nname = \"t\"\n[test.expect]\nsessions = { max = 1 }\ntools = [\"read_file\"]\noutputs.r = \"yes\"\nfiles.\"out.txt\" = { contains = \"7\" }\nfiles.\"secret\" = { exists = false }\n",
        )
        .expect("reads");
        let expect = &file.tests[0].expect;
        let outputs = serde_json::Map::from_iter([("r".to_string(), json!("no"))]);
        let tools = vec!["read_file".to_string(), "bash".to_string()];
        let files = |p: &str| match p {
            "out.txt" => Some("6\n".to_string()),
            "secret" => Some("x".to_string()),
            _ => None,
        };
        let run = RunFacts {
            status: "failed",
            error: Some("E210: the provider is down"),
            sessions: 2,
            cost: None,
            tools: &tools,
            outputs: &outputs,
            file: &files,
        };
        let failures = verdict(expect, &run, &|v| Check::read(v));
        let what: Vec<&str> = failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "status",
                "sessions",
                "tools",
                "output r",
                "file out.txt",
                "file secret"
            ]
        );
        assert!(failures[0].found.contains("provider is down"));
        assert_eq!(
            Range {
                min: None,
                max: Some(1.0)
            }
            .describe(),
            "at most 1"
        );
    }
}
