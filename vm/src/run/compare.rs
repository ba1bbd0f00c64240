//! Comparing two runs (`prosevm diff`): request by request, where their answers differ, and
//! where their outputs do. Runs of one program ask the same requests under the same ids
//! (ids come from fiber lineage), so answers are matched by id; a fork and the run it came
//! from share their prefix.

use prose_machine::protocol::{Answer, Kind, Reply};
use prose_store::{journal, StoredRun};
use serde::Serialize;

/// How two runs differ.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The first run's id.
    pub a: String,
    /// The second run's id.
    pub b: String,
    /// Whether they ran the same artifact.
    pub same_program: bool,
    /// How many requests both answered the same.
    pub same: usize,
    /// The requests both answered, differently, in the order the first run asked them.
    pub differ: Vec<Differs>,
    /// Requests only the first run answered.
    pub only_a: Vec<Asked>,
    /// Requests only the second run answered.
    pub only_b: Vec<Asked>,
    /// The outputs that differ (or that only one run has), by name.
    pub outputs: Vec<Differs>,
}

/// One request (or output) answered differently: its id (or name), its kind, and each
/// run's answer as text.
#[derive(Clone, Debug, Serialize)]
pub struct Differs {
    /// The request id, or the output's name.
    pub id: String,
    /// The request's kind (`session`, `evaluate`, ...), or `output`.
    pub kind: String,
    /// The first run's answer (none: it has no such output).
    pub a: Option<String>,
    /// The second run's answer.
    pub b: Option<String>,
}

/// A request one run answered and the other did not.
#[derive(Clone, Debug, Serialize)]
pub struct Asked {
    /// The request id.
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// The answer.
    pub answer: String,
}

impl Comparison {
    /// Compares run `a` with run `b`.
    pub fn of(a: &StoredRun, b: &StoredRun) -> Comparison {
        let answers_a = answers(a);
        let answers_b = answers(b);
        let mut c = Comparison {
            a: a.id.clone(),
            b: b.id.clone(),
            same_program: a.record.artifact_sha256 == b.record.artifact_sha256,
            same: 0,
            differ: Vec::new(),
            only_a: Vec::new(),
            only_b: Vec::new(),
            outputs: Vec::new(),
        };
        for (id, kind, text) in &answers_a {
            match answers_b.iter().find(|(other, _, _)| other == id) {
                Some((_, _, theirs)) if theirs == text => c.same += 1,
                Some((_, _, theirs)) => c.differ.push(Differs {
                    id: id.clone(),
                    kind: kind.to_string(),
                    a: Some(text.clone()),
                    b: Some(theirs.clone()),
                }),
                None => c.only_a.push(Asked {
                    id: id.clone(),
                    kind: kind.to_string(),
                    answer: text.clone(),
                }),
            }
        }
        for (id, kind, text) in &answers_b {
            if !answers_a.iter().any(|(other, _, _)| other == id) {
                c.only_b.push(Asked {
                    id: id.clone(),
                    kind: kind.to_string(),
                    answer: text.clone(),
                });
            }
        }
        let empty = serde_json::Map::new();
        let out_a = a.record.outputs.as_ref().unwrap_or(&empty);
        let out_b = b.record.outputs.as_ref().unwrap_or(&empty);
        let mut names: Vec<&String> = out_a.keys().chain(out_b.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let (va, vb) = (out_a.get(name), out_b.get(name));
            if va != vb {
                c.outputs.push(Differs {
                    id: name.clone(),
                    kind: "output".into(),
                    a: va.map(json_text),
                    b: vb.map(json_text),
                });
            }
        }
        c
    }

    /// Whether the runs answered and output the same.
    pub fn is_same(&self) -> bool {
        self.differ.is_empty()
            && self.only_a.is_empty()
            && self.only_b.is_empty()
            && self.outputs.is_empty()
    }

    /// The comparison for people: a line per difference, each answer cut to `width`
    /// characters.
    pub fn render_text(&self, width: usize) -> String {
        let mut out = format!("--- {}\n+++ {}\n", self.a, self.b);
        if !self.same_program {
            out.push_str("(the runs ran different artifacts: their requests may not match)\n");
        }
        out.push_str(&format!(
            "{} answer(s) the same, {} different, {} only in {}, {} only in {}\n",
            self.same,
            self.differ.len(),
            self.only_a.len(),
            self.a,
            self.only_b.len(),
            self.b
        ));
        for d in self.differ.iter().chain(&self.outputs) {
            out.push_str(&format!("\n{} ({})\n", d.id, d.kind));
            out.push_str(&format!("- {}\n", shown(d.a.as_deref(), width)));
            out.push_str(&format!("+ {}\n", shown(d.b.as_deref(), width)));
        }
        for (sign, list) in [("-", &self.only_a), ("+", &self.only_b)] {
            for asked in list {
                out.push_str(&format!(
                    "\n{} ({}, only here)\n{sign} {}\n",
                    asked.id,
                    asked.kind,
                    shown(Some(&asked.answer), width)
                ));
            }
        }
        out
    }
}

/// Each request `run` answered (the requests themselves, not the steps of an agent loop),
/// in the order asked, with its kind and its answer as text.
fn answers(run: &StoredRun) -> Vec<(String, Kind, String)> {
    journal::in_order(run.journal.clone())
        .into_iter()
        .filter(|r| r.id == r.id.whole())
        .map(|r| (r.id.to_string(), r.kind, answer_text(&r)))
        .collect()
}

/// A reply's answer as text: a session's text, a verdict, an option, a value as JSON, or
/// the failure.
fn answer_text(r: &Reply) -> String {
    match &r.outcome {
        Err(f) => format!("(failed) {f}"),
        Ok(Answer::Session(a)) => a.text.clone(),
        Ok(Answer::Evaluate(b)) => b.to_string(),
        Ok(Answer::Choose(i)) => format!("option {i}"),
        Ok(Answer::Convert(v) | Answer::Input(v)) => v.to_json().to_string(),
        Ok(other) => format!("{:?}", other.kind()),
    }
}

/// A JSON value as text: a string as itself, anything else as JSON.
fn json_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` on one line, at most `width` characters; `(none)` for nothing.
fn shown(text: Option<&str>, width: usize) -> String {
    let Some(text) = text else {
        return "(none)".into();
    };
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= width {
        line
    } else {
        let cut: String = line.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}
