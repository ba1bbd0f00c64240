//! The mock driver: deterministic and offline. Sessions answer with text derived from their
//! prompt; conditions follow `--mock-conditions`; choices take the first option; inputs get
//! placeholders (with `--mock-inputs`); conversions get a small value of the asked shape.
//! A script (`--mock-script file.json`) overrides any of this per request site or prompt.

use super::{Driver, Live, Served};
use bytecode_spec::Shape;
use prose_machine::protocol::ToolCall;
use prose_machine::protocol::{
    Answer, Ask, Kind, Message, Request, SessionAnswer, Stop, TurnAnswer, TurnAsk,
};
use prose_machine::value::Value;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How discretion conditions are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conditions {
    /// Always true.
    True,
    /// Always false.
    False,
    /// False `n` times per condition site, then true.
    After(u32),
}

impl std::fmt::Display for Conditions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conditions::True => f.write_str("true"),
            Conditions::False => f.write_str("false"),
            Conditions::After(n) => write!(f, "after:{n}"),
        }
    }
}

impl serde::Serialize for Conditions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Conditions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Conditions, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for Conditions {
    type Err = String;
    fn from_str(s: &str) -> Result<Conditions, String> {
        match s {
            "true" => Ok(Conditions::True),
            "false" => Ok(Conditions::False),
            _ => s
                .strip_prefix("after:")
                .and_then(|n| n.parse().ok())
                .map(Conditions::After)
                .ok_or_else(|| format!("expected true, false or after:N, not {s:?}")),
        }
    }
}

/// One scripted answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Matches requests from this site (`program:line`).
    #[serde(default)]
    pub site: Option<String>,
    /// Matches sessions whose prompt (or label) contains this text.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Matches requests of this kind (`session`, `evaluate`, `choose`, `input`, `convert`).
    #[serde(default)]
    pub kind: Option<Kind>,
    /// The answer: text, a boolean, an option index, or any JSON value.
    #[serde(default)]
    pub reply: Option<serde_json::Value>,
    /// Fail with this message instead of answering.
    #[serde(default)]
    pub fail: Option<String>,
    /// Apply to this many matching requests, then stop matching (default: all).
    #[serde(default)]
    pub times: Option<u32>,
    /// Wait this long before answering.
    #[serde(default)]
    pub delay_ms: Option<u64>,
}

/// Options of the mock driver (kept with a run, so a resumed run answers the same way).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MockOptions {
    /// How conditions are answered (default: true).
    #[serde(default)]
    pub conditions: Option<Conditions>,
    /// Answer every input with a placeholder.
    #[serde(default)]
    pub inputs: bool,
    /// Delay before every answer.
    #[serde(default, with = "millis")]
    pub latency: Duration,
    /// Scripted answers, tried in order.
    #[serde(default)]
    pub script: Vec<Rule>,
    /// Append the id of every request served to this file (for tests of durable runs).
    #[serde(default)]
    pub log: Option<std::path::PathBuf>,
}

/// Durations as whole milliseconds.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// The mock driver.
pub struct Mock {
    opts: MockOptions,
    state: Mutex<MockState>,
}

#[derive(Default)]
struct MockState {
    used: HashMap<usize, u32>,
    false_so_far: HashMap<String, u32>,
}

/// The most characters of a prompt a mock answer repeats: a prompt that interpolates a
/// large input (one long word) must not make every answer, binding and journal record as
/// large again.
const ANSWER_CHARS: usize = 120;

/// A short deterministic answer derived from a prompt: its first eight words, at most
/// `ANSWER_CHARS` characters of them.
pub fn answer_for(prompt: &str) -> String {
    let first: String = prompt
        .split_whitespace()
        .take(8)
        .collect::<Vec<_>>()
        .join(" ");
    let first: String = first.chars().take(ANSWER_CHARS).collect();
    format!("[mock] {first}")
}

impl Mock {
    /// A mock driver with these options.
    pub fn new(opts: MockOptions) -> Mock {
        Mock {
            opts,
            state: Mutex::new(MockState::default()),
        }
    }

