//! What a user asked for on the command line and in `prose.toml`, completed into a driver's
//! [`DriverSettings`].

use super::{ChatSettings, DriverSettings, Tape, DEFAULT_IDLE_S};
use crate::driver::chat::dialect::{self, Provider};
use crate::driver::chat::tape::Player;
use crate::driver::chat::Models;
use crate::driver::mock::MockOptions;
use crate::driver::pace;
use prose_settings::turns::StructuredTurns;
use prose_settings::{SamplingTable, Settings};

/// A kind of driver, as named on the command line and in `prose.toml`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverKind {
    /// The deterministic offline mock.
    Mock,
    /// A shell command run once per request.
    Command,
    /// An agent host on stdin and stdout.
    Stdio,
    /// A chat provider's API: an OpenAI-compatible chat completions server, or Anthropic's
    /// Messages API.
    Chat(Provider),
}

impl DriverKind {
    /// Every kind.
    pub const ALL: [DriverKind; 5] = [
        DriverKind::Mock,
        DriverKind::Command,
        DriverKind::Stdio,
        DriverKind::Chat(Provider::OpenAi),
        DriverKind::Chat(Provider::Anthropic),
    ];

    /// Its name on the command line and in `prose.toml` (a chat driver is named for its
    /// provider).
    pub fn name(self) -> &'static str {
        match self {
            DriverKind::Mock => "mock",
            DriverKind::Command => "command",
            DriverKind::Stdio => "stdio",
            DriverKind::Chat(provider) => provider.name(),
        }
    }
}

impl std::str::FromStr for DriverKind {
    type Err = String;

    fn from_str(s: &str) -> Result<DriverKind, String> {
        DriverKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = DriverKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown driver {s:?} (want one of {})", names.join(", "))
            })
    }
}

/// What a user asked for on the command line; [`DriverChoice::settings`] completes it with
/// the environment (`OPENAI_BASE_URL`, `OPENAI_MODEL`, `ANTHROPIC_...`), then `prose.toml`,
/// then the defaults.
#[derive(Clone, Debug, Default)]
pub struct DriverChoice {
    /// The driver.
    pub driver: Option<DriverKind>,
    /// The command driver's command line.
    pub command: Option<String>,
    /// A chat provider's base URL.
    pub base_url: Option<String>,
    /// The model for sessions naming none (for `openai`, also what the aliases map to).
    pub model: Option<String>,
    /// `ALIAS=ID` entries.
    pub model_map: Vec<String>,
    /// Seconds a request may take.
    pub request_timeout: Option<f64>,
    /// HTTP attempts after the first.
    pub http_retries: Option<u32>,
    /// Requests in flight at once (`--max-concurrency`).
    pub max_concurrency: Option<usize>,
    /// First HTTP retry delay, in milliseconds.
    pub backoff_ms: Option<u64>,
    /// The mock's options.
    pub mock: MockOptions,
    /// Under the stdio driver, the host answers model turns (the VM runs agent loops).
    pub host_turns: bool,
    /// Seconds a streamed answer may go without a new piece.
    pub idle_timeout: Option<f64>,
    /// Keep every model exchange on this tape.
    pub record: Option<std::path::PathBuf>,
    /// Answer every model request from this tape (the driver is the tape's API unless
    /// chosen).
    pub replay: Option<std::path::PathBuf>,
    /// Whether agent-loop turns are asked structured (`--structured-turns`).
    pub structured_turns: Option<StructuredTurns>,
}

/// Seconds a request may take unless told otherwise.
pub const DEFAULT_TIMEOUT_S: f64 = 600.0;

/// HTTP attempts after the first unless told otherwise.
pub const DEFAULT_HTTP_RETRIES: u32 = 3;

