//! Model exchanges on tape: `--record FILE` keeps every request a chat driver sends (its
//! JSON body; never a header, so never a key) with the provider's reply as it came (the
//! events of a stream, a whole JSON body, a refusal or a fault), one exchange per line;
//! `--replay FILE` answers from such a file without a provider and fails on any request it
//! does not hold. A replayed reply goes through the same assembly, runaway watch and parsing
//! as a live one, so a tape recorded from a real model tests the whole way from the wire.
//!
//! The file starts with a header line naming the API it was recorded from.

use super::dialect::Provider;
use crate::driver::http::Refusal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The first line of a tape.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    /// The tape format's version.
    prose_tape: u32,
    /// `openai` or `anthropic`.
    api: String,
}

/// The tape format this build writes and reads.
const VERSION: u32 = 1;

/// One event of a stream as it was sent: its name (`event:`) if any, and its data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sent(pub Option<String>, pub String);

/// What the provider did with one request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// It answered with one JSON body.
    Body {
        /// The body.
        body: Value,
    },
    /// It streamed events; `fault` says how the stream failed, when it did (the events are
    /// those received before).
    Stream {
        /// The events, in order.
        events: Vec<Sent>,
        /// Why the stream was not taken whole.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fault: Option<String>,
    },
    /// It refused with a status other than 2xx.
    Refused(Refusal),
    /// It could not be reached, or did not answer in time.
    Fault {
        /// What went wrong.
        message: String,
    },
}

/// One request and its reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// The request's JSON body.
    pub request: Value,
    /// The reply.
    #[serde(flatten)]
    pub reply: Reply,
}

