//! Live progress on a terminal: a line per session in flight (its agent, request id, source
//! line, elapsed time, turns, tool calls and tokens so far), a status line for the whole run,
//! and a permanent line above them for each session that finishes, each retry and each
//! warning. Used instead of the narration when stderr is a terminal; the narration stays
//! what pipes and files get.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use prose_machine::protocol::{RequestId, Usage};
use prose_machine::trace::Event;
use prose_runtime::observe::Observer;
use prose_runtime::observe::{grouped, human_duration, SessionLimits};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Sessions shown with a line of their own at once; the others wait for a free line.
const MAX_LINES: usize = 8;

/// How often the spinners and clocks move.
const TICK: Duration = Duration::from_millis(120);

/// Bytes of a session's streamed answer kept for its line.
const STREAM_TAIL: usize = 512;

/// Characters of a session's streamed answer shown.
const STREAM_SHOWN: usize = 100;

/// A session in flight.
struct Live {
    agent: Option<String>,
    line: u32,
    text: String,
    started: Instant,
    turns: usize,
    tool_calls: usize,
    tokens: Option<Usage>,
    bar: Option<ProgressBar>,
    /// The end of the answer being streamed, if one is.
    streamed: String,
}

impl Live {
    /// What the session did so far: ` · 3 turn(s) · 2 tool call(s) · 1,200 in / 80 out
    /// tokens`, each part when there is something to say; turns against the limit when
    /// there is one.
    fn work(&self, limits: Option<SessionLimits>) -> String {
        let mut w = String::new();
        match limits {
            Some(l) if self.turns > 0 => {
                w.push_str(&format!(" · turn {}/{}", self.turns, l.turns));
            }
            _ if self.turns > 0 => w.push_str(&format!(" · {} turn(s)", self.turns)),
            _ => {}
        }
        if self.tool_calls > 0 {
            w.push_str(&format!(" · {} tool call(s)", self.tool_calls));
        }
        if let Some(t) = self.tokens {
            w.push_str(&format!(" · {}", tokens(t)));
        }
        w
    }

    fn message(&self, id: &RequestId, limits: Option<SessionLimits>) -> String {
        let mut m = format!(
            "{} {id} line {}",
            self.agent.as_deref().unwrap_or("session"),
            self.line
        );
        m.push_str(&self.work(limits));
        if let Some(t) = limits.and_then(|l| l.time) {
            m.push_str(&format!(" · limit {}", human_duration(t)));
        }
        m.push_str(&format!(" · {}", first_line(&self.text, 48)));
        // The streamed line fits the terminal, after its 8 columns of indent and arrow.
        let room = prose_agent::terminal::width()
            .map_or(STREAM_SHOWN, |w| usize::from(w).saturating_sub(9));
        let tail = last_line(&self.streamed, room.min(STREAM_SHOWN));
        if !tail.is_empty() {
            m.push_str(&format!("\n      ↳ {tail}"));
        }
        m
    }

    /// More of the answer streamed (or, with `restart`, a new attempt at it).
    fn stream(&mut self, text: &str, restart: bool) {
        if restart {
            self.streamed.clear();
        }
        self.streamed.push_str(text);
        if self.streamed.len() > STREAM_TAIL {
            let mut cut = self.streamed.len() - STREAM_TAIL;
            while !self.streamed.is_char_boundary(cut) {
                cut += 1;
            }
            self.streamed.drain(..cut);
        }
    }
}

/// The last line of `s` that has something on it, its last `max` characters.
fn last_line(s: &str, max: usize) -> String {
    let line = s
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let n = line.chars().count();
    if n > max {
        format!(
            "...{}",
            line.chars().skip(n - (max - 3)).collect::<String>()
        )
    } else {
        line.to_string()
    }
}

fn tokens(t: Usage) -> String {
    let mut out = format!(
        "{} in / {} out tokens",
        grouped(t.input_tokens()),
        grouped(t.output_tokens)
    );
    if t.cache_read_tokens > 0 {
        out.push_str(&format!(" ({} cached)", grouped(t.cache_read_tokens)));
    }
    if t.from_memo > 0 {
        out.push_str(&format!(" · {} from the memo", t.from_memo));
    }
    out
}

fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    if line.chars().count() > max {
        format!("{}...", line.chars().take(max - 3).collect::<String>())
    } else {
        line.to_string()
    }
}

/// The live progress display: an [`Observer`].
pub struct Progress {
    multi: MultiProgress,
    status: ProgressBar,
    tick: Option<Duration>,
    live: BTreeMap<RequestId, Live>,
    done: usize,
    failed: usize,
    tokens: Option<Usage>,
    registered: bool,
    limits: Option<SessionLimits>,
}

