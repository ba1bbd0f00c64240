//! Who answers the questions meant for a person (a mid-program input, a permission an agent's
//! `permissions:` say to ask for) when the driver's host does not: a person at the terminal,
//! or no one. Never a model: with no one to ask, an input without a value, and in a durable
//! run a tool call its permissions say `prompt` for (the runtime's `approvals`), make the run wait
//! for an answer from outside (status `waiting`); elsewhere such a call is refused.
//! Permission questions go through a [`Prompter`], which the agent's sandbox holds.

use futures_util::future::BoxFuture;
use prose_machine::protocol::{InputAsk, PermissionQuestion, PromptAnswer};
use prose_machine::value::Value;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex};

/// Who answers.
#[derive(Clone)]
pub enum People {
    /// The person at this process's terminal (questions on stderr, answers read from
    /// `/dev/tty`), one question at a time.
    Terminal(Arc<Mutex<()>>),
    /// No one: every question goes unanswered.
    Nobody,
}

impl People {
    /// The terminal if stdin and stderr are one and `no_input` is false; otherwise no one.
    pub fn detect(no_input: bool) -> People {
        let interactive = !no_input
            && std::io::stdin().is_terminal()
            && std::io::stderr().is_terminal()
            && TtyPrompter::detect().is_some();
        if interactive {
            People::Terminal(Arc::default())
        } else {
            People::Nobody
        }
    }

    /// Who answers permission questions.
    pub fn prompter(&self) -> Arc<dyn Prompter> {
        match self {
            People::Terminal(_) => Arc::new(TtyPrompter::default()),
            People::Nobody => Arc::new(NoPrompter),
        }
    }

    /// The value of a mid-program input: a line typed at the terminal; `None` when there is
    /// no one to ask now (the run waits for an answer from outside).
    pub async fn input(&self, ask: &InputAsk) -> Option<Value> {
        let People::Terminal(lock) = self else {
            return None;
        };
        let lock = lock.clone();
        let (name, question) = (ask.name.clone(), ask.question.clone());
        let line = tokio::task::spawn_blocking(move || {
            let _one_at_a_time = lock.lock().unwrap_or_else(|e| e.into_inner());
            crate::terminal::suspend(|| {
                let tty = std::fs::File::open("/dev/tty").ok()?;
                let mut err = std::io::stderr().lock();
                write!(err, "Input `{name}`: {question}\n> ").ok()?;
                err.flush().ok()?;
                let mut line = String::new();
                (std::io::BufReader::new(tty).read_line(&mut line).ok()? > 0).then_some(line)
            })
        })
        .await
        .ok()
        .flatten();
        line.map(|l| Value::text(l.trim_end_matches(['\n', '\r'])))
    }
}

/// Why a permission question went without a person's answer: the call is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// There is no one to ask.
    NoOne,
    /// The run waited for an answer from outside and no one gave one in time: why, as the
    /// model is told (`no one answered within 1h00m`).
    Lapsed(String),
}

/// Who answers permission questions: a person at a terminal ([`TtyPrompter`]), an agent host
/// through its protocol, or no one ([`NoPrompter`]).
pub trait Prompter: Send + Sync {
    /// Asks `question`; why not answered when no one did.
    fn ask<'a>(
        &'a self,
        question: &'a PermissionQuestion,
    ) -> BoxFuture<'a, Result<PromptAnswer, Unanswered>>;
}

/// The prompter of a run with no one to ask: every question is unanswered, so `prompt` means
/// refused unless the user allowed the capability (or the run waits for an approval).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPrompter;

impl Prompter for NoPrompter {
    fn ask<'a>(
        &'a self,
        _: &'a PermissionQuestion,
    ) -> BoxFuture<'a, Result<PromptAnswer, Unanswered>> {
        Box::pin(std::future::ready(Err(Unanswered::NoOne)))
    }
}

/// Asks on the controlling terminal: the question goes to stderr, the answer is a line read
/// from `/dev/tty` (`y`/`yes`, `n`/`no`, `a`/`always`; anything else is asked again, twice at
/// most, then taken as no). Questions from concurrent sessions are asked one at a time.
#[derive(Clone, Debug, Default)]
pub struct TtyPrompter {
    lock: Arc<Mutex<()>>,
}

impl TtyPrompter {
    /// A prompter if this process has a controlling terminal to read answers from.
    pub fn detect() -> Option<TtyPrompter> {
        std::fs::File::open("/dev/tty")
            .ok()
            .map(|_| TtyPrompter::default())
    }
}

impl Prompter for TtyPrompter {
    fn ask<'a>(
        &'a self,
        question: &'a PermissionQuestion,
    ) -> BoxFuture<'a, Result<PromptAnswer, Unanswered>> {
        let lock = self.lock.clone();
        let question = question.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let _one_at_a_time = lock.lock().unwrap_or_else(|e| e.into_inner());
                crate::terminal::suspend(|| {
                    let tty = std::fs::File::open("/dev/tty").ok()?;
                    let mut input = std::io::BufReader::new(tty);
                    let stderr = std::io::stderr();
                    let mut output = stderr.lock();
                    ask_on(&question, &mut input, &mut output)
                })
            })
            .await
            .ok()
            .flatten()
            .ok_or(Unanswered::NoOne)
        })
    }
}

/// Asks `question` on `output` and reads the answer from `input` (what [`TtyPrompter`] does on
/// the terminal). `None` if `input` ends or fails before an answer.
pub fn ask_on(
    question: &PermissionQuestion,
    input: &mut impl BufRead,
    output: &mut impl Write,
) -> Option<PromptAnswer> {
    let mut prompt = question.text();
    for _ in 0..3 {
        output.write_all(prompt.as_bytes()).ok()?;
        output.flush().ok()?;
        let mut line = String::new();
        if input.read_line(&mut line).ok()? == 0 {
            return None;
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => return Some(PromptAnswer::Yes),
            "n" | "no" => return Some(PromptAnswer::No),
            "a" | "always" => return Some(PromptAnswer::Always),
            _ => prompt = "Please answer y (yes), n (no) or a (always): ".to_string(),
        }
    }
    Some(PromptAnswer::No)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prose_machine::protocol::Capability;

    #[test]
    fn ask_on_reads_answers_and_retries_nonsense() {
        let q = PermissionQuestion {
            agent: Some("builder".into()),
            capability: Capability::Bash,
            detail: "make test".into(),
        };
        let mut out = Vec::new();
        let answer = ask_on(&q, &mut &b"maybe\nALWAYS\n"[..], &mut out);
        assert_eq!(answer, Some(PromptAnswer::Always));
        let shown = String::from_utf8(out).unwrap();
        assert!(shown.contains("Agent `builder` wants to run a shell command"));
        assert!(shown.contains("make test"));
        assert!(shown.contains("Please answer"));
        assert_eq!(
            ask_on(&q, &mut &b"y\n"[..], &mut Vec::new()),
            Some(PromptAnswer::Yes)
        );
        assert_eq!(
            ask_on(&q, &mut &b"no\n"[..], &mut Vec::new()),
            Some(PromptAnswer::No)
        );
        assert_eq!(ask_on(&q, &mut &b""[..], &mut Vec::new()), None);
        assert_eq!(
            ask_on(&q, &mut &b"x\nx\nx\n"[..], &mut Vec::new()),
            Some(PromptAnswer::No)
        );
    }
}
