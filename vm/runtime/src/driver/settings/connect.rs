//! Connecting: the driver a run's [`DriverSettings`] describe, built and ready, with its key
//! read from the environment; [`AnyDriver`] lets the runner serve any of them without boxing.

use super::{ChatSettings, DriverSettings, Tape};
use crate::driver::chat::dialect::{self, Provider};
use crate::driver::chat::tape::{Player, Recorder};
use crate::driver::chat::ChatDriver;
use crate::driver::command::CommandDriver;
use crate::driver::http::HttpOptions;
use crate::driver::mock::Mock;
use crate::driver::stdio::StdioDriver;
use crate::driver::{Driver, Live, Served};
use prose_machine::protocol::{Reply, Request};
use std::time::Duration;

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