impl DriverChoice {
    /// The settings this choice makes with `file` (the project's `prose.toml`).
    pub fn settings(&self, file: &Settings) -> Result<DriverSettings, String> {
        let kind = match (self.driver, &self.replay, file.driver.as_deref()) {
            (Some(k), _, _) => k,
            (None, Some(tape), _) => DriverKind::Chat(Player::open(tape)?.provider()),
            (None, None, Some(name)) => name.parse().map_err(|e| format!("prose.toml: {e}"))?,
            (None, None, None) => DriverKind::Mock,
        };
        if (self.record.is_some() || self.replay.is_some()) && !matches!(kind, DriverKind::Chat(_))
        {
            return Err(format!(
                "--record and --replay keep the exchanges of the openai and anthropic drivers, not {}'s",
                kind.name()
            ));
        }
        if self.record.is_some() && self.replay.is_some() {
            return Err("--record and --replay cannot be used together".into());
        }
        let timeout_s = self
            .request_timeout
            .or(file.request_timeout)
            .unwrap_or(DEFAULT_TIMEOUT_S);
        Ok(match kind {
            DriverKind::Mock => DriverSettings::Mock(self.mock.clone()),
            DriverKind::Command => {
                let (command, dir) = match &self.command {
                    Some(c) => (c.clone(), std::env::current_dir().ok()),
                    None => (
                        file.command
                            .clone()
                            .ok_or("--driver command needs --command \"PROGRAM ARGS\"")?,
                        file.command_dir.clone(),
                    ),
                };
                DriverSettings::Command {
                    command,
                    timeout_s,
                    dir,
                }
            }
            DriverKind::Stdio => DriverSettings::Stdio {
                timeout_s,
                turns: self.host_turns,
            },
            DriverKind::Chat(provider) => {
                let dialect = dialect::of(provider);
                let env = |name: &str| {
                    std::env::var(format!("{}_{name}", dialect.env_prefix()))
                        .ok()
                        .filter(|v| !v.is_empty())
                };
                let base_url = self
                    .base_url
                    .clone()
                    .or_else(|| env("BASE_URL"))
                    .or_else(|| file.base_url.clone())
                    .unwrap_or_else(|| dialect.public_base_url().into());
                let model = self
                    .model
                    .clone()
                    .or_else(|| env("MODEL"))
                    .or_else(|| file.model.clone());
                let models = Models::chosen(provider, model, &file.models, &self.model_map)?;
                let chat = ChatSettings {
                    base_url,
                    models,
                    timeout_s,
                    retries: self
                        .http_retries
                        .or(file.http_retries)
                        .unwrap_or(DEFAULT_HTTP_RETRIES),
                    backoff_ms: self.backoff_ms.unwrap_or(1000),
                    idle_s: self
                        .idle_timeout
                        .or(file.idle_timeout)
                        .unwrap_or(DEFAULT_IDLE_S),
                    tape: match (&self.record, &self.replay) {
                        (Some(r), _) => Some(Tape::Record(absolute(r))),
                        (_, Some(r)) => Some(Tape::Replay(absolute(r))),
                        _ => None,
                    },
                    sampling: SamplingTable {
                        default: file.sampling(),
                        models: file.model_options.clone(),
                        agents: file.agents.clone(),
                    },
                    prices: file.prices.clone(),
                    prompt_cache: file.prompt_cache.unwrap_or_default(),
                    structured_turns: match self.structured_turns.or(file.structured_turns) {
                        Some(StructuredTurns::On) if !dialect.structures_turns() => {
                            return Err(format!(
                                "structured turns are for the openai driver: the {} driver offers tools natively",
                                dialect.name()
                            ))
                        }
                        s => s.unwrap_or_default(),
                    },
                    max_concurrency: {
                        let run = self
                            .max_concurrency
                            .or(file.max_concurrency)
                            .unwrap_or(pace::DEFAULT_CEILING);
                        let provider = file.providers.of(provider);
                        provider.max_concurrency.map_or(run, |p| p.min(run)).max(1)
                    },
                };
                DriverSettings::chat(provider, chat)
            }
        })
    }
}

/// `path`, absolute (so that a resumed run finds its tape from any directory).
fn absolute(path: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
