//! The end-of-run summary: what a run did, accumulated from its trace events while it runs,
//! and a few lines for people once it ends (status, wall time, sessions, retries, tokens,
//! where the outputs and the run directory are, how to resume it).

use prose_machine::protocol::{RequestId, Usage};
use prose_machine::trace::Event;
use prose_runtime::observe::Observer;
use prose_runtime::observe::{grouped, human_duration, SessionLimits};
use prose_runtime::record::RunStatus;
use rustc_hash::{FxHashMap, FxHashSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// Counts of what a run did, as its events tell.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    /// Sessions asked.
    pub sessions: usize,
    /// Sessions answered.
    pub answered: usize,
    /// Sessions that failed for good (after their retries).
    pub failed: usize,
    /// Attempts made again after a failure.
    pub retries: usize,
    /// Model turns of agent loops.
    pub turns: usize,
    /// Tool calls of agent loops (refused ones included).
    pub tool_calls: usize,
    /// Requests a driver served (not replayed from the journal).
    pub served: usize,
    /// Tokens (cached input apart), cost and the memo's answers, summed over every request
    /// whose driver reported them.
    pub tokens: Option<Usage>,
    /// Agent loops asked for a plain answer because they went nowhere.
    pub nudges: usize,
}

/// Accumulates a [`Tally`] from trace events; renders the summary when the run ends.
pub struct Summary {
    started: Instant,
    sessions: FxHashSet<RequestId>,
    tally: Tally,
    limits: Option<SessionLimits>,
    /// Turns per session run as an agent loop.
    turns: FxHashMap<RequestId, u32>,
    /// When each session in flight started.
    open: FxHashMap<RequestId, Instant>,
    /// The longest a session took.
    longest: Duration,
    /// Milliseconds to the first token of every streamed provider request.
    first_tokens: Vec<u64>,
    /// The run came to wait for a mid-program input.
    waited_for_input: bool,
    /// The approvals it came to wait for, by id.
    waited_for_approvals: Vec<String>,
}

impl Default for Summary {
    fn default() -> Summary {
        Summary::new()
    }
}

/// How a run ended, as the summary reports it.
pub struct Ending<'a> {
    /// The run's id.
    pub run_id: &'a str,
    /// Its directory.
    pub run_dir: &'a Path,
    /// Its status.
    pub status: RunStatus,
    /// How many outputs it gave (when finished).
    pub outputs: usize,
    /// The error that ended it (when failed).
    pub error: Option<&'a str>,
    /// That error's stable code (`E203`).
    pub code: Option<&'a str>,
    /// The flags saying where the run is kept, when not in the default place (for the
    /// resume command): `--state-dir DIR`, `--store sqlite:PATH`.
    pub resume_with: Option<&'a str>,
}

impl Summary {
    /// A summary whose wall clock starts now.
    pub fn new() -> Summary {
        Summary {
            started: Instant::now(),
            sessions: FxHashSet::default(),
            tally: Tally::default(),
            limits: None,
            turns: FxHashMap::default(),
            open: FxHashMap::default(),
            longest: Duration::ZERO,
            first_tokens: Vec::new(),
            waited_for_input: false,
            waited_for_approvals: Vec::new(),
        }
    }

    /// The summary, saying how close sessions came to `limits`.
    pub fn with_limits(mut self, limits: SessionLimits) -> Summary {
        self.limits = Some(limits);
        self
    }

    /// The median time to the first token over the streamed requests, and how many there
    /// were.
    pub fn first_token(&self) -> Option<(u64, usize)> {
        let mut ms = self.first_tokens.clone();
        ms.sort_unstable();
        (!ms.is_empty()).then(|| (ms[ms.len() / 2], ms.len()))
    }

    /// The models' line: time to the first token, and the sessions against their limits.
    fn model_line(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some((median, n)) = self.first_token() {
            parts.push(format!(
                "first token after {} (median of {n} streamed request(s))",
                human_duration(Duration::from_millis(median))
            ));
        }
        if let (Some(limits), Some(most)) = (self.limits, self.turns.values().max()) {
            parts.push(format!(
                "most turns in one session {most} of {}",
                limits.turns
            ));
            let longest = human_duration(self.longest);
            parts.push(match limits.time {
                Some(t) => format!("longest session {longest} of {}", human_duration(t)),
                None => format!("longest session {longest}"),
            });
        }
        if self.tally.nudges > 0 {
            parts.push(format!(
                "{} session(s) stuck calling tools were asked for a plain answer",
                self.tally.nudges
            ));
        }
        (!parts.is_empty()).then(|| format!("[Summary] model: {}", parts.join("; ")))
    }

