//! Which driver answers a run, and how: a description kept in the run record (never an API
//! key: keys are read from the environment each time a driver is connected), so that a
//! resumed run continues with the driver it started with. [`DriverSettings::connect`]
//! builds the driver; [`AnyDriver`] lets the runner serve any of them without boxing.

use super::chat::dialect::{self, Provider};
use super::chat::tape::{Player, Recorder};
use super::chat::{ChatDriver, Models};
use super::command::CommandDriver;
use super::http::HttpOptions;
use super::mock::{Mock, MockOptions};
use super::pace;
use super::prices::Price;
use super::stdio::StdioDriver;
use super::{Driver, Live, Served};
use prose_machine::protocol::{Reply, Request};
use prose_settings::cache::PromptCache;
use prose_settings::turns::StructuredTurns;
use prose_settings::{SamplingTable, Settings};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

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

/// A connected driver of any kind.
pub enum AnyDriver {
    /// The mock.
    Mock(Mock),
    /// The command driver.
    Command(CommandDriver),
    /// The stdio driver.
    Stdio(StdioDriver),
    /// A chat provider.
    Chat(Box<ChatDriver>),
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
        match self {
            DriverSettings::Mock(_) => "mock",
            DriverSettings::Command { .. } => "command",
            DriverSettings::Stdio { .. } => "stdio",
            DriverSettings::Openai(_) => "openai",
            DriverSettings::Anthropic(_) => "anthropic",
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

    /// Builds the driver, reading an API key from the environment (`OPENAI_API_KEY`,
    /// `ANTHROPIC_API_KEY`) where the provider takes one. Settings that cannot work (a base
    /// URL that is not http(s), a missing key the provider requires, a zero timeout) are
    /// refused here, before the run asks anything.
    pub fn connect(&self) -> Result<AnyDriver, String> {
        let timeout = |secs: f64| match Duration::try_from_secs_f64(secs) {
            Ok(t) if !t.is_zero() => Ok(t),
            _ => Err(format!(
                "a request timeout must be a positive number of seconds, not {secs}"
            )),
        };
        Ok(match self {
            DriverSettings::Mock(opts) => AnyDriver::Mock(Mock::new(opts.clone())),
            DriverSettings::Command {
                command,
                timeout_s,
                dir,
            } => {
                if command.trim().is_empty() {
                    return Err("--driver command needs --command \"PROGRAM ARGS\"".into());
                }
                AnyDriver::Command(
                    CommandDriver::new(command.clone(), timeout(*timeout_s)?).in_dir(dir.clone()),
                )
            }
            DriverSettings::Stdio { timeout_s, turns } => {
                AnyDriver::Stdio(StdioDriver::start(timeout(*timeout_s)?, *turns))
            }
            DriverSettings::Openai(c) => chat_driver(Provider::OpenAi, c, timeout)?,
            DriverSettings::Anthropic(c) => chat_driver(Provider::Anthropic, c, timeout)?,
        })
    }
}

/// The chat driver of `provider` as `c` describes it, its time limits read by `timeout`.
fn chat_driver(
    provider: Provider,
    c: &ChatSettings,
    timeout: impl Fn(f64) -> Result<Duration, String>,
) -> Result<AnyDriver, String> {
    let http = HttpOptions {
        timeout: timeout(c.timeout_s)?,
        idle: timeout(c.idle_s)?,
        retries: c.retries,
        backoff: Duration::from_millis(c.backoff_ms),
    };
    let chat = match &c.tape {
        Some(Tape::Replay(path)) => {
            let player = Player::open(path)?;
            if player.provider() != provider {
                return Err(format!(
                    "--replay {}: the tape was recorded from another API than {}'s",
                    path.display(),
                    provider.name()
                ));
            }
            ChatDriver::replaying(player, &c.base_url, c.models.clone(), http)
        }
        Some(Tape::Record(path)) => {
            http_driver(provider, c, http)?.recording(Recorder::open(path, provider)?)
        }
        None => http_driver(provider, c, http)?,
    };
    Ok(AnyDriver::Chat(Box::new(
        chat.with_concurrency(c.max_concurrency)
            .with_sampling(c.sampling.clone())
            .with_prices(c.prices.clone())
            .with_cache(c.prompt_cache)
            .with_structured(c.structured_turns),
    )))
}

/// `, recording to FILE` when `c` records.
fn recording(c: &ChatSettings) -> String {
    match &c.tape {
        Some(Tape::Record(path)) => format!(", recording to {}", path.display()),
        _ => String::new(),
    }
}

/// `path`, absolute (so that a resumed run finds its tape from any directory).
fn absolute(path: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The chat driver of `c` for `provider`, on HTTP, with its key from the environment.
fn http_driver(
    provider: Provider,
    c: &ChatSettings,
    http: HttpOptions,
) -> Result<ChatDriver, String> {
    let url =
        reqwest::Url::parse(&c.base_url).map_err(|e| format!("base URL {:?}: {e}", c.base_url))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!(
            "base URL {:?}: want http:// or https:// and a host",
            c.base_url
        ));
    }
    let key = prose_agent::secrets::get(dialect::of(provider).key_var());
    ChatDriver::new(provider, &c.base_url, key, c.models.clone(), http).map_err(|e| e.0)
}

