//! Who answers the questions meant for a person (a mid-program input, a permission an agent's
//! `permissions:` say to ask for) when the driver's host does not: a person at the terminal,
//! or no one. Never a model: with no one to ask, an input without a value makes the run wait
//! for an answer from outside (status `waiting`), and a permission is refused.

use crate::agent::permissions::{NoPrompter, Prompter, TtyPrompter};
use prose_machine::protocol::InputAsk;
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
