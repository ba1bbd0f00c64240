//! The OpenAI-compatible driver: chat completions at `{base_url}/chat/completions`, so the
//! OpenAI API and local servers speaking it (Ollama, vLLM, llama.cpp) answer sessions. The
//! key, when there is one, goes as a bearer token. Conditions, choices and conversions use
//! a constrained prompt whose reply is parsed strictly, with one corrective re-ask.

use super::http::{post_json, HttpOptions};
use super::{render, Answer, Driver, DriverError, SessionAnswer};
use crate::convert;
use crate::request::{Request, RequestKind, SessionRequest};
use crate::value::Value;
use bytecode_spec::Shape;
use serde_json::json;

/// Talks to an OpenAI-compatible server.
pub struct OpenAi {
    client: reqwest::Client,
    url: String,
    key: Option<String>,
    model: String,
    http: HttpOptions,
}

impl OpenAi {
    /// A driver for the server at `base_url` (e.g. `https://api.openai.com/v1`), with an
    /// optional API key, using `model` for sessions that name none or name one of the
    /// spec's aliases (`sonnet`, `opus`, `haiku`).
    pub fn new(
        base_url: &str,
        key: Option<String>,
        model: String,
        http: HttpOptions,
    ) -> Result<OpenAi, DriverError> {
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| DriverError(format!("cannot set up HTTP: {e}")))?;
        Ok(OpenAi {
            client,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            key: key.filter(|k| !k.is_empty()),
            model,
            http,
        })
    }

    /// One chat completion: `system` and `user` turns; returns the reply text.
    async fn chat(&self, model: Option<&str>, system: Option<&str>, user: &str) -> Answer<String> {
        let model = match model {
            None | Some("sonnet" | "opus" | "haiku") => self.model.as_str(),
            Some(m) => m,
        };
        let mut messages = Vec::new();
        if let Some(s) = system {
            messages.push(json!({"role": "system", "content": s}));
        }
        messages.push(json!({"role": "user", "content": user}));
        let body = json!({"model": model, "messages": messages});
        let headers: Vec<(&str, String)> = self
            .key
            .iter()
            .map(|k| ("authorization", format!("Bearer {k}")))
            .collect();
        let resp = post_json(
            &self.client,
            &self.url,
            &headers,
            &body,
            &self.http,
            self.key.as_deref(),
        )
        .await?;
        resp["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                DriverError("the provider's response has no choices[0].message.content".to_string())
            })
    }

    /// Asks `question`, parses the reply with `parse`; on failure asks once more with the
    /// reply quoted and `correction`, then gives up with `what`.
    async fn constrained<T>(
        &self,
        question: String,
        correction: &str,
        what: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Answer<T> {
        let first = self.chat(None, None, &question).await?;
        if let Some(v) = parse(&first) {
            return Ok(v);
        }
        let again = format!("{question}\nYou replied: {first}\n{correction}\n");
        let second = self.chat(None, None, &again).await?;
        parse(&second).ok_or_else(|| {
            DriverError(format!(
                "the model's reply is not {what}, even when asked again: {:?}",
                second.chars().take(80).collect::<String>()
            ))
        })
    }
}

impl Driver for OpenAi {
    fn name(&self) -> &str {
        "openai"
    }

    async fn session(&self, _: &Request, s: &SessionRequest) -> Answer<SessionAnswer> {
        let text = self
            .chat(s.model.as_deref(), s.system.as_deref(), &render::session(s))
            .await?;
        // The model keeps no memory: a persistent agent's memory is its earlier memory
        // plus a line per session.
        let memory = s.persistent.then(|| {
            let line = format!("- {}", text.lines().next().unwrap_or_default());
            match &s.memory {
                Some(m) => format!("{m}\n{line}"),
                None => line,
            }
        });
        Ok(SessionAnswer { text, memory })
    }

    async fn evaluate(&self, req: &Request, condition: &str) -> Answer<bool> {
        let context = match &req.kind {
            RequestKind::Evaluate { context, .. } => context.as_deref(),
            _ => None,
        };
        self.constrained(
            render::evaluate(condition, context),
            "Start your reply with yes or no.",
            "a yes or no",
            render::verdict,
        )
        .await
    }

    async fn choose(&self, req: &Request, options: &[String]) -> Answer<usize> {
        let criteria = match &req.kind {
            RequestKind::Choose { criteria, .. } => criteria.as_str(),
            _ => "",
        };
        self.constrained(
            render::choose(criteria, options),
            "Reply with exactly one option's label or number, nothing else.",
            "one of the options",
            |r| render::choice(r, options),
        )
        .await
    }

    async fn input(&self, req: &Request, name: &str) -> Answer<Value> {
        let question = match &req.kind {
            RequestKind::Input { question, .. } => question.as_str(),
            _ => "",
        };
        let text = self
            .chat(
                None,
                None,
                &format!("Provide {name}: {question}\nReply with the value only.\n"),
            )
            .await?;
        Ok(Value::text(text))
    }

    async fn convert(&self, _: &Request, text: &str, shape: Shape) -> Answer<Value> {
        self.constrained(
            render::convert(text, shape),
            "Reply with the JSON only.",
            "of the shape asked",
            |r| convert::local(&Value::text(r), shape),
        )
        .await
    }
}