    /// What the run did so far.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Time since the summary started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The summary's lines, for a run that ended as `ending` says after `wall` time.
    pub fn lines(&self, ending: &Ending, wall: Duration) -> Vec<String> {
        let t = &self.tally;
        let mut first = format!(
            "[Summary] {} in {}: {} session(s)",
            ending.status.as_str(),
            human_duration(wall),
            t.sessions
        );
        if t.failed > 0 {
            first.push_str(&format!(" ({} failed)", t.failed));
        }
        first.push_str(&format!(", {} retr{}", t.retries, plural_y(t.retries)));
        if t.turns > 0 {
            first.push_str(&format!(
                ", {} turn(s), {} tool call(s)",
                t.turns, t.tool_calls
            ));
        }
        match t.tokens {
            Some(u) if u.tokens() > 0 || u.from_memo > 0 => {
                let mut input = format!("{} in", grouped(u.input_tokens()));
                let cache: Vec<String> = [
                    (u.cache_read_tokens, "from the cache"),
                    (u.cache_write_tokens, "written to it"),
                ]
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, what)| format!("{} {what}", grouped(*n)))
                .collect();
                if !cache.is_empty() {
                    input.push_str(&format!(" ({})", cache.join(", ")));
                }
                first.push_str(&format!(
                    ", tokens {input} / {} out",
                    grouped(u.output_tokens)
                ))
            }
            _ => first.push_str(", tokens not reported"),
        }
        // What the priced replies cost (a model with no price adds none).
        if let Some(cost) = t.tokens.and_then(|u| u.cost) {
            first.push_str(&format!(", cost ${cost:.4}"));
        }
        let dir = ending.run_dir.display();
        let mut lines = vec![first];
        lines.extend(self.model_line());
        lines.extend(prose_runtime::driver::pace::shrunk().iter().map(|r| {
            format!(
                "[Summary] provider {}: window {} (lowest {}), {} of {} requests refused",
                r.label, r.window, r.least, r.refused, r.sent
            )
        }));
        if let Some(u) = t.tokens.filter(|u| u.from_memo + u.asked > 0) {
            lines.push(format!(
                "[Summary] memo: {} answer(s) from the memo, {} asked",
                u.from_memo, u.asked
            ));
        }
        match ending.status {
            RunStatus::Finished => lines.push(format!(
                "[Summary] outputs: {} on stdout, kept in {dir}/run.json and {dir}/bindings/",
                ending.outputs
            )),
            _ => {
                if let Some(e) = ending.error {
                    lines.push(format!("[Summary] error: {e}"));
                }
            }
        }
        lines.push(format!("[Summary] run directory: {dir}"));
        if ending.status == RunStatus::Waiting {
            for answer in self.answer_commands(ending.run_id, ending.resume_with) {
                lines.push(format!("[Summary] answer: {answer}"));
            }
        }
        if ending.status != RunStatus::Finished {
            lines.push(format!(
                "[Summary] resume: {}",
                resume_command(ending.run_id, ending.resume_with)
            ));
        }
        lines
    }
}

fn plural_y(n: usize) -> &'static str {
    if n == 1 {
        "y"
    } else {
        "ies"
    }
}

/// The command that resumes run `id` (with the flags saying where it is kept, when it is
/// not in the default place).
pub fn resume_command(id: &str, resume_with: Option<&str>) -> String {
    match resume_with {
        Some(flags) => format!("prosevm resume {id} {flags}"),
        None => format!("prosevm resume {id}"),
    }
}

impl Summary {
    /// The commands answering what run `id` came to wait for (found with `resume_with`, as
    /// for [`resume_command`]): its inputs, then each approval.
    pub fn answer_commands(&self, id: &str, resume_with: Option<&str>) -> Vec<String> {
        let flags = resume_with.map(|f| format!(" {f}")).unwrap_or_default();
        let mut commands = Vec::new();
        if self.waited_for_input || self.waited_for_approvals.is_empty() {
            commands.push(format!("prosevm answer {id} NAME=VALUE{flags}"));
        }
        for a in &self.waited_for_approvals {
            commands.push(format!(
                "prosevm answer {id} --approve {a}{flags} (or --deny {a})"
            ));
        }
        commands
    }

