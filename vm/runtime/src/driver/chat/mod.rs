//! The chat drivers. `openai`: chat completions at `{base_url}/chat/completions`, so the
//! OpenAI API and local servers speaking it (Ollama, vLLM, llama.cpp) answer, with the key,
//! when there is one, as a bearer token. `anthropic`: the Messages API at
//! `{base_url}/v1/messages` with `x-api-key`. Both answer model turns of the VM's agent loop
//! (the conversation, with the agent's prompt as the system prompt, and the tools on offer:
//! OpenAI `tools`/`tool_calls`, Anthropic `tool_use`/`tool_result`); what differs between
//! the two is each one's [`dialect`], and everything else here is shared.
//! Conditions, choices and conversions use a constrained prompt whose reply is parsed
//! strictly, with one corrective re-ask.
//!
//! Prompt caching: what every request sends first is what changes least (the tools, in a
//! fixed order, then the agent's system prompt, then the conversation, each turn's the
//! previous one's plus what came since), so that a provider serves the prefix from its
//! cache. The `anthropic` driver marks where cached prefixes end ([`dialect::anthropic::breakpoints`],
//! `prompt_cache` in `prose.toml`); OpenAI-compatible servers find prefixes themselves. The
//! tokens a provider read from and wrote to its cache are kept apart from plain input and
//! priced at their own rates.

pub mod dialect;
mod exchange;
mod models;
mod request;
pub mod tape;

use super::http::{self, HttpOptions};
use super::pace;
use super::prices::Price;
use super::{render, unanswerable, Driver, Live, Served};
use dialect::openai::structured;
use dialect::{Dialect, Provider};
use exchange::Transport;
use prose_machine::convert;
use prose_machine::protocol::{Answer, Ask, Failure, Message, Request, TurnAsk, Usage};
use prose_machine::value::Value;
use prose_settings::cache::PromptCache;
pub use prose_settings::models::Models;
use prose_settings::turns::StructuredTurns;
use prose_settings::SamplingTable;
use std::collections::BTreeMap;
use tape::{Player, Recorder};

/// Talks to a chat API.
pub struct ChatDriver {
    /// The API's wire format.
    dialect: &'static dyn Dialect,
    transport: Transport,
    /// Where every exchange is also kept, when recording.
    recorder: Option<Recorder>,
    url: String,
    /// The provider's base URL as configured: with the API, who answers (for the memo).
    base_url: String,
    key: Option<String>,
    models: Models,
    http: HttpOptions,
    sampling: SamplingTable,
    prices: BTreeMap<String, Price>,
    /// How long the prefixes marked for the provider's cache live (Anthropic), and so what
    /// writing them costs.
    cache: PromptCache,
    /// Requests in flight to each model at once, at most (its window adapts under this).
    ceiling: usize,
    /// Whether agent-loop turns are asked structured ([`structured`]), as set.
    structured: StructuredTurns,
    /// Whether they are, once decided (`auto` asks the server, or the tape says).
    decided: tokio::sync::OnceCell<bool>,
}