    fn rule(&self, req: &Request) -> Option<Rule> {
        let mut state = self.state.lock().ok()?;
        for (i, rule) in self.opts.script.iter().enumerate() {
            let kind_ok = rule.kind.is_none_or(|k| k == req.kind());
            let site_ok = rule
                .site
                .as_deref()
                .is_none_or(|s| s == req.site.to_string());
            let prompt_ok = rule.prompt.as_deref().is_none_or(|p| match &req.ask {
                Ask::Session(s) => {
                    s.prompt.contains(p) || s.label.as_deref().is_some_and(|l| l.contains(p))
                }
                Ask::Evaluate(e) => e.condition.contains(p),
                Ask::Choose(c) => c.criteria.contains(p),
                Ask::Input(i) => i.name.contains(p) || i.question.contains(p),
                Ask::Convert(c) => c.text.contains(p),
                Ask::Turn(t) => task_of(t).contains(p),
                Ask::Tool(_) | Ask::Permission(_) => false,
            });
            if !(kind_ok && site_ok && prompt_ok) {
                continue;
            }
            let used = state.used.entry(i).or_insert(0);
            if rule.times.is_some_and(|t| *used >= t) {
                continue;
            }
            *used += 1;
            return Some(rule.clone());
        }
        None
    }

    /// The answer this mock gives, and how long to wait before giving it.
    fn decide(&self, req: &Request) -> (Served, Duration) {
        let rule = self.rule(req);
        let delay = rule
            .as_ref()
            .and_then(|r| r.delay_ms)
            .map(Duration::from_millis)
            .unwrap_or_default()
            .max(self.opts.latency);
        (self.reply(req, rule), delay)
    }

    fn reply(&self, req: &Request, rule: Option<Rule>) -> Served {
        if let Some(rule) = rule {
            if let Some(msg) = rule.fail {
                return Served::failed(msg);
            }
            if let Some(reply) = rule.reply {
                return match scripted(&req.ask, reply) {
                    Ok(a) => Served::answer(a),
                    Err(why) => Served::failed(format!("the mock script's reply {why}")),
                };
            }
        }
        Served::answer(match &req.ask {
            Ask::Session(s) if s.persistent => {
                // A persistent agent keeps one line per session in its memory.
                let text = answer_for(&s.prompt);
                let agent = s.agent.as_deref().unwrap_or("agent");
                let line = format!("- {agent} answered: {text}");
                let memory = match &s.memory {
                    Some(m) => format!("{m}\n{line}"),
                    None => line,
                };
                Answer::Session(SessionAnswer {
                    text,
                    memory: Some(memory),
                })
            }
            Ask::Session(s) => Answer::Session(SessionAnswer::text(answer_for(&s.prompt))),
            Ask::Evaluate(_) => {
                Answer::Evaluate(match self.opts.conditions.unwrap_or(Conditions::True) {
                    Conditions::True => true,
                    Conditions::False => false,
                    Conditions::After(n) => {
                        let Ok(mut state) = self.state.lock() else {
                            return Served::failed("mock state poisoned");
                        };
                        let seen = state.false_so_far.entry(req.site.to_string()).or_insert(0);
                        if *seen < n {
                            *seen += 1;
                            false
                        } else {
                            true
                        }
                    }
                })
            }
            Ask::Choose(_) => Answer::Choose(0),
            Ask::Input(i) if self.opts.inputs => {
                Answer::Input(Value::text(format!("<{}>", i.name)))
            }
            Ask::Input(i) => {
                return Served::failed(format!(
                    "no value for input `{}` (the mock driver answers inputs with --mock-inputs)",
                    i.name
                ))
            }
            Ask::Turn(t) => Answer::Turn(TurnAnswer::text(answer_for(task_of(t)))),
            Ask::Tool(_) | Ask::Permission(_) => {
                return Served::failed(format!(
                    "the mock driver does not answer `{}` requests",
                    req.kind()
                ))
            }
            Ask::Convert(c) => Answer::Convert(match c.shape {
                Shape::List => {
                    Value::List(Arc::new(vec![Value::text("item 1"), Value::text("item 2")]))
                }
                Shape::Record => {
                    Value::record(vec![(Arc::from("value"), Value::text(c.text.as_str()))])
                }
                Shape::Int => Value::Int(1),
                Shape::Bool => Value::Bool(true),
            }),
        })
    }

    /// Records that `req` was asked of this driver.
    fn log(&self, req: &Request) {
        use std::io::Write;
        if let Some(path) = &self.opts.log {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                // One write per line: concurrent requests append whole lines.
                let _ = f.write_all(format!("{}\n", req.id).as_bytes());
            }
        }
    }
}