    /// Session `id` ended: how long it took counts.
    fn close(&mut self, id: &RequestId) {
        if let Some(started) = self.open.remove(id) {
            self.longest = self.longest.max(started.elapsed());
        }
    }
}

impl Observer for Summary {
    fn event(&mut self, e: &Event) {
        let t = &mut self.tally;
        match e {
            Event::Session { id, .. } => {
                if self.sessions.insert(id.clone()) {
                    t.sessions += 1;
                }
                self.open.entry(id.clone()).or_insert_with(Instant::now);
            }
            Event::Answer { id, .. } => {
                t.answered += 1;
                self.close(id);
            }
            Event::RequestFailed { id, .. } if self.sessions.contains(id) => {
                t.failed += 1;
                self.close(id);
            }
            Event::Retry { .. } => t.retries += 1,
            Event::Nudge { .. } => t.nudges += 1,
            Event::Turn {
                id, first_token_ms, ..
            } => {
                t.turns += 1;
                *self.turns.entry(id.whole()).or_default() += 1;
                self.first_tokens.extend(*first_token_ms);
            }
            Event::ToolCall { .. } => t.tool_calls += 1,
            Event::Waiting { .. } => self.waited_for_input = true,
            Event::Approval { approval, .. } if !self.waited_for_approvals.contains(approval) => {
                self.waited_for_approvals.push(approval.clone());
            }
            Event::Usage {
                id,
                used,
                first_token_ms,
                ..
            } => {
                t.served += 1;
                // A session's first token is its first turn's, already counted.
                if !self.turns.contains_key(id) {
                    self.first_tokens.extend(*first_token_ms);
                }
                if let Some(u) = used {
                    *t.tokens.get_or_insert_with(Usage::default) += *u;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prose_machine::protocol::{Lineage, Step};

    fn id(s: &str) -> RequestId {
        s.parse().expect("id")
    }

    fn session(n: &str) -> Event {
        Event::Session {
            id: id(n),
            module: 0,
            line: 3,
            text: "task".into(),
            agent: Some("writer".into()),
            model: None,
            exec: 0,
        }
    }

    fn usage(n: &str, tokens: Option<(u64, u64)>) -> Event {
        Event::usage(&id(n), 10, None, tokens.map(|(i, o)| Usage::plain(i, o)))
    }

    #[test]
    fn a_tally_counts_sessions_retries_turns_tools_and_tokens() {
        let mut s = Summary::new();
        let events = [
            session("0:0"),
            Event::Turn {
                id: id("0:0#t0"),
                tool_calls: 1,
                ms: 5,
                first_token_ms: Some(400),
                used: Some(Usage::plain(100, 20)),
            },
            Event::ToolCall {
                id: RequestId::new(Lineage::root(), 0).step(Step::Call { turn: 0, call: 0 }),
                tool: "read_file".into(),
                arguments: "{}".into(),
                refused: None,
                is_error: false,
                ms: 1,
                bytes: 10,
            },
            Event::Turn {
                id: id("0:0#t1"),
                tool_calls: 0,
                ms: 5,
                first_token_ms: Some(200),
                used: Some(Usage::plain(150, 30)),
            },
            usage("0:0", Some((250, 50))),
            Event::Answer {
                id: id("0:0"),
                text: "done".into(),
                bound: true,
            },
            session("0/0.1:0"),
            Event::Retry {
                id: id("0/0.1:0"),
                attempt: 2,
                error: "boom".into(),
            },
            usage("0/0.1:0", Some((7, 3))),
            Event::RequestFailed {
                id: id("0/0.1:0"),
                error: "boom".into(),
            },
            Event::Evaluate {
                condition: "done".into(),
            },
            usage("0:1", None),
            Event::RequestFailed {
                id: id("0:1"),
                error: "not a session".into(),
            },
        ];
        for e in &events {
            s.event(e);
        }
        assert_eq!(
            *s.tally(),
            Tally {
                sessions: 2,
                answered: 1,
                failed: 1,
                retries: 1,
                turns: 2,
                tool_calls: 1,
                served: 3,
                tokens: Some(Usage::plain(257, 53)),
                nudges: 0,
            }
        );
        assert_eq!(s.first_token(), Some((400, 2)), "each turn's first token");
    }

    #[test]
    fn the_model_line_shows_first_tokens_and_sessions_against_their_limits() {
        let mut s = Summary::new().with_limits(SessionLimits {
            turns: 40,
            time: Some(Duration::from_secs(300)),
        });
        s.event(&session("0:0"));
        for (n, ms) in [(0, 1500), (1, 700), (2, 900)] {
            s.event(&Event::Turn {
                id: id(&format!("0:0#t{n}")),
                tool_calls: 0,
                ms: 2000,
                first_token_ms: Some(ms),
                used: None,
            });
        }
        s.event(&Event::Nudge {
            id: id("0:0"),
            why: "it kept calling `greet`".into(),
        });
        s.event(&Event::Answer {
            id: id("0:0"),
            text: "done".into(),
            bound: true,
        });
        let line = s.model_line().expect("a model line");
        assert!(
            line.starts_with("[Summary] model: first token after 900ms (median of 3 streamed request(s)); most turns in one session 3 of 40; longest session "),
            "{line}"
        );
        assert!(line.contains(" of 5m00s;"), "{line}");
        assert!(
            line.ends_with("1 session(s) stuck calling tools were asked for a plain answer"),
            "{line}"
        );
        assert_eq!(Summary::new().model_line(), None, "nothing to say");
    }

    #[test]
    fn a_failed_run_says_why_and_how_to_resume_it() {
        let mut s = Summary::new();
        s.event(&session("0:0"));
        s.event(&Event::RequestFailed {
            id: id("0:0"),
            error: "rate limited".into(),
        });
        let dir = Path::new("/w/.state/runs/20250101-000000-abcdef");
        let lines = s.lines(
            &Ending {
                run_id: "20250101-000000-abcdef",
                run_dir: dir,
                status: RunStatus::Failed,
                outputs: 0,
                error: Some("session failed: rate limited"),
                code: Some("E203"),
                resume_with: Some("--state-dir /w/.state"),
            },
            Duration::from_millis(12_300),
        );
        assert_eq!(
            lines,
            [
                "[Summary] failed in 12.3s: 1 session(s) (1 failed), 0 retries, tokens not reported",
                "[Summary] error: session failed: rate limited",
                "[Summary] run directory: /w/.state/runs/20250101-000000-abcdef",
                "[Summary] resume: prosevm resume 20250101-000000-abcdef --state-dir /w/.state",
            ]
        );
    }

    /// A summary that saw session `id` use `used` (`ms` to its first token), and its lines
    /// once the run finished with `outputs` outputs in `took`.
    fn used(s: &mut Summary, id_: &str, ms: u64, used: Usage) {
        s.event(&session(id_));
        s.event(&Event::usage(&id(id_), ms, None, Some(used)));
    }

    fn finished(s: &Summary, outputs: usize, took: Duration) -> Vec<String> {
        s.lines(
            &Ending {
                run_id: "r",
                run_dir: Path::new(".prose/runs/r"),
                status: RunStatus::Finished,
                outputs,
                error: None,
                code: None,
                resume_with: None,
            },
            took,
        )
    }

    #[test]
    fn a_finished_run_points_at_its_outputs_and_shows_a_known_cost() {
        let mut s = Summary::new();
        let usage = Usage {
            cost: Some(0.0123),
            ..Usage::plain(12_345, 678)
        };
        used(&mut s, "0:0", 10, usage);
        let lines = finished(&s, 2, Duration::from_secs(61));
        assert_eq!(
            lines,
            [
                "[Summary] finished in 1m01s: 1 session(s), 0 retries, tokens 12,345 in / 678 out, cost $0.0123",
                "[Summary] outputs: 2 on stdout, kept in .prose/runs/r/run.json and .prose/runs/r/bindings/",
                "[Summary] run directory: .prose/runs/r",
            ]
        );
    }

    #[test]
    fn cached_input_and_the_memos_answers_are_said_apart() {
        let mut s = Summary::new();
        let cached = Usage {
            cache_read_tokens: 2_400,
            cache_write_tokens: 300,
            cost: Some(0.0021),
            asked: 1,
            ..Usage::plain(45, 20)
        };
        used(&mut s, "0:0", 10, cached);
        let memo = Usage {
            from_memo: 3,
            ..Usage::default()
        };
        used(&mut s, "0:1", 0, memo);
        let lines = finished(&s, 1, Duration::from_secs(1));
        assert_eq!(
            lines[..2],
            [
                "[Summary] finished in 1.0s: 2 session(s), 0 retries, tokens 2,745 in (2,400 from the cache, 300 written to it) / 20 out, cost $0.0021",
                "[Summary] memo: 3 answer(s) from the memo, 1 asked",
            ]
        );
    }
}