impl Progress {
    /// A display on this process's stderr (which should be a terminal), showing sessions
    /// against `limits`.
    pub fn stderr(limits: SessionLimits) -> Progress {
        let mut p = Progress::to(ProgressDrawTarget::stderr(), Some(TICK));
        p.limits = Some(limits);
        p.registered = prose_agent::terminal::register(Some(p.multi.clone()));
        p
    }

    /// A display drawing on `target`, its clocks moving every `tick` (or only when something
    /// happens).
    fn to(target: ProgressDrawTarget, tick: Option<Duration>) -> Progress {
        let multi = MultiProgress::with_draw_target(target);
        let status = multi.add(ProgressBar::new_spinner().with_style(style()));
        if let Some(t) = tick {
            status.enable_steady_tick(t);
        }
        let p = Progress {
            multi,
            status,
            tick,
            live: BTreeMap::new(),
            done: 0,
            failed: 0,
            tokens: None,
            registered: false,
            limits: None,
        };
        p.update_status();
        p
    }

    /// Clears the display (the finished sessions' lines stay).
    pub fn finish(&mut self) {
        for live in self.live.values_mut() {
            if let Some(bar) = live.bar.take() {
                bar.finish_and_clear();
                self.multi.remove(&bar);
            }
        }
        self.status.finish_and_clear();
        if self.registered {
            prose_agent::terminal::register(None);
            self.registered = false;
        }
    }

    fn update_status(&self) {
        let mut m = format!("{} in flight · {} done", self.live.len(), self.done);
        if self.failed > 0 {
            m.push_str(&format!(" · {} failed", self.failed));
        }
        if let Some(t) = self.tokens {
            m.push_str(&format!(" · {}", tokens(t)));
        }
        // A provider's window, once it shrank (a provider refused requests).
        let windows: Vec<String> = prose_runtime::driver::pace::shrunk()
            .iter()
            .map(|r| r.window.to_string())
            .collect();
        if !windows.is_empty() {
            m.push_str(&format!(" · window {}", windows.join(", ")));
        }
        self.status.set_message(m);
    }

    fn println(&self, line: String) {
        let _ = self.multi.println(line);
    }

    /// Gives lines to sessions waiting for one, oldest first, while lines are free.
    fn fill_lines(&mut self) {
        let shown = self.live.values().filter(|l| l.bar.is_some()).count();
        let mut waiting: Vec<(Instant, RequestId)> = self
            .live
            .iter()
            .filter(|(_, l)| l.bar.is_none())
            .map(|(id, l)| (l.started, id.clone()))
            .collect();
        waiting.sort();
        for (_, id) in waiting.into_iter().take(MAX_LINES.saturating_sub(shown)) {
            let Some(live) = self.live.get_mut(&id) else {
                continue;
            };
            let bar = ProgressBar::new_spinner()
                .with_style(style())
                .with_elapsed(live.started.elapsed())
                .with_message(live.message(&id, self.limits));
            let bar = self.multi.insert_before(&self.status, bar);
            if let Some(t) = self.tick {
                bar.enable_steady_tick(t);
            }
            live.bar = Some(bar);
        }
    }

    fn refresh(&self, id: &RequestId) {
        if let Some(live) = self.live.get(id) {
            if let Some(bar) = &live.bar {
                bar.set_message(live.message(id, self.limits));
            }
        }
    }

    /// Session `id` ended: its line goes, and a permanent one says how it went.
    fn ended(&mut self, id: &RequestId, failure: Option<&str>) {
        let Some(live) = self.live.remove(id) else {
            return;
        };
        if let Some(bar) = &live.bar {
            bar.finish_and_clear();
            self.multi.remove(bar);
        }
        let who = live.agent.as_deref().unwrap_or("session");
        let took = human_duration(live.started.elapsed());
        let line = match failure {
            Some(why) => {
                self.failed += 1;
                format!(
                    "✗ {who} {id} line {} failed after {took}: {}",
                    live.line,
                    first_line(why, 100)
                )
            }
            None => {
                self.done += 1;
                format!(
                    "✓ {who} {id} line {} in {took}{}",
                    live.line,
                    live.work(None)
                )
            }
        };
        self.println(line);
        self.fill_lines();
    }
}

