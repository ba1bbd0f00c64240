//! The chat drivers. `openai`: chat completions at `{base_url}/chat/completions`, so the
//! OpenAI API and local servers speaking it (Ollama, vLLM, llama.cpp) answer, with the key,
//! when there is one, as a bearer token. `anthropic`: the Messages API at
//! `{base_url}/v1/messages` with `x-api-key`. Both answer model turns of the VM's agent loop
//! (the conversation, with the agent's prompt as the system prompt, and the tools on offer:
//! OpenAI `tools`/`tool_calls`, Anthropic `tool_use`/`tool_result`; `wire` translates).
//! Conditions, choices and conversions use a constrained prompt whose reply is parsed
//! strictly, with one corrective re-ask.

mod wire;

use super::http::{post_json, HttpOptions};
use super::prices::{price, priced, Price};
use super::settings::SamplingTable;
use super::{render, unanswerable, Driver, Served};
use crate::convert;
use crate::protocol::{Answer, Ask, Failure, Message, Request, TurnAnswer, TurnAsk, Usage};
use crate::value::Value;
use std::collections::BTreeMap;

/// Which API a [`ChatDriver`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// OpenAI chat completions.
    OpenAi,
    /// Anthropic messages.
    Anthropic,
}

/// Model ids for the spec's aliases, and for sessions naming no model.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Models {
    /// `model: sonnet`.
    pub sonnet: String,
    /// `model: opus`.
    pub opus: String,
    /// `model: haiku`.
    pub haiku: String,
    /// Sessions that name no model.
    pub default: String,
}

impl Models {
    /// Current defaults for `api`: Anthropic's model ids, or one model for every alias on
    /// an OpenAI-compatible server.
    pub fn defaults(api: Api) -> Models {
        let all = |m: &str| Models {
            sonnet: m.into(),
            opus: m.into(),
            haiku: m.into(),
            default: m.into(),
        };
        match api {
            Api::Anthropic => Models {
                opus: prosec::prices::OPUS.into(),
                haiku: prosec::prices::HAIKU.into(),
                ..all(prosec::prices::SONNET)
            },
            Api::OpenAi => all(prosec::prices::OPENAI_DEFAULT),
        }
    }

    /// The id to send for a session's `model:` (aliases mapped, others as written).
    pub fn resolve<'a>(&'a self, model: Option<&'a str>) -> &'a str {
        match model {
            None => &self.default,
            Some("sonnet") => &self.sonnet,
            Some("opus") => &self.opus,
            Some("haiku") => &self.haiku,
            Some(m) => m,
        }
    }
}

/// Most tokens a reply may use unless `prose.toml` says otherwise (sent with every request,
/// so a budget can count on it).
const MAX_TOKENS: u32 = prosec::prices::MAX_OUTPUT_TOKENS;

/// A request body ready to send, with what bounds its cost.
struct Prepared<'a> {
    model: &'a str,
    body: serde_json::Value,
    headers: Vec<(&'static str, String)>,
    /// The most tokens the reply may use.
    max_out: u32,
}

/// Talks to a chat API.
pub struct ChatDriver {
    api: Api,
    client: reqwest::Client,
    url: String,
    key: Option<String>,
    models: Models,
    http: HttpOptions,
    sampling: SamplingTable,
    prices: BTreeMap<String, Price>,
}

