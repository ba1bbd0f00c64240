//! `--trace json` lines: every trace event in an envelope that names the run, numbers the
//! line and stamps its time, so a tool reading the stream can order, join and time events.
//! Errors come as `error` events and the stream ends with an `end` event giving the status.
//!
//! ```text
//! {"run":"20250101-000000-abcdef","seq":0,"time":"2025-01-01T00:00:00.012Z","event":"program_start","name":"hello"}
//! {"run":"20250101-000000-abcdef","seq":9,"time":"2025-01-01T00:00:01.310Z","event":"end","status":"finished"}
//! ```

use prose_machine::trace::Event;
use prose_runtime::observe::rfc3339;
use prose_runtime::record::RunStatus;
use serde::Serialize;
use std::time::SystemTime;

/// Stamps the lines of one run's JSON trace.
pub struct Envelope {
    /// The run's id; none for the lines of a command that failed before its run began.
    run: Option<String>,
    seq: u64,
}

/// What a line carries: a trace event, or one of the lines only the envelope writes.
#[derive(Serialize)]
#[serde(untagged)]
enum Body<'a> {
    Event(&'a Event),
    Own(Own<'a>),
}

#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Own<'a> {
    /// Something went wrong that ends (or stops) the run.
    Error {
        message: &'a str,
        /// Its stable code (`E203`), when it has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<&'a str>,
    },
    /// Something went wrong beside the run (an export), which went on.
    Warning { message: &'a str },
    /// The run is over (or stopped): how it stands.
    End {
        status: RunStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'a str>,
    },
}

#[derive(Serialize)]
struct Line<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<&'a str>,
    seq: u64,
    time: String,
    #[serde(flatten)]
    body: Body<'a>,
}

impl Envelope {
    /// The envelope of run `run`'s lines, numbered from 0.
    pub fn new(run: impl Into<String>) -> Envelope {
        Envelope {
            run: Some(run.into()),
            seq: 0,
        }
    }

    /// The envelope of a command that failed before a run began: its lines name no run.
    pub fn unstarted() -> Envelope {
        Envelope { run: None, seq: 0 }
    }

    /// The envelope of run `run`'s lines, numbered from `seq`: a log of several drives of
    /// one run (started, then resumed) numbers its lines on.
    pub fn numbered_from(run: impl Into<String>, seq: u64) -> Envelope {
        Envelope {
            run: Some(run.into()),
            seq,
        }
    }

    fn line(&mut self, body: Body) -> String {
        let line = Line {
            run: self.run.as_deref(),
            seq: self.seq,
            time: rfc3339(SystemTime::now()),
            body,
        };
        self.seq += 1;
        serde_json::to_string(&line).unwrap_or_default()
    }

    /// The line of trace event `e`.
    pub fn event(&mut self, e: &Event) -> String {
        self.line(Body::Event(e))
    }

    /// An `error` line.
    pub fn error(&mut self, message: &str, code: Option<&str>) -> String {
        self.line(Body::Own(Own::Error { message, code }))
    }

    /// A `warning` line: something beside the run went wrong.
    pub fn warning(&mut self, message: &str) -> String {
        self.line(Body::Own(Own::Warning { message }))
    }

    /// The `end` line: the run's status and, when it failed, why.
    pub fn end(&mut self, status: RunStatus, error: Option<&str>) -> String {
        self.line(Body::Own(Own::End { status, error }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> serde_json::Value {
        serde_json::from_str(line).expect("a JSON line")
    }

    #[test]
    fn every_line_names_the_run_counts_and_stamps() {
        let mut env = Envelope::new("r1");
        let a = parse(&env.event(&Event::ProgramStart { name: "p".into() }));
        let b = parse(&env.event(&Event::TryEnter));
        let c = parse(&env.error("session 0:1 failed", Some("E203")));
        let d = parse(&env.end(RunStatus::Failed, Some("session 0:1 failed")));
        assert_eq!(
            (&a["run"], &a["seq"], &a["event"], &a["name"]),
            (
                &"r1".into(),
                &0.into(),
                &"program_start".into(),
                &"p".into()
            )
        );
        assert_eq!((&b["seq"], &b["event"]), (&1.into(), &"try_enter".into()));
        assert_eq!(
            (&c["event"], &c["message"], &c["code"]),
            (
                &"error".into(),
                &"session 0:1 failed".into(),
                &"E203".into()
            )
        );
        assert_eq!(
            (&d["seq"], &d["event"], &d["status"], &d["error"]),
            (
                &3.into(),
                &"end".into(),
                &"failed".into(),
                &"session 0:1 failed".into()
            )
        );
        // Before a run begins, a failure's line names none.
        let e = parse(&Envelope::unstarted().error("bad flag", None));
        assert!(e.get("run").is_none() && e.get("code").is_none(), "{e}");
        for line in [&a, &b, &c, &d] {
            let t = line["time"].as_str().expect("time");
            assert!(
                t.len() == 24 && t.ends_with('Z') && t.as_bytes()[10] == b'T',
                "{t}"
            );
        }
        let w = parse(&env.warning("export failed"));
        assert_eq!(
            (&w["seq"], &w["event"], &w["message"]),
            (&4.into(), &"warning".into(), &"export failed".into())
        );
        let finished = parse(&env.end(RunStatus::Finished, None));
        assert!(finished.get("error").is_none(), "{finished}");
    }
}