impl ChatDriver {
    /// A driver for `provider`'s API at `base_url` (e.g. `https://api.openai.com/v1` or
    /// `https://api.anthropic.com`), with an API key (optional for local OpenAI-compatible
    /// servers) and the model ids to use.
    pub fn new(
        provider: Provider,
        base_url: &str,
        key: Option<String>,
        models: Models,
        http: HttpOptions,
    ) -> Result<ChatDriver, Failure> {
        let dialect = dialect::of(provider);
        let key = key.filter(|k| !k.is_empty());
        let base = base_url.trim_end_matches('/');
        let host = reqwest::Url::parse(base)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string));
        if key.is_none() && dialect.needs_key(host.as_deref()) {
            return Err(Failure(format!(
                "the {} driver needs {}",
                dialect.name(),
                dialect.key_var()
            )));
        }
        let client = http::client_for(base).map_err(Failure)?;
        Ok(ChatDriver::with(
            dialect,
            Transport::Http(client),
            dialect.endpoint(base),
            base,
            key,
            models,
            http,
        ))
    }

    /// A driver of `dialect` over `transport`, with the default sampling, prices, cache marks
    /// and ceiling (the builder methods below change them).
    fn with(
        dialect: &'static dyn Dialect,
        transport: Transport,
        url: String,
        base_url: &str,
        key: Option<String>,
        models: Models,
        http: HttpOptions,
    ) -> ChatDriver {
        ChatDriver {
            dialect,
            transport,
            recorder: None,
            url,
            base_url: base_url.to_string(),
            key,
            models,
            http,
            sampling: SamplingTable::default(),
            prices: BTreeMap::new(),
            cache: PromptCache::default(),
            ceiling: pace::DEFAULT_CEILING,
            structured: StructuredTurns::default(),
            decided: tokio::sync::OnceCell::new(),
        }
    }

    /// A driver answering from the tape `player` holds, as its API at `base_url` would (no
    /// provider, no key).
    pub fn replaying(
        player: Player,
        base_url: &str,
        models: Models,
        http: HttpOptions,
    ) -> ChatDriver {
        ChatDriver::with(
            dialect::of(player.provider()),
            Transport::Replay(player),
            String::new(),
            base_url.trim_end_matches('/'),
            None,
            models,
            http,
        )
    }

    /// The driver, also keeping every exchange on the tape of `recorder`.
    pub fn recording(mut self, recorder: Recorder) -> ChatDriver {
        self.recorder = Some(recorder);
        self
    }

    /// The driver, with at most `ceiling` requests in flight to each model at once.
    pub fn with_concurrency(mut self, ceiling: usize) -> ChatDriver {
        self.ceiling = ceiling.max(1);
        self
    }

    /// The driver with these prices (over the built-in table) for counting costs.
    pub fn with_prices(mut self, prices: BTreeMap<String, Price>) -> ChatDriver {
        self.prices = prices;
        self
    }

    /// The driver, marking prefixes for the provider's cache to live as `cache` says (or not
    /// at all).
    pub fn with_cache(mut self, cache: PromptCache) -> ChatDriver {
        self.cache = cache;
        self
    }

    /// The driver, asking agent-loop turns structured as `structured` says.
    pub fn with_structured(mut self, structured: StructuredTurns) -> ChatDriver {
        self.structured = structured;
        self
    }

    /// Whether agent-loop turns are asked structured, as far as decided: `auto` counts as
    /// off until [`Driver::structured_turns`] has asked.
    fn structured_now(&self) -> bool {
        self.dialect.structures_turns()
            && match self.structured {
                StructuredTurns::On => true,
                StructuredTurns::Off => false,
                StructuredTurns::Auto => self.decided.get().copied().unwrap_or(false),
            }
    }

    /// The driver with these sampling settings (temperature, max tokens) for its turns.
    pub fn with_sampling(mut self, sampling: SamplingTable) -> ChatDriver {
        self.sampling = sampling;
        self
    }

    /// One plain exchange: `user` alone, no tools; returns the reply text.
    async fn chat(
        &self,
        spent: &mut Option<Usage>,
        user: &str,
        live: &Live,
    ) -> Result<String, Failure> {
        Ok(self.exchange(spent, &plain(user), live).await?.text)
    }

    /// Asks `question`, parses the reply with `parse`; on failure asks once more with the
    /// reply quoted and `correction`, then gives up with `what`.
    async fn constrained<T>(
        &self,
        (spent, live): (&mut Option<Usage>, &Live),
        question: String,
        correction: &str,
        what: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, Failure> {
        let first = self.chat(spent, &question, live).await?;
        if let Some(v) = parse(&first) {
            return Ok(v);
        }
        let again = format!(
            "{question}\nYou replied: {first}\nThat reply cannot be read as {what}. {correction}\n"
        );
        live.restart();
        let second = self.chat(spent, &again, live).await?;
        parse(&second).ok_or_else(|| {
            Failure(format!(
                "the model's reply is not {what}, even when asked again: {:?}",
                second.chars().take(80).collect::<String>()
            ))
        })
    }
}