fn style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner:.cyan} {elapsed:>4} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Observer for Progress {
    fn event(&mut self, e: &Event) {
        match e {
            Event::Session {
                id,
                line,
                text,
                agent,
                ..
            } => {
                self.live.insert(
                    id.clone(),
                    Live {
                        agent: agent.clone(),
                        line: *line,
                        text: text.clone(),
                        started: Instant::now(),
                        turns: 0,
                        tool_calls: 0,
                        tokens: None,
                        bar: None,
                        streamed: String::new(),
                    },
                );
                self.fill_lines();
            }
            Event::Delta { id, text, restart } => {
                let session = id.whole();
                if let Some(live) = self.live.get_mut(&session) {
                    live.stream(text, *restart);
                }
                self.refresh(&session);
                return;
            }
            Event::Turn { id, used, .. } => {
                let session = id.whole();
                if let Some(live) = self.live.get_mut(&session) {
                    live.turns += 1;
                    // The turn's answer is complete: the next one streams afresh.
                    live.streamed.clear();
                    if let Some(u) = used {
                        *live.tokens.get_or_insert_with(Usage::default) += *u;
                    }
                }
                self.refresh(&session);
            }
            Event::ToolCall { id, .. } => {
                let session = id.whole();
                if let Some(live) = self.live.get_mut(&session) {
                    live.tool_calls += 1;
                }
                self.refresh(&session);
            }
            Event::Usage {
                id, used: Some(u), ..
            } => {
                let u = *u;
                *self.tokens.get_or_insert_with(Usage::default) += u;
                if let Some(live) = self.live.get_mut(id) {
                    // The session's own total (its turns', when it ran as an agent loop).
                    live.tokens = Some(u);
                }
            }
            Event::Answer { id, .. } => self.ended(id, None),
            Event::RequestFailed { id, error } if self.live.contains_key(id) => {
                self.ended(id, Some(error))
            }
            Event::Retry { id, attempt, error } => self.println(format!(
                "↻ {id} attempt {attempt} after: {}",
                first_line(error, 100)
            )),
            Event::Warning { .. }
            | Event::RequestFailed { .. }
            | Event::Catch { .. }
            | Event::Sandbox { .. } => {
                if let Some(line) = e.narrate() {
                    self.println(line)
                }
            }
            _ => {}
        }
        self.update_status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indicatif::InMemoryTerm;

    fn id(s: &str) -> RequestId {
        s.parse().expect("id")
    }

    fn session(n: &str, agent: &str, line: u32, text: &str) -> Event {
        Event::Session {
            id: id(n),
            module: 0,
            line,
            text: text.into(),
            agent: Some(agent.into()),
            model: None,
            exec: 0,
        }
    }

    fn screen(term: &InMemoryTerm, p: &Progress) -> String {
        // Redraw every line now (the clocks tick on their own otherwise).
        for live in p.live.values() {
            if let Some(bar) = &live.bar {
                bar.tick();
            }
        }
        p.status.tick();
        term.contents()
    }

    #[test]
    fn sessions_in_flight_show_their_agent_turns_tools_and_tokens_then_a_line_each() {
        let term = InMemoryTerm::new(20, 160);
        let mut p = Progress::to(ProgressDrawTarget::term_like(Box::new(term.clone())), None);
        p.event(&session("0/0.0:0", "researcher", 4, "Find the sources"));
        p.event(&session(
            "0/0.1:0",
            "critic",
            7,
            "Find the flaws\nin detail",
        ));
        p.event(&Event::Turn {
            id: id("0/0.0:0#t0"),
            tool_calls: 2,
            ms: 30,
            first_token_ms: None,
            used: Some(Usage::plain(1200, 80)),
        });
        for c in 0..2 {
            p.event(&Event::ToolCall {
                id: id(&format!("0/0.0:0#t0c{c}")),
                tool: "read_file".into(),
                arguments: "{}".into(),
                refused: None,
                is_error: false,
                ms: 1,
                bytes: 3,
            });
        }
        let shown = screen(&term, &p);
        assert!(
            shown.contains("researcher 0/0.0:0 line 4 · 1 turn(s) · 2 tool call(s) · 1,200 in / 80 out tokens · Find the sources"),
            "{shown}"
        );
        assert!(
            shown.contains("critic 0/0.1:0 line 7 · Find the flaws"),
            "{shown}"
        );
        assert!(shown.contains("2 in flight · 0 done"), "{shown}");
        // Cached input counts among the tokens in, and is said; so is the memo's answer.
        p.event(&Event::Turn {
            id: id("0/0.1:0#t0"),
            tool_calls: 1,
            ms: 30,
            first_token_ms: None,
            used: Some(Usage {
                cache_read_tokens: 2_400,
                ..Usage::plain(100, 20)
            }),
        });
        p.event(&Event::Turn {
            id: id("0/0.1:0#t1"),
            tool_calls: 1,
            ms: 0,
            first_token_ms: None,
            used: Some(Usage {
                from_memo: 1,
                ..Usage::default()
            }),
        });
        let shown = screen(&term, &p);
        assert!(
            shown.contains("2,500 in / 20 out tokens (2,400 cached) · 1 from the memo"),
            "{shown}"
        );

        p.event(&Event::Usage {
            id: id("0/0.0:0"),
            ms: 40,
            first_token_ms: None,
            used: Some(Usage::plain(2000, 100)),
        });
        p.event(&Event::Answer {
            id: id("0/0.0:0"),
            text: "sources".into(),
            bound: true,
        });
        p.event(&Event::Retry {
            id: id("0/0.1:0"),
            attempt: 2,
            error: "rate limited".into(),
        });
        p.event(&Event::RequestFailed {
            id: id("0/0.1:0"),
            error: "rate limited again".into(),
        });
        let shown = screen(&term, &p);
        assert!(
            shown.contains("✓ researcher 0/0.0:0 line 4 in ")
                && shown.contains("· 1 turn(s) · 2 tool call(s) · 2,000 in / 100 out tokens"),
            "{shown}"
        );
        assert!(
            shown.contains("↻ 0/0.1:0 attempt 2 after: rate limited"),
            "{shown}"
        );
        assert!(
            shown.contains("✗ critic 0/0.1:0 line 7 failed after ")
                && shown.contains(": rate limited again"),
            "{shown}"
        );
        assert!(
            shown.contains("0 in flight · 1 done · 1 failed · 2,000 in / 100 out tokens"),
            "{shown}"
        );
        assert!(!shown.contains("Find the sources"), "{shown}");
        p.finish();
        let shown = term.contents();
        assert!(!shown.contains("in flight"), "{shown}");
        assert!(shown.contains("✓ researcher"), "{shown}");
    }

    #[test]
    fn streamed_answers_show_live_under_their_session_side_by_side() {
        let term = InMemoryTerm::new(20, 160);
        let mut p = Progress::to(ProgressDrawTarget::term_like(Box::new(term.clone())), None);
        p.limits = Some(SessionLimits {
            turns: 40,
            time: None,
        });
        p.event(&session("0/0.0:0", "poet", 4, "Write a poem"));
        p.event(&session("0/0.1:0", "critic", 7, "Find the flaws"));
        for piece in ["Roses are red,\nViolets", " are blue,", " prose runs"] {
            p.event(&Event::Delta {
                id: id("0/0.0:0#t0"),
                text: piece.into(),
                restart: false,
            });
        }
        p.event(&Event::Delta {
            id: id("0/0.1:0#t0"),
            text: "First flaw: the scansion".into(),
            restart: false,
        });
        let shown = screen(&term, &p);
        assert!(shown.contains("↳ Violets are blue, prose runs"), "{shown}");
        assert!(shown.contains("↳ First flaw: the scansion"), "{shown}");
        assert!(
            !shown.contains("Roses are red"),
            "only the last line: {shown}"
        );
        // A new attempt starts from nothing; a finished turn's text goes.
        p.event(&Event::Delta {
            id: id("0/0.1:0#t0"),
            text: "Second try".into(),
            restart: true,
        });
        p.event(&Event::Turn {
            id: id("0/0.0:0#t0"),
            tool_calls: 1,
            ms: 30,
            first_token_ms: Some(12),
            used: None,
        });
        let shown = screen(&term, &p);
        assert!(shown.contains("↳ Second try"), "{shown}");
        assert!(!shown.contains("First flaw"), "{shown}");
        assert!(!shown.contains("prose runs"), "{shown}");
        assert!(shown.contains("poet 0/0.0:0 line 4 · turn 1/40"), "{shown}");
    }

    #[test]
    fn only_so_many_sessions_get_a_line_and_waiting_ones_take_freed_lines() {
        let term = InMemoryTerm::new(40, 120);
        let mut p = Progress::to(ProgressDrawTarget::term_like(Box::new(term.clone())), None);
        for i in 0..MAX_LINES + 2 {
            p.event(&session(
                &format!("0/0.{i}:0"),
                "worker",
                3,
                &format!("job {i}"),
            ));
        }
        let shown = screen(&term, &p);
        assert!(
            shown.contains(&format!("{} in flight", MAX_LINES + 2)),
            "{shown}"
        );
        assert!(!shown.contains(&format!("job {}", MAX_LINES)), "{shown}");
        p.event(&Event::Answer {
            id: id("0/0.0:0"),
            text: "ok".into(),
            bound: false,
        });
        let shown = screen(&term, &p);
        assert!(shown.contains(&format!("job {}", MAX_LINES)), "{shown}");
        assert!(
            !shown.contains(&format!("job {}", MAX_LINES + 1)),
            "{shown}"
        );
    }
}
