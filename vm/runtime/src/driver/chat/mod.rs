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
pub mod tape;

use super::http::{self, retrying, AttemptError, Events, HttpOptions};
use super::pace::{self, Limits};
use super::prices::{price, priced, Price};
use super::{render, unanswerable, Driver, Live, Served};
use crate::guards::{astray, runaway};
use dialect::openai::structured;
use dialect::stream::Assembly;
use dialect::{Dialect, Provider};
use prose_machine::convert;
use prose_machine::protocol::{
    Answer, Ask, Failure, Message, Request, Stop, TurnAnswer, TurnAsk, Usage,
};
use prose_machine::value::Value;
use prose_settings::cache::PromptCache;
pub use prose_settings::models::Models;
use prose_settings::turns::StructuredTurns;
use prose_settings::SamplingTable;
use std::collections::BTreeMap;
use tape::{Player, Recorder, Sent};

/// The names of the tools a request's body offers (OpenAI's `tools[].function.name`,
/// Anthropic's `tools[].name`).
fn offered_tools(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().or(t["name"].as_str()))
        .map(str::to_string)
        .collect()
}

/// Whether a streaming answer has gone astray ([`astray`]): the declarations written back,
/// or a call of a tool not in `offered` opened as text.
fn gone_astray(text: &str, offered: &[String]) -> bool {
    astray::echoes_declarations(text)
        || astray::made_up_call(text, |n| offered.iter().any(|o| o == n)).is_some()
}

/// A request body ready to send, with what bounds its cost.
struct Prepared<'a> {
    model: &'a str,
    body: serde_json::Value,
    headers: Vec<(&'static str, String)>,
    /// The most tokens the reply may use.
    max_out: u32,
}