impl ChatDriver {
    /// A driver for `api` at `base_url` (e.g. `https://api.openai.com/v1` or
    /// `https://api.anthropic.com`), with an API key (optional for local OpenAI-compatible
    /// servers) and the model ids to use.
    pub fn new(
        api: Api,
        base_url: &str,
        key: Option<String>,
        models: Models,
        http: HttpOptions,
    ) -> Result<ChatDriver, Failure> {
        let key = key.filter(|k| !k.is_empty());
        if api == Api::Anthropic && key.is_none() {
            return Err(Failure(
                "the anthropic driver needs ANTHROPIC_API_KEY".into(),
            ));
        }
        crate::tls::install_crypto_provider();
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| Failure(format!("cannot set up HTTP: {e}")))?;
        let base = base_url.trim_end_matches('/');
        let url = match api {
            Api::OpenAi => format!("{base}/chat/completions"),
            Api::Anthropic => format!("{base}/v1/messages"),
        };
        Ok(ChatDriver {
            api,
            client,
            url,
            key,
            models,
            http,
            sampling: SamplingTable::default(),
            prices: BTreeMap::new(),
        })
    }

    /// The driver with these prices (over the built-in table) for counting costs.
    pub fn with_prices(mut self, prices: BTreeMap<String, Price>) -> ChatDriver {
        self.prices = prices;
        self
    }

    /// The driver with these sampling settings (temperature, max tokens) for its turns.
    pub fn with_sampling(mut self, sampling: SamplingTable) -> ChatDriver {
        self.sampling = sampling;
        self
    }

    /// The request for `turn`: the API's body and headers, with the model's sampling.
    fn prepare<'a>(&'a self, turn: &'a TurnAsk) -> Prepared<'a> {
        let model = self.models.resolve(turn.model.as_deref());
        let sampling = self.sampling.for_turn(model, turn.agent.as_deref());
        let max_out = sampling.max_output_tokens.unwrap_or(MAX_TOKENS);
        let key = self.key.as_deref();
        let (mut body, headers) = match self.api {
            Api::OpenAi => {
                let headers: Vec<(&str, String)> = key
                    .map(|k| ("authorization", format!("Bearer {k}")))
                    .into_iter()
                    .collect();
                let mut body = wire::openai_body(model, turn);
                body["max_tokens"] = max_out.into();
                (body, headers)
            }
            Api::Anthropic => {
                let mut headers = vec![("anthropic-version", "2023-06-01".to_string())];
                if let Some(k) = key {
                    headers.push(("x-api-key", k.to_string()));
                }
                (wire::anthropic_body(model, max_out, turn), headers)
            }
        };
        if let Some(t) = sampling.temperature {
            body["temperature"] = t.into();
        }
        Prepared {
            model,
            body,
            headers,
            max_out,
        }
    }

    /// The most a request for `turn` can use: its prompt (estimated from the body's size, at
    /// three bytes a token) and the reply's limit, priced.
    fn worst_turn(&self, turn: &TurnAsk) -> Usage {
        let p = self.prepare(turn);
        let usage = Usage {
            input_tokens: p.body.to_string().len() as u64 / 3 + 16,
            output_tokens: u64::from(p.max_out),
            cost: None,
        };
        priced(usage, price(&self.prices, p.model))
    }

    /// One exchange: the conversation of `turn` with its tools; returns the model's message
    /// and adds the tokens the provider reports to `spent`.
    async fn exchange(
        &self,
        spent: &mut Option<Usage>,
        turn: &TurnAsk,
    ) -> Result<TurnAnswer, Failure> {
        let p = self.prepare(turn);
        let key = self.key.as_deref();
        let resp = post_json(
            &self.client,
            &self.url,
            &p.headers,
            &p.body,
            &self.http,
            key,
        )
        .await?;
        let (answer, usage) = match self.api {
            Api::OpenAi => wire::openai_answer(&resp),
            Api::Anthropic => wire::anthropic_answer(&resp),
        }
        .map_err(Failure)?;
        if let Some(u) = usage {
            *spent.get_or_insert_with(Usage::default) += priced(u, price(&self.prices, p.model));
        }
        Ok(answer)
    }

    /// The ids of the models the provider offers (`GET .../models`), when it says.
    async fn offered_models(&self) -> Option<Vec<String>> {
        let url = match self.api {
            Api::OpenAi => self.url.strip_suffix("/chat/completions")?.to_string() + "/models",
            Api::Anthropic => self.url.strip_suffix("/messages")?.to_string() + "/models",
        };
        let mut req = self
            .client
            .get(&url)
            .timeout(self.http.timeout.min(std::time::Duration::from_secs(10)));
        match (self.api, self.key.as_deref()) {
            (Api::OpenAi, Some(k)) => req = req.bearer_auth(k),
            (Api::Anthropic, Some(k)) => {
                req = req
                    .header("x-api-key", k)
                    .header("anthropic-version", "2023-06-01")
            }
            _ => {}
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
    async fn chat(&self, spent: &mut Option<Usage>, user: &str) -> Result<String, Failure> {
        Ok(self.exchange(spent, &plain(user)).await?.text)
    }

    /// Asks `question`, parses the reply with `parse`; on failure asks once more with the
    /// reply quoted and `correction`, then gives up with `what`.
    async fn constrained<T>(
        &self,
        spent: &mut Option<Usage>,
        question: String,
        correction: &str,
        what: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, Failure> {
        let first = self.chat(spent, &question).await?;
        if let Some(v) = parse(&first) {
            return Ok(v);
        }
        let again = format!(
            "{question}\nYou replied: {first}\nThat reply cannot be read as {what}. {correction}\n"
        );
        let second = self.chat(spent, &again).await?;
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
    }
}

impl ChatDriver {
    /// The answer to `req`, adding the tokens spent to `spent`.
    async fn serve(&self, req: &Request, spent: &mut Option<Usage>) -> Result<Answer, Failure> {
        Ok(match &req.ask {
            Ask::Turn(t) => Answer::Turn(self.exchange(spent, t).await?),
            Ask::Evaluate(e) => Answer::Evaluate(
                self.constrained(
                    spent,
                    render::evaluate(e),
                    "Start your reply with yes or no.",
                    "a yes or no",
                    render::verdict,
                )
                .await?,
            ),
            Ask::Choose(c) => Answer::Choose(
                self.constrained(
                    spent,
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
                    spent,
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
        match self.api {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        }
    }

    async fn answer(&self, req: &Request) -> Served {
        let mut usage = None;
        let outcome = self.serve(req, &mut usage).await;
        Served { outcome, usage }
    }

    fn runs_turns(&self) -> bool {
        true
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
