//! Which driver answers a run, and how: a description kept in the run record (never an API
//! key: keys are read from the environment each time a driver is connected), so that a
//! resumed run continues with the driver it started with. [`DriverSettings::connect`]
//! builds the driver; [`AnyDriver`] lets the runner serve any of them without boxing.

mod choice;
mod connect;

use super::chat::dialect::Provider;
use super::chat::Models;
use super::mock::MockOptions;
use super::pace;
use super::prices::Price;
use prose_settings::cache::PromptCache;
use prose_settings::turns::StructuredTurns;
use prose_settings::SamplingTable;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub use choice::{DriverChoice, DriverKind, DEFAULT_HTTP_RETRIES, DEFAULT_TIMEOUT_S};
pub use connect::AnyDriver;

/// How a chat provider is reached.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatSettings {
    /// The API's base URL.
    pub base_url: String,
    /// What each model alias, and a session naming no model, is sent as.
    pub models: Models,
    /// Seconds one HTTP attempt may take.
    pub timeout_s: f64,
    /// Attempts after the first when the provider is busy or failing.
    pub retries: u32,
    /// First delay between attempts, in milliseconds (doubled each time).
    pub backoff_ms: u64,
    /// Seconds a streamed answer may go without a new piece.
    #[serde(default = "default_idle_s")]
    pub idle_s: f64,
    /// A tape the driver records its exchanges on, or answers from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tape: Option<Tape>,
    /// How models sample: for every turn, per model id, per agent.
    #[serde(default)]
    pub sampling: SamplingTable,
    /// Prices per model id over the built-in table.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, Price>,
    /// How long the prefixes marked for the provider's cache live (the `anthropic` driver
    /// marks them), or no marks.
    #[serde(default, skip_serializing_if = "PromptCache::is_default")]
    pub prompt_cache: PromptCache,
    /// Requests in flight at once to the provider, at most: the ceiling of each model's
    /// window, which adapts to the provider's limits under it.
    #[serde(default = "default_ceiling")]
    pub max_concurrency: usize,
    /// Whether agent-loop turns are asked structured (the `openai` driver).
    #[serde(default, skip_serializing_if = "StructuredTurns::is_default")]
    pub structured_turns: StructuredTurns,
}

fn default_ceiling() -> usize {
    pace::DEFAULT_CEILING
}

/// Seconds a streamed answer may go without a new piece unless told otherwise: long enough
/// for a small model on a laptop's CPU to read a long prompt before its first token.
pub const DEFAULT_IDLE_S: f64 = 120.0;

fn default_idle_s() -> f64 {
    DEFAULT_IDLE_S
}

/// A tape of model exchanges (see [`super::chat::tape`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tape {
    /// Every exchange is appended to this file.
    Record(std::path::PathBuf),
    /// Every request is answered from this file, without a provider.
    Replay(std::path::PathBuf),
}

/// A driver and its settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum DriverSettings {
    /// The deterministic offline mock.
    Mock(MockOptions),
    /// A shell command run once per request.
    Command {
        /// The command line (`sh -c`).
        command: String,
        /// Seconds a request may take.
        timeout_s: f64,
        /// Where it runs: the directory it was given in (the working directory for
        /// `--command`, the `prose.toml`'s for its `command`), so that `./ask.sh` names the
        /// same file when the run is resumed from elsewhere. Runs recorded before this was
        /// kept have none and run in the working directory.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dir: Option<PathBuf>,
    },
    /// An agent host on stdin and stdout.
    Stdio {
        /// Seconds a request may take.
        timeout_s: f64,
        /// The host answers model turns and the VM runs each session's agent loop (tools
        /// and permissions included), rather than the host running whole sessions.
        #[serde(default)]
        turns: bool,
    },
    /// An OpenAI-compatible chat completions server.
    Openai(ChatSettings),
    /// Anthropic's Messages API.
    Anthropic(ChatSettings),
}

impl DriverSettings {
    /// The settings of `provider`'s chat driver.
    pub fn chat(provider: Provider, chat: ChatSettings) -> DriverSettings {
        match provider {
            Provider::OpenAi => DriverSettings::Openai(chat),
            Provider::Anthropic => DriverSettings::Anthropic(chat),
        }
    }

    /// Requests a run on this driver has in flight at once unless told otherwise: the HTTP
    /// drivers' ceiling (their windows adapt to the provider under it); none for the
    /// others, which take the runner's default.
    pub fn max_concurrency(&self) -> Option<usize> {
        match self {
            DriverSettings::Openai(c) | DriverSettings::Anthropic(c) => Some(c.max_concurrency),
            _ => None,
        }
    }

