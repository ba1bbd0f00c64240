//! The mock driver: deterministic and offline. Sessions answer with text derived from their
//! prompt; conditions follow `--mock-conditions`; choices take the first option; inputs get
//! placeholders (with `--mock-inputs`); conversions get a small value of the asked shape.
//! A script (`--mock-script file.json`) overrides any of this per request site or prompt.

use super::{Answer, Driver, DriverError, SessionAnswer};
use crate::request::{Reply, Request, RequestKind, SessionRequest};
use crate::value::Value;
use bytecode_spec::Shape;
use serde::Deserialize;
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
#[derive(Clone, Debug, Deserialize)]
pub struct Rule {
    /// Matches requests from this site (`program:line`).
    #[serde(default)]
    pub site: Option<String>,
    /// Matches sessions whose prompt (or label) contains this text.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Matches requests of this kind (`session`, `evaluate`, `choose`, `input`, `convert`).
    #[serde(default)]
    pub kind: Option<String>,
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

/// Options of the mock driver.
#[derive(Clone, Debug, Default)]
pub struct MockOptions {
    /// How conditions are answered (default: true).
    pub conditions: Option<Conditions>,
    /// Answer every input with a placeholder.
    pub inputs: bool,
    /// Delay before every answer.
    pub latency: Duration,
    /// Scripted answers, tried in order.
    pub script: Vec<Rule>,
    /// Append the id of every request served to this file (for tests of durable runs).
    pub log: Option<std::path::PathBuf>,
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

fn kind_name(k: &RequestKind) -> &'static str {
    match k {
        RequestKind::Session(_) => "session",
        RequestKind::Evaluate { .. } => "evaluate",
        RequestKind::Choose { .. } => "choose",
        RequestKind::Input { .. } => "input",
        RequestKind::Convert { .. } => "convert",
    }
}

/// A short deterministic answer derived from a prompt.
pub fn answer_for(prompt: &str) -> String {
    let first: String = prompt
        .split_whitespace()
        .take(8)
        .collect::<Vec<_>>()
        .join(" ");
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
            let kind_ok = rule
                .kind
                .as_deref()
                .is_none_or(|k| k == kind_name(&req.kind));
            let site_ok = rule.site.as_deref().is_none_or(|s| s == req.site);
            let prompt_ok = rule.prompt.as_deref().is_none_or(|p| match &req.kind {
                RequestKind::Session(s) => {
                    s.prompt.contains(p) || s.label.as_deref().is_some_and(|l| l.contains(p))
                }
                RequestKind::Evaluate { condition, .. } => condition.contains(p),
                RequestKind::Choose { criteria, .. } => criteria.contains(p),
                RequestKind::Input { name, question } => name.contains(p) || question.contains(p),
                RequestKind::Convert { text, .. } => text.contains(p),
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
    fn decide(&self, req: &Request) -> (Reply, Duration) {
        let rule = self.rule(req);
        let delay = rule
            .as_ref()
            .and_then(|r| r.delay_ms)
            .map(Duration::from_millis)
            .unwrap_or_default()
            .max(self.opts.latency);
        (self.reply(req, rule), delay)
    }

    fn reply(&self, req: &Request, rule: Option<Rule>) -> Reply {
        if let Some(rule) = rule {
            if let Some(msg) = rule.fail {
                return Reply::Failed(msg);
            }
            if let Some(reply) = rule.reply {
                return match (&req.kind, reply) {
                    (RequestKind::Session(_), serde_json::Value::String(s)) => Reply::Text(s),
                    (RequestKind::Session(_), j) => Reply::Text(j.to_string()),
                    (RequestKind::Evaluate { .. }, serde_json::Value::Bool(b)) => Reply::Bool(b),
                    (RequestKind::Choose { options, .. }, serde_json::Value::String(s)) => {
                        Reply::Choice(options.iter().position(|o| *o == s).unwrap_or(0))
                    }
                    (RequestKind::Choose { .. }, j) => {
                        Reply::Choice(j.as_u64().unwrap_or(0) as usize)
                    }
                    (_, j) => Reply::Value(Value::from_json(&j)),
                };
            }
        }
        match &req.kind {
            RequestKind::Session(s) if s.persistent => {
                // A persistent agent keeps one line per session in its memory.
                let text = answer_for(&s.prompt);
                let agent = s.agent.as_deref().unwrap_or("agent");
                let line = format!("- {agent} answered: {text}");
                let memory = match &s.memory {
                    Some(m) => format!("{m}\n{line}"),
                    None => line,
                };
                Reply::Remembered { text, memory }
            }
            RequestKind::Session(s) => Reply::Text(answer_for(&s.prompt)),
            RequestKind::Evaluate { .. } => {
                Reply::Bool(match self.opts.conditions.unwrap_or(Conditions::True) {
                    Conditions::True => true,
                    Conditions::False => false,
                    Conditions::After(n) => {
                        let mut state = match self.state.lock() {
                            Ok(s) => s,
                            Err(_) => return Reply::Failed("mock state poisoned".into()),
                        };
                        let seen = state.false_so_far.entry(req.site.clone()).or_insert(0);
                        if *seen < n {
                            *seen += 1;
                            false
                        } else {
                            true
                        }
                    }
                })
            }
            RequestKind::Choose { .. } => Reply::Choice(0),
            RequestKind::Input { name, .. } if self.opts.inputs => {
                Reply::Value(Value::text(format!("<{name}>")))
            }
            RequestKind::Input { name, .. } => Reply::Failed(format!(
                "no value for input `{name}` (the mock driver answers inputs with --mock-inputs)"
            )),
            RequestKind::Convert { text, shape } => Reply::Value(match shape {
                Shape::List => {
                    Value::List(Arc::new(vec![Value::text("item 1"), Value::text("item 2")]))
                }
                Shape::Record => {
                    Value::record(vec![(Arc::from("value"), Value::text(text.as_str()))])
                }
                Shape::Int => Value::Int(1),
                Shape::Bool => Value::Bool(true),
            }),
        }
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
                let _ = writeln!(f, "{}", req.id);
            }
        }
    }

    async fn wait(&self, req: &Request) -> Reply {
        self.log(req);
        let (reply, delay) = self.decide(req);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        reply
    }
}

fn expect<T>(r: Reply, f: impl FnOnce(Reply) -> Option<T>) -> Answer<T> {
    match r {
        Reply::Failed(m) => Err(DriverError(m)),
        other => f(other)
            .ok_or_else(|| DriverError("the mock script gives the wrong kind of answer".into())),
    }
}

impl Driver for Mock {
    fn name(&self) -> &str {
        "mock"
    }