/// A turn of one user message, no system prompt and no tools.
fn plain(user: &str) -> TurnAsk {
    TurnAsk {
        agent: None,
        model: None,
        system: None,
        messages: vec![Message::User {
            content: user.to_string(),
        }],
        tools: Vec::new(),
        tools_off: false,
    }
}

impl ChatDriver {
    /// The answer to `req`, adding the tokens spent to `spent` and reporting it to `live` as
    /// it is written.
    async fn serve(
        &self,
        req: &Request,
        spent: &mut Option<Usage>,
        live: &Live,
    ) -> Result<Answer, Failure> {
        Ok(match &req.ask {
            Ask::Turn(t) => Answer::Turn(self.exchange(spent, t, live).await?),
            Ask::Evaluate(e) => Answer::Evaluate(
                self.constrained(
                    (&mut *spent, live),
                    render::evaluate(e),
                    "Start your reply with yes or no.",
                    "a yes or no",
                    render::verdict,
                )
                .await?,
            ),
            Ask::Choose(c) => Answer::Choose(
                self.constrained(
                    (&mut *spent, live),
                    render::choose(c),
                    "Reply with exactly one option's label or number, nothing else.",
                    "one of the options",
                    |r| render::choice(r, &c.options),
                )
                .await?,
            ),
            // Sessions run as agent loops (turns); inputs and permissions are for people;
            // tool calls are the VM's.
            Ask::Session(_) | Ask::Input(_) | Ask::Tool(_) | Ask::Permission(_) => {
                return Err(unanswerable(self.name(), req.kind()))
            }
            Ask::Convert(c) => Answer::Convert(
                self.constrained(
                    (&mut *spent, live),
                    render::convert(c),
                    "Reply with the JSON only.",
                    "of the shape asked",
                    |r| convert::local(&Value::text(r), c.shape),
                )
                .await?,
            ),
        })
    }
}

impl Driver for ChatDriver {
    fn name(&self) -> &str {
        self.dialect.name()
    }

    async fn answer(&self, req: &Request, live: &Live) -> Served {
        let mut usage = None;
        let outcome = self.serve(req, &mut usage, live).await;
        Served { outcome, usage }
    }

    fn runs_turns(&self) -> bool {
        true
    }

    async fn structured_turns(&self) -> bool {
        if !self.dialect.structures_turns() || self.structured != StructuredTurns::Auto {
            return self.structured_now();
        }
        *self
            .decided
            .get_or_init(|| async {
                match &self.transport {
                    Transport::Replay(player) => player.structured(),
                    Transport::Http(client) => {
                        structured::decodes_under_schema(client, &self.base_url).await
                    }
                }
            })
            .await
    }

    fn memo_identity(&self, req: &Request) -> Option<serde_json::Value> {
        // A tape's answers did not come from the provider: kept under the provider's key,
        // an edited tape would answer later runs that ask the real provider.
        if matches!(self.transport, Transport::Replay(_)) {
            return None;
        }
        let question = match &req.ask {
            Ask::Turn(t) => return Some(self.identity(req, self.body(t).1)),
            Ask::Evaluate(e) => render::evaluate(e),
            Ask::Choose(c) => render::choose(c),
            Ask::Convert(c) => render::convert(c),
            Ask::Session(_) | Ask::Input(_) | Ask::Tool(_) | Ask::Permission(_) => return None,
        };
        // The first question decides the answer: a re-ask follows from its reply.
        let body = self.body(&plain(&question)).1;
        Some(self.identity(req, body))
    }