/// Calls `$call` on whichever driver `$any` holds.
macro_rules! each {
    ($any:expr, $d:ident => $call:expr) => {
        match $any {
            AnyDriver::Mock($d) => $call,
            AnyDriver::Command($d) => $call,
            AnyDriver::Stdio($d) => $call,
            AnyDriver::Chat($d) => $call,
        }
    };
}

impl Driver for AnyDriver {
    fn name(&self) -> &str {
        each!(self, d => d.name())
    }

    async fn answer(&self, req: &Request, live: &Live) -> Served {
        each!(self, d => d.answer(req, live).await)
    }

    fn answer_now(&self, req: &Request) -> Option<Served> {
        each!(self, d => d.answer_now(req))
    }

    fn observe(&self, req: &Request, reply: &Reply) {
        each!(self, d => d.observe(req, reply))
    }

    fn side_effect_free(&self) -> bool {
        each!(self, d => d.side_effect_free())
    }

    fn runs_turns(&self) -> bool {
        each!(self, d => d.runs_turns())
    }

    async fn structured_turns(&self) -> bool {
        each!(self, d => d.structured_turns().await)
    }

    fn worst_case(&self, req: &Request) -> Option<prose_machine::protocol::Usage> {
        each!(self, d => d.worst_case(req))
    }

    async fn check_models(&self, models: &[Option<String>]) -> Result<(), String> {
        each!(self, d => d.check_models(models).await)
    }

    fn hosts_people(&self) -> bool {
        each!(self, d => d.hosts_people())
    }

    fn memo_identity(&self, req: &Request) -> Option<serde_json::Value> {
        each!(self, d => d.memo_identity(req))
    }
}

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
    /// Every kind, by name.
    pub const ALL: [(&'static str, DriverKind); 5] = [
        ("mock", DriverKind::Mock),
        ("command", DriverKind::Command),
        ("stdio", DriverKind::Stdio),
        ("openai", DriverKind::Chat(Provider::OpenAi)),
        ("anthropic", DriverKind::Chat(Provider::Anthropic)),
    ];
}

impl std::str::FromStr for DriverKind {
    type Err = String;

    fn from_str(s: &str) -> Result<DriverKind, String> {
        DriverKind::ALL
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                let names: Vec<&str> = DriverKind::ALL.iter().map(|(n, _)| *n).collect();
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
                DriverKind::ALL
                    .iter()
                    .find(|(_, k)| *k == kind)
                    .map_or("this driver", |(n, _)| n)
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