    /// The driver's name: `mock`, `command`, `stdio`, `openai` or `anthropic`.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The kind of driver these settings describe.
    pub fn kind(&self) -> DriverKind {
        match self {
            DriverSettings::Mock(_) => DriverKind::Mock,
            DriverSettings::Command { .. } => DriverKind::Command,
            DriverSettings::Stdio { .. } => DriverKind::Stdio,
            DriverSettings::Openai(_) => DriverKind::Chat(Provider::OpenAi),
            DriverSettings::Anthropic(_) => DriverKind::Chat(Provider::Anthropic),
        }
    }

    /// Whether a run with this driver can keep a budget (`--max-tokens` when `tokens`,
    /// `--max-cost` when `cost`) for sessions naming `models`: a budget is a hard limit, so
    /// the driver must bound what each request may use before sending it and report what it
    /// used. The chat drivers do, in tokens, and in dollars for the models they have prices
    /// for; the mock, command and stdio drivers report nothing that can be counted. An error
    /// says what cannot be kept and what to do, before anything runs.
    pub fn keeps_budget(
        &self,
        models: &[Option<String>],
        tokens: bool,
        cost: bool,
    ) -> Result<(), String> {
        let flags = match (tokens, cost) {
            (false, false) => return Ok(()),
            (true, false) => "--max-tokens",
            (false, true) => "--max-cost",
            (true, true) => "--max-tokens and --max-cost",
        };
        let chat = match self {
            DriverSettings::Openai(c) | DriverSettings::Anthropic(c) => c,
            _ => {
                return Err(format!(
                    "the {} driver does not report what its answers use, so a budget ({flags}, here or in prose.toml) cannot be kept; run without one, or with the openai or anthropic driver",
                    self.name()
                ))
            }
        };
        if !cost {
            return Ok(());
        }
        let mut unpriced: Vec<&str> = models
            .iter()
            .map(|m| chat.models.resolve(m.as_deref()))
            .filter(|id| prose_settings::prices::price(&chat.prices, id).is_none())
            .collect();
        unpriced.sort_unstable();
        unpriced.dedup();
        if unpriced.is_empty() {
            return Ok(());
        }
        Err(format!(
            "--max-cost cannot be kept: no price is known for the model(s) {}; give their prices under [prices] in prose.toml, or budget tokens with --max-tokens",
            unpriced.join(", ")
        ))
    }

    /// These settings asking `model` for sessions that name none (on an OpenAI-compatible
    /// server, for every alias too, as `--model` sets it); other drivers are unchanged.
    pub fn with_model(&self, model: &str) -> DriverSettings {
        let mut d = self.clone();
        match &mut d {
            DriverSettings::Openai(c) => {
                c.models.sonnet = model.into();
                c.models.opus = model.into();
                c.models.haiku = model.into();
                c.models.default = model.into();
            }
            DriverSettings::Anthropic(c) => c.models.default = model.into(),
            _ => {}
        }
        d
    }

    /// These settings keeping their exchanges on, or answering them from, `tape`: the chat
    /// drivers'; another driver keeps no tape, and is refused.
    pub fn with_tape(&self, tape: Tape) -> Result<DriverSettings, String> {
        let mut d = self.clone();
        match &mut d {
            DriverSettings::Openai(c) | DriverSettings::Anthropic(c) => c.tape = Some(tape),
            other => {
                return Err(format!(
                    "tapes keep the exchanges of the openai and anthropic drivers, not {}'s",
                    other.name()
                ))
            }
        }
        Ok(d)
    }

    /// Whether the memo keeps and looks up this driver's answers: only a provider's own, by
    /// the chat drivers over HTTP (a replayed tape's answers never enter it).
    pub fn answers_memoised(&self) -> bool {
        match self {
            DriverSettings::Openai(c) | DriverSettings::Anthropic(c) => {
                !matches!(c.tape, Some(Tape::Replay(_)))
            }
            _ => false,
        }
    }

    /// A line for people: the driver and where it sends requests.
    pub fn describe(&self) -> String {
        match self {
            DriverSettings::Mock(_) => {
                "mock (no provider configured; answers are placeholders)".into()
            }
            DriverSettings::Command { command, .. } => format!("command ({command})"),
            DriverSettings::Stdio { .. } => "stdio (requests on stdout, replies on stdin)".into(),
            DriverSettings::Openai(ChatSettings {
                tape: Some(Tape::Replay(tape)),
                ..
            })
            | DriverSettings::Anthropic(ChatSettings {
                tape: Some(Tape::Replay(tape)),
                ..
            }) => format!("{} (replaying the tape {})", self.name(), tape.display()),
            DriverSettings::Openai(c) => format!(
                "openai (chat completions at {}, model {}){}",
                c.base_url,
                c.models.default,
                recording(c)
            ),
            DriverSettings::Anthropic(c) => format!(
                "anthropic (messages at {}, model {}){}",
                c.base_url,
                c.models.default,
                recording(c)
            ),
        }
    }
}

/// `, recording to FILE` when `c` records.
fn recording(c: &ChatSettings) -> String {
    match &c.tape {
        Some(Tape::Record(path)) => format!(", recording to {}", path.display()),
        _ => String::new(),
    }
}