/// Appends exchanges to a tape file.
pub struct Recorder {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl Recorder {
    /// Records to `path` (appending to a tape of the same API, or starting one).
    pub fn open(path: &Path, api: Provider) -> Result<Recorder, String> {
        let fail = |e: std::io::Error| format!("--record {}: {e}", path.display());
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Some(first) = text.lines().next() {
                let header: Header = serde_json::from_str(first).map_err(|_| {
                    format!(
                        "--record {}: not a tape (its first line is no tape header)",
                        path.display()
                    )
                })?;
                if header.api != api.name() {
                    return Err(format!(
                        "--record {}: a tape of the {} API, not {}",
                        path.display(),
                        header.api,
                        api.name()
                    ));
                }
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(fail)?;
        if file.metadata().map_err(fail)?.len() == 0 {
            let header = Header {
                prose_tape: VERSION,
                api: api.name().into(),
            };
            writeln!(file, "{}", json_line(&header)).map_err(fail)?;
        }
        Ok(Recorder {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Appends `exchange`; a tape that cannot be written is an error of the request (a
    /// recording with holes would fail its replay later, far from the cause).
    pub fn write(&self, exchange: &Exchange) -> Result<(), String> {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        writeln!(file, "{}", json_line(exchange))
            .map_err(|e| format!("cannot write the tape {}: {e}", self.path.display()))
    }
}

fn json_line(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Answers requests from a tape.
pub struct Player {
    path: PathBuf,
    api: Provider,
    /// Exchanges not yet replayed, in the order they were recorded.
    left: Mutex<Vec<Exchange>>,
}

impl Player {
    /// Loads the tape at `path`.
    pub fn open(path: &Path) -> Result<Player, String> {
        let what = |e: String| format!("--replay {}: {e}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| what(e.to_string()))?;
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let header: Header = lines
            .next()
            .and_then(|(_, l)| serde_json::from_str(l).ok())
            .ok_or_else(|| what("not a tape (its first line is no tape header)".into()))?;
        if header.prose_tape != VERSION {
            return Err(what(format!(
                "a tape of format {}, and this prosevm reads format {VERSION}",
                header.prose_tape
            )));
        }
        let Some(api) = Provider::named(&header.api) else {
            return Err(what(format!("a tape of an unknown API `{}`", header.api)));
        };
        let mut left = Vec::new();
        for (n, line) in lines {
            left.push(
                serde_json::from_str(line).map_err(|e| what(format!("line {}: {e}", n + 1)))?,
            );
        }
        Ok(Player {
            path: path.to_path_buf(),
            api,
            left: Mutex::new(left),
        })
    }

    /// The API the tape was recorded from.
    pub fn provider(&self) -> Provider {
        self.api
    }

    /// Whether the tape was recorded with agent-loop turns asked structured (any of its
    /// requests was): replayed, they are asked the same way.
    pub fn structured(&self) -> bool {
        let left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        left.iter()
            .any(|x| super::dialect::openai::structured::asked(&x.request))
    }

    /// The reply recorded for `request` (the first not yet replayed, when it was sent more
    /// than once). A request the tape does not hold is an error that says where it differs
    /// from the closest one the tape does hold.
    pub fn reply(&self, request: &Value) -> Result<Reply, String> {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = left.iter().position(|x| &x.request == request) {
            return Ok(left.remove(at).reply);
        }
        let closest = left
            .iter()
            .map(|x| difference(&x.request, request, String::new()))
            .max_by_key(|(depth, _)| *depth)
            .map(|(_, at)| format!("; the closest recorded request differs at {at}"))
            .unwrap_or_else(|| "; every recorded exchange was replayed already".into());
        Err(format!(
            "the tape {} holds no reply to this request{closest} (record it again with --record)",
            self.path.display()
        ))
    }
}

/// Where `a` and `b` first differ (a JSON path), and how deep the common part goes.
fn difference(a: &Value, b: &Value, at: String) -> (usize, String) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let path = format!("{at}.{k}");
                match y.get(k) {
                    Some(w) if w == v => {}
                    Some(w) => {
                        let (d, p) = difference(v, w, path);
                        return (d + 1, p);
                    }
                    None => return (0, path),
                }
            }
            match y.keys().find(|k| !x.contains_key(*k)) {
                Some(k) => (0, format!("{at}.{k}")),
                None => (0, at),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                if v != w {
                    let (d, p) = difference(v, w, format!("{at}[{i}]"));
                    return (d + 1 + i, p);
                }
            }
            (
                x.len().min(y.len()),
                format!("{at}[{}]", x.len().min(y.len())),
            )
        }
        _ => (0, if at.is_empty() { "the top".into() } else { at }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_recorded_tape_replays_in_order_and_refuses_what_it_lacks() {
        let dir = std::env::temp_dir().join(format!("prose-tape-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("t.jsonl");
        let _ = std::fs::remove_file(&path);
        let req = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let rec = Recorder::open(&path, Provider::OpenAi).expect("open");
        rec.write(&Exchange {
            request: req.clone(),
            reply: Reply::Refused(Refusal {
                status: 503,
                text: "busy".into(),
                retry_after_s: Some(0.1),
            }),
        })
        .expect("write");
        rec.write(&Exchange {
            request: req.clone(),
            reply: Reply::Stream {
                events: vec![Sent(None, "[DONE]".into())],
                fault: None,
            },
        })
        .expect("write");
        drop(rec);
        assert!(
            Recorder::open(&path, Provider::Anthropic).is_err(),
            "another API"
        );
        let player = Player::open(&path).expect("load");
        assert_eq!(player.provider(), Provider::OpenAi);
        assert!(matches!(
            player.reply(&req),
            Ok(Reply::Refused(Refusal { status: 503, .. }))
        ));
        assert!(matches!(player.reply(&req), Ok(Reply::Stream { .. })));
        let other = json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]});
        let e = player.reply(&other).expect_err("not held");
        assert!(e.contains("every recorded exchange was replayed"), "{e}");
        let player = Player::open(&path).expect("load");
        let e = player.reply(&other).expect_err("not held");
        assert!(e.contains(".messages[0].content"), "{e}");
        std::fs::write(&path, "{\"request\": 1}\n").expect("write");
        assert!(Player::open(&path).is_err(), "no header");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