    async fn session(&self, req: &Request, _: &SessionRequest) -> Answer<SessionAnswer> {
        expect(self.wait(req).await, |r| match r {
            Reply::Text(t) => Some(t.into()),
            Reply::Remembered { text, memory } => Some(SessionAnswer {
                text,
                memory: Some(memory),
            }),
            _ => None,
        })
    }

    async fn evaluate(&self, req: &Request, _: &str) -> Answer<bool> {
        expect(self.wait(req).await, |r| match r {
            Reply::Bool(b) => Some(b),
            _ => None,
        })
    }

    async fn choose(&self, req: &Request, _: &[String]) -> Answer<usize> {
        expect(self.wait(req).await, |r| match r {
            Reply::Choice(c) => Some(c),
            _ => None,
        })
    }

    async fn input(&self, req: &Request, _: &str) -> Answer<Value> {
        expect(self.wait(req).await, |r| match r {
            Reply::Value(v) => Some(v),
            Reply::Text(t) => Some(Value::text(t)),
            _ => None,
        })
    }

    async fn convert(&self, req: &Request, _: &str, _: Shape) -> Answer<Value> {
        expect(self.wait(req).await, |r| match r {
            Reply::Value(v) => Some(v),
            _ => None,
        })
    }

    fn observe(&self, req: &Request, _reply: &Reply) {
        // Deterministic: deciding again advances the per-site counters and scripted rules
        // exactly as the original answer did.
        let _ = self.decide(req);
    }

    fn side_effect_free(&self) -> bool {
        true
    }

    fn answer_now(&self, req: &Request) -> Option<Reply> {
        if !self.opts.latency.is_zero() || self.opts.script.iter().any(|r| r.delay_ms.is_some()) {
            return None;
        }
        self.log(req);
        Some(self.decide(req).0)
    }
}