    fn worst_case(&self, req: &Request) -> Option<Usage> {
        let question = match &req.ask {
            Ask::Turn(t) => return Some(self.worst_turn(t)),
            Ask::Evaluate(e) => render::evaluate(e),
            Ask::Choose(c) => render::choose(c),
            Ask::Convert(c) => render::convert(c),
            Ask::Session(_) | Ask::Input(_) | Ask::Tool(_) | Ask::Permission(_) => return None,
        };
        // Asked once, and once more with the first reply quoted.
        let once = self.worst_turn(&plain(&question));
        let mut worst = once;
        worst += once;
        worst.input_tokens += once.output_tokens;
        Some(worst)
    }

    async fn check_models(&self, models: &[Option<String>]) -> Result<(), String> {
        let offered = match self.offered_models().await {
            Some(list) => list,
            // The provider does not list its models: nothing to check against.
            None => return Ok(()),
        };
        let mut missing: Vec<&str> = models
            .iter()
            .map(|m| self.models.resolve(m.as_deref()))
            .filter(|id| !offered.iter().any(|o| o == id))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        if missing.is_empty() {
            return Ok(());
        }
        Err(format!(
            "the provider at {} does not offer the model(s) {} (it offers: {}); choose with --model, --model-map or [models] in prose.toml",
            self.url,
            missing.join(", "),
            offered.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prose_machine::protocol::ToolSpec;
    use std::time::Duration;

    fn anthropic(cache: PromptCache) -> ChatDriver {
        let http = HttpOptions {
            timeout: Duration::from_secs(1),
            idle: Duration::from_secs(1),
            retries: 0,
            backoff: Duration::ZERO,
        };
        ChatDriver::new(
            Provider::Anthropic,
            "http://127.0.0.1:9",
            Some("k".into()),
            Models::defaults(Provider::Anthropic),
            http,
        )
        .expect("driver")
        .with_cache(cache)
    }

    fn turn() -> TurnAsk {
        TurnAsk {
            agent: None,
            model: None,
            system: Some("You write. ".repeat(100)),
            messages: vec![Message::User {
                content: "Write".into(),
            }],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Reads".into(),
                input_schema: serde_json::json!({"type": "object"}),
            }],
            tools_off: false,
        }
    }

    #[test]
    fn a_marked_prompt_is_reserved_at_the_price_of_writing_it_to_the_cache() {
        let off = anthropic(PromptCache::Off).worst_turn(&turn());
        assert_eq!(off.cache_write_tokens, 0);
        for (cache, rate) in [
            (PromptCache::FiveMinutes, 3.75),
            (PromptCache::OneHour, 6.0),
        ] {
            let marked = anthropic(cache).worst_turn(&turn());
            assert_eq!(marked.input_tokens, 0);
            assert!(marked.cache_write_tokens > 0);
            let expected = (marked.cache_write_tokens as f64 * rate
                + marked.output_tokens as f64 * 15.0)
                / 1e6;
            assert!(
                (marked.cost.expect("priced") - expected).abs() < 1e-12,
                "{marked:?}"
            );
            assert!(marked.cost > off.cost, "a write costs more than input");
        }
    }

    #[test]
    fn what_identifies_a_request_leaves_out_the_key_and_the_cache_marks() {
        let req = |d: &ChatDriver| {
            d.memo_identity(&Request {
                id: prose_machine::protocol::RequestId::new(
                    prose_machine::protocol::Lineage::root(),
                    0,
                ),
                site: prose_machine::protocol::Site {
                    module: 0,
                    line: 1,
                    program: "p".into(),
                },
                ask: Ask::Turn(turn()),
            })
            .expect("a model request")
        };
        let five = req(&anthropic(PromptCache::FiveMinutes));
        assert_eq!(five, req(&anthropic(PromptCache::Off)));
        let text = five.to_string();
        assert!(
            !text.contains("cache_control") && !text.contains("\"k\""),
            "{text}"
        );
        assert_eq!(five["request"]["model"], prose_settings::prices::SONNET);
        assert_eq!(five["base_url"], "http://127.0.0.1:9");
    }
}
