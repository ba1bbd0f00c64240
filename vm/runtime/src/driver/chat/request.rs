//! Requests: a turn as the body the provider is sent (the model's sampling, the dialect's
//! body, the marks for the provider's cache and the headers), what the memo keys it by, and
//! the most it can cost.

use super::ChatDriver;
use crate::driver::prices::{price, priced};
use crate::driver::Driver;
use prose_machine::protocol::{Request, TurnAsk, Usage};

/// The names of the tools a request's body offers (OpenAI's `tools[].function.name`,
/// Anthropic's `tools[].name`).
pub(super) fn offered_tools(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().or(t["name"].as_str()))
        .map(str::to_string)
        .collect()
}

/// A request body ready to send, with what bounds its cost.
pub(super) struct Prepared<'a> {
    pub(super) model: &'a str,
    pub(super) body: serde_json::Value,
    pub(super) headers: Vec<(&'static str, String)>,
    /// The most tokens the reply may use.
    pub(super) max_out: u32,
}

impl ChatDriver {
    /// The body of the request for `turn` as far as it bears on the answer: the API's body
    /// with the model's sampling, before any mark for the provider's cache. Returns the
    /// model id, the body and the most tokens the reply may use.
    pub(super) fn body<'a>(&'a self, turn: &'a TurnAsk) -> (&'a str, serde_json::Value, u32) {
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
    pub(super) fn prepare<'a>(&'a self, turn: &'a TurnAsk) -> Prepared<'a> {
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
    pub(super) fn identity(&self, req: &Request, body: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "api": self.name(),
            "base_url": self.base_url,
            "kind": req.kind().as_str(),
            "request": body,
        })
    }

    /// `usage` priced by `model`'s price, cache writes at the rate of the marks' lifetime.
    pub(super) fn priced(&self, usage: Usage, model: &str) -> Usage {
        priced(usage, price(&self.prices, model), self.cache)
    }

    /// The most a request for `turn` can use: its prompt (estimated from the body's size, at
    /// three bytes a token) and the reply's limit, priced; a prompt marked for the
    /// provider's cache may all be written to it, when that costs more than plain input.
    pub(super) fn worst_turn(&self, turn: &TurnAsk) -> Usage {
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
}