/// Where a chat driver's requests go.
enum Transport {
    /// To the provider, over HTTP.
    Http(reqwest::Client),
    /// To a tape of recorded exchanges.
    Replay(Player),
}

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

    /// The body of the request for `turn` as far as it bears on the answer: the API's body
    /// with the model's sampling, before any mark for the provider's cache. Returns the
    /// model id, the body and the most tokens the reply may use.
    fn body<'a>(&'a self, turn: &'a TurnAsk) -> (&'a str, serde_json::Value, u32) {
        let model = self.models.resolve(turn.model.as_deref());
        let sampling = self.sampling.for_turn(model, turn.agent.as_deref());
        // Sent with every request, so that a budget can count on it.
        let max_out = sampling
            .max_output_tokens
            .unwrap_or_else(|| prose_settings::prices::max_output_tokens(self.name()));
        let mut body = self
            .dialect
            .body(model, max_out, turn, self.structured_now());
        if let Some(t) = sampling.temperature {
            body["temperature"] = t.into();
        }
        (model, body, max_out)
    }

    /// The request for `turn`: the API's body (marked for the provider's cache) and
    /// headers, with the model's sampling.
    fn prepare<'a>(&'a self, turn: &'a TurnAsk) -> Prepared<'a> {
        let (model, mut body, max_out) = self.body(turn);
        self.dialect.mark_cache(&mut body, self.cache);
        let headers = self.dialect.headers(self.key.as_deref());
        Prepared {
            model,
            body,
            headers,
            max_out,
        }
    }

    /// What a memo keys `req` by, its request's body being `body`: the API, the provider's
    /// base URL, the kind of request and the body (model, system prompt, conversation,
    /// tools, sampling). Never a key or header: those are not in the body.
    fn identity(&self, req: &Request, body: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "api": self.name(),
            "base_url": self.base_url,
            "kind": req.kind().as_str(),
            "request": body,
        })
    }

    /// `usage` priced by `model`'s price, cache writes at the rate of the marks' lifetime.
    fn priced(&self, usage: Usage, model: &str) -> Usage {
        priced(usage, price(&self.prices, model), self.cache)
    }

    /// The most a request for `turn` can use: its prompt (estimated from the body's size, at
    /// three bytes a token) and the reply's limit, priced; a prompt marked for the
    /// provider's cache may all be written to it, when that costs more than plain input.
    fn worst_turn(&self, turn: &TurnAsk) -> Usage {
        let p = self.prepare(turn);
        let estimate = p.body.to_string().len() as u64 / 3 + 16;
        let plain = self.priced(Usage::plain(estimate, u64::from(p.max_out)), p.model);
        if !p.body.to_string().contains("\"cache_control\"") {
            return plain;
        }
        let written = self.priced(
            Usage {
                cache_write_tokens: estimate,
                ..Usage::plain(0, u64::from(p.max_out))
            },
            p.model,
        );
        match (plain.cost, written.cost) {
            (Some(a), Some(b)) if b > a => written,
            _ => plain,
        }
    }

    /// One exchange: the conversation of `turn` with its tools, streamed (and reported to
    /// `live`) and retried as [`HttpOptions`] say; returns the model's message and adds the
    /// tokens the provider reports to `spent`.
    async fn exchange(
        &self,
        spent: &mut Option<Usage>,
        turn: &TurnAsk,
        live: &Live,
    ) -> Result<TurnAnswer, Failure> {
        let p = self.prepare(turn);
        let (answer, usage) = retrying(&self.http, self.key.as_deref(), |n| {
            if n > 0 {
                live.restart();
            }
            self.attempt(&p, live)
        })
        .await?;
        if let Some(u) = usage {
            *spent.get_or_insert_with(Usage::default) += self.priced(u, p.model);
        }
        if structured::asked(&p.body) {
            return Ok(structured::read(answer, turn.messages.len()));
        }
        Ok(answer)
    }

    /// One attempt at `p`, once the model's window has a place for it (the wait is not part
    /// of its time limit), within the time limit, kept on the tape when recording. How it
    /// went moves the window.
    async fn attempt(
        &self,
        p: &Prepared<'_>,
        live: &Live,
    ) -> Result<(TurnAnswer, Option<Usage>), AttemptError> {
        let permit = match &self.transport {
            Transport::Http(_) => Some(
                pace::pace_for(&self.base_url, p.model, self.ceiling)
                    .acquire()
                    .await,
            ),
            Transport::Replay(_) => None,
        };
        let mut kept = self.recorder.as_ref().map(|_| Kept::default());
        let mut limits = Limits::default();
        let result = http::within(
            self.http.timeout,
            self.attempt_within(p, live, kept.as_mut(), &mut limits),
        )
        .await;
        match (permit, &result) {
            (Some(permit), Ok(_)) => permit.answered(&limits),
            (Some(permit), Err(e)) if e.refused() => permit.refused(&Limits {
                retry_after: e.wait,
                ..limits
            }),
            // A failure says nothing of the provider's limits.
            _ => {}
        }
        if let (Some(recorder), Some(kept)) = (&self.recorder, kept) {
            let exchange = tape::Exchange {
                request: p.body.clone(),
                reply: kept.into_reply(result.as_ref().err()),
            };
            recorder.write(&exchange).map_err(AttemptError::fatal)?;
        }
        result
    }

    /// One attempt at `p`: sent (or looked up on the tape), and its reply read whole or as
    /// a stream; what came is put in `kept` when recording, and what the provider's headers
    /// say of its limits in `limits`.
    async fn attempt_within(
        &self,
        p: &Prepared<'_>,
        live: &Live,
        mut kept: Option<&mut Kept>,
        limits: &mut Limits,
    ) -> Result<(TurnAnswer, Option<Usage>), AttemptError> {
        let mut source = match &self.transport {
            Transport::Http(client) => {
                let resp = http::send(client, &self.url, &p.headers, &p.body).await?;
                *limits = Limits::from_headers(resp.headers(), chrono::Utc::now());
                if http::is_event_stream(&resp) {
                    if let Some(k) = kept.as_deref_mut() {
                        k.streamed = true;
                    }
                    Source::Http(Events::new(resp, self.http.idle))
                } else {
                    let body = http::read_json(resp).await?;
                    if let Some(k) = kept.as_deref_mut() {
                        k.body = Some(body.clone());
                    }
                    return self.whole(&body, live);
                }
            }
            Transport::Replay(player) => {
                match player.reply(&p.body).map_err(AttemptError::fatal)? {
                    tape::Reply::Body { body } => return self.whole(&body, live),
                    tape::Reply::Stream { events, fault } => {
                        Source::Tape(events.into_iter(), fault)
                    }
                    tape::Reply::Refused(refusal) => return Err(refusal.error()),
                    tape::Reply::Fault { message } => return Err(AttemptError::retryable(message)),
                }
            }
        };
        let mut assembly = Assembly::new(self.dialect);
        let mut watch = runaway::Watch::default();
        let offered = offered_tools(&p.body);
        while let Some((event, data)) = source.next().await? {
            if let Some(k) = kept.as_deref_mut() {
                k.events.push(Sent(event.clone(), data.clone()));
            }
            let added = assembly
                .feed(event.as_deref(), &data)
                .map_err(AttemptError::retryable)?;
            if added.content {
                live.started();
            }
            live.text(&added.text);
            if let Some(loop_) = watch.look(assembly.text()) {
                // Hang up: what was written stays, cut after the loop's first copy.
                let keep = loop_.keep;
                return Ok(self.hung_up(assembly, keep, Stop::Repeating, Some(loop_.span), p));
            }
            if !offered.is_empty() && gone_astray(assembly.text(), &offered) {
                // What follows is declarations, or the arguments of a made-up call, often
                // for thousands of tokens: nothing worth waiting for.
                let keep = assembly.text().len();
                return Ok(self.hung_up(assembly, keep, Stop::Astray, None, p));
            }
            if assembly.ended() {
                source.expect_end().await?;
                break;
            }
        }
        assembly.finish().map_err(AttemptError::retryable)
    }

    /// A whole JSON answer, reported to `live` as one piece.
    fn whole(
        &self,
        body: &serde_json::Value,
        live: &Live,
    ) -> Result<(TurnAnswer, Option<Usage>), AttemptError> {
        let (answer, usage) = self.dialect.answer(body).map_err(AttemptError::fatal)?;
        live.started();
        live.text(&answer.text);
        Ok((answer, usage))
    }

    /// The answer of a stream hung up on (`stop` says why): its text up to `keep`, and its
    /// tokens as far as they are known (the input as the provider said it, else estimated
    /// from the request; the output estimated from what was written, at three bytes a
    /// token, as budgets estimate).
    fn hung_up(
        &self,
        assembly: Assembly,
        keep: usize,
        stop: Stop,
        repeated: Option<String>,
        p: &Prepared<'_>,
    ) -> (TurnAnswer, Option<Usage>) {
        let written = assembly.text().len() as u64;
        let input = assembly
            .input_usage()
            .unwrap_or_else(|| Usage::plain(p.body.to_string().len() as u64 / 3 + 16, 0));
        let text = assembly.text()[..keep].to_string();
        (
            TurnAnswer {
                text,
                tool_calls: Vec::new(),
                stop,
                repeated,
            },
            Some(Usage {
                output_tokens: written / 3 + 1,
                ..input
            }),
        )
    }

    /// The ids of the models the provider offers (`GET .../models`), when it says.
    async fn offered_models(&self) -> Option<Vec<String>> {
        let Transport::Http(client) = &self.transport else {
            return None;
        };
        let mut req = client
            .get(self.dialect.models_endpoint(&self.base_url))
            .timeout(self.http.timeout.min(std::time::Duration::from_secs(10)));
        for (name, value) in self.dialect.headers(self.key.as_deref()) {
            req = req.header(name, value);
        }
        let resp = req.send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let json: serde_json::Value = resp.json().await.ok()?;
        let ids: Vec<String> = json["data"]
            .as_array()?
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_string))
            .collect();
        (!ids.is_empty()).then_some(ids)
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