/// A scripted reply as the answer to `ask`: text for a session (other JSON as its text), a
/// boolean for a condition, an option's label or index for a choice, any value otherwise.
fn scripted(ask: &Ask, reply: serde_json::Value) -> Result<Answer, String> {
    use serde_json::Value as J;
    Ok(match (ask, reply) {
        (Ask::Session(_), J::String(s)) => Answer::Session(SessionAnswer::text(s)),
        (Ask::Session(_), j) => Answer::Session(SessionAnswer::text(j.to_string())),
        (Ask::Evaluate(_), J::Bool(b)) => Answer::Evaluate(b),
        (Ask::Evaluate(_), j) => return Err(format!("{j} is not a boolean")),
        (Ask::Choose(c), J::String(s)) => Answer::Choose(
            c.options
                .iter()
                .position(|o| *o == s)
                .ok_or_else(|| format!("{s:?} is none of the options {:?}", c.options))?,
        ),
        (Ask::Choose(_), j) => Answer::Choose(
            j.as_u64()
                .ok_or_else(|| format!("{j} is neither an option nor an index"))?
                as usize,
        ),
        (Ask::Input(_), j) => Answer::Input(Value::from_json(&j)),
        (Ask::Convert(_), j) => Answer::Convert(Value::from_json(&j)),
        (Ask::Turn(_), J::String(s)) => Answer::Turn(TurnAnswer::text(s)),
        (Ask::Turn(t), j) => Answer::Turn(scripted_turn(t, j)?),
        (Ask::Tool(_) | Ask::Permission(_), _) => {
            return Err("cannot answer a tool call or a permission".into())
        }
    })
}

/// A scripted turn: `{"text": ..., "tool_calls": [{"name": ..., "arguments": {...}}]}`; calls
/// without an `id` get `call_{turn}_{n}`.
fn scripted_turn(t: &TurnAsk, j: serde_json::Value) -> Result<TurnAnswer, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Call {
        #[serde(default)]
        id: Option<String>,
        name: String,
        #[serde(default)]
        arguments: serde_json::Value,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Turn {
        #[serde(default)]
        text: String,
        #[serde(default)]
        tool_calls: Vec<Call>,
    }
    let turn: Turn = serde_json::from_value(j.clone())
        .map_err(|e| format!("{j} is not a turn ({{\"text\", \"tool_calls\"}}): {e}"))?;
    let n = t
        .messages
        .iter()
        .filter(|m| matches!(m, Message::Assistant { .. }))
        .count();
    let tool_calls: Vec<ToolCall> = turn
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(i, c)| ToolCall {
            id: c.id.unwrap_or_else(|| format!("call_{n}_{i}")),
            name: c.name,
            arguments: c.arguments,
        })
        .collect();
    let stop = if tool_calls.is_empty() {
        Stop::End
    } else {
        Stop::ToolUse
    };
    Ok(TurnAnswer::new(turn.text, tool_calls, stop))
}

/// The task a turn's session was given: its first user message.
fn task_of(t: &TurnAsk) -> &str {
    t.messages
        .iter()
        .find_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .unwrap_or_default()
}

impl Driver for Mock {
    fn name(&self) -> &str {
        "mock"
    }

    async fn answer(&self, req: &Request, _live: &Live) -> Served {
        self.log(req);
        let (served, delay) = self.decide(req);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        served
    }

    fn observe(&self, req: &Request, _reply: &prose_machine::protocol::Reply) {
        // Deterministic: deciding again advances the per-site counters and scripted rules
        // exactly as the original answer did.
        let _ = self.decide(req);
    }

    fn side_effect_free(&self) -> bool {
        true
    }

    /// With `--mock-inputs` the mock stands in for the person answering inputs.
    fn hosts_people(&self) -> bool {
        self.opts.inputs
    }

    /// The mock runs sessions as agent loops when its script has rules for turns (so tool
    /// calls can be scripted); otherwise it answers whole sessions, which is faster.
    fn runs_turns(&self) -> bool {
        self.opts.script.iter().any(|r| r.kind == Some(Kind::Turn))
    }

    fn answer_now(&self, req: &Request) -> Option<Served> {
        if !self.opts.latency.is_zero() || self.opts.script.iter().any(|r| r.delay_ms.is_some()) {
            return None;
        }
        self.log(req);
        Some(self.decide(req).0)
    }
}