/// Where a streamed reply's events come from.
enum Source {
    /// The provider's response.
    Http(Events),
    /// A tape: the events recorded, then the fault the stream ended with, if it did.
    Tape(std::vec::IntoIter<Sent>, Option<String>),
}

impl Source {
    /// The next event with data: its name and data, or none at the end.
    async fn next(&mut self) -> Result<Option<(Option<String>, String)>, AttemptError> {
        match self {
            Source::Http(events) => loop {
                match events.next().await? {
                    None => return Ok(None),
                    Some(sse) => {
                        if let Some(data) = sse.data {
                            return Ok(Some((sse.event, data)));
                        }
                    }
                }
            },
            Source::Tape(events, fault) => match (events.next(), fault.take()) {
                (Some(Sent(event, data)), fault_later) => {
                    *fault = fault_later;
                    Ok(Some((event, data)))
                }
                (None, Some(f)) => Err(AttemptError::retryable(f)),
                (None, None) => Ok(None),
            },
        }
    }

    /// After the provider said the answer is complete: nothing more may come.
    async fn expect_end(&mut self) -> Result<(), AttemptError> {
        match self {
            Source::Http(events) => events.expect_end().await,
            Source::Tape(..) => match self.next().await? {
                None => Ok(()),
                Some((_, data)) => Err(AttemptError::retryable(format!(
                    "the provider's stream went on after its end: {:?}",
                    data.chars().take(80).collect::<String>()
                ))),
            },
        }
    }
}

/// What came back from one attempt, kept for the tape.
#[derive(Default)]
struct Kept {
    /// The reply was a stream.
    streamed: bool,
    /// Its events, as read.
    events: Vec<Sent>,
    /// The whole JSON body, when the reply was one.
    body: Option<serde_json::Value>,
}

impl Kept {
    /// The tape's record of the attempt, which ended in `error` if it failed.
    fn into_reply(self, error: Option<&AttemptError>) -> tape::Reply {
        if let Some(body) = self.body {
            return tape::Reply::Body { body };
        }
        match error {
            Some(AttemptError {
                refusal: Some(r), ..
            }) => tape::Reply::Refused(r.clone()),
            Some(e) if !self.streamed => tape::Reply::Fault {
                message: e.message.clone(),
            },
            _ => tape::Reply::Stream {
                events: self.events,
                fault: error.map(|e| e.message.clone()),
            },
        }
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
