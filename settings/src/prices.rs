//! What tokens cost: a table of prices per model id (US dollars per million tokens), the
//! providers' published list prices for the models the drivers name by default, overridable
//! and extendable in `prose.toml` (`[prices."model-id"] input = ..., output = ...`). A model
//! with no price (a local one) costs nothing that can be counted.
//!
//! This is the one table both tools use: `prosevm` prices what a run spends and reserves
//! against a budget with it, and `prosec cost` prices a program's bounds before it runs.
//! The default model ids the drivers send for the spec's aliases live here too, so that
//! both agree on what `model: sonnet` costs.

use crate::cache::PromptCache;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A model's price in US dollars per million tokens. Input a provider read from its prompt
/// cache, and input it wrote there, have prices of their own; where a price leaves them out
/// (a `[prices]` entry of `prose.toml` naming only `input` and `output`), they cost what
/// plain input costs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million tokens read.
    pub input: f64,
    /// Per million tokens written.
    pub output: f64,
    /// Per million input tokens read from the provider's cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Per million input tokens written to the provider's cache to live five minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// Per million input tokens written to the provider's cache to live an hour (default:
    /// the five-minute price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<f64>,
}

/// Tokens by how they are billed: plain input, input read from and written to the
/// provider's prompt cache, and output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Input neither read from nor written to the cache.
    pub input: u64,
    /// Input read from the cache.
    pub cache_read: u64,
    /// Input written to the cache.
    pub cache_write: u64,
    /// Output.
    pub output: u64,
}

impl Price {
    /// A price with no cache prices of its own (cached input costs what input costs).
    pub const fn plain(input: f64, output: f64) -> Price {
        Price {
            input,
            output,
            cache_read: None,
            cache_write: None,
            cache_write_1h: None,
        }
    }

    /// What `tokens_in` and `tokens_out` cost, none of them cached.
    pub fn cost(&self, tokens_in: u64, tokens_out: u64) -> f64 {
        self.cost_of(
            Tokens {
                input: tokens_in,
                output: tokens_out,
                ..Tokens::default()
            },
            PromptCache::default(),
        )
    }

    /// The price per million tokens read from the cache.
    pub fn cache_read_price(&self) -> f64 {
        self.cache_read.unwrap_or(self.input)
    }

    /// The price per million tokens written to the cache to live as `ttl` says.
    pub fn cache_write_price(&self, ttl: PromptCache) -> f64 {
        let five = self.cache_write.unwrap_or(self.input);
        match ttl {
            PromptCache::OneHour => self.cache_write_1h.unwrap_or(five),
            PromptCache::FiveMinutes | PromptCache::Off => five,
        }
    }

    /// What `t` costs, its cache writes made to live as `ttl` says.
    pub fn cost_of(&self, t: Tokens, ttl: PromptCache) -> f64 {
        (t.input as f64 * self.input
            + t.cache_read as f64 * self.cache_read_price()
            + t.cache_write as f64 * self.cache_write_price(ttl)
            + t.output as f64 * self.output)
            / 1_000_000.0
    }
}

/// The Anthropic model `model: sonnet` is sent as by default (and a session naming no
/// model, on the `anthropic` driver).
pub const SONNET: &str = "claude-sonnet-4-5";
/// The Anthropic model `model: opus` is sent as by default.
pub const OPUS: &str = "claude-opus-4-1";
/// The Anthropic model `model: haiku` is sent as by default.
pub const HAIKU: &str = "claude-haiku-4-5";
/// The model every alias is sent as by default on an OpenAI-compatible server.
pub const OPENAI_DEFAULT: &str = "gpt-4o-mini";

/// Most tokens a reply on the `anthropic` driver may use unless `prose.toml` says otherwise:
/// the driver sends it with every request, and a budget reserves it as the reply's worst
/// case. A session's answer is rarely longer than a few pages, and one cut off at the limit
/// is continued (twice at most).
pub const MAX_OUTPUT_TOKENS: u32 = 4096;

/// Most tokens a reply on the `openai` driver may use unless `prose.toml` says otherwise:
/// lower than Anthropic's, because OpenAI-compatible servers are often small local models
/// that write slowly (2,048 tokens are two minutes at 15 tokens a second).
pub const MAX_OUTPUT_TOKENS_OPENAI: u32 = 2048;

/// Most tokens a reply may use on `driver` (`openai`, or any other, priced as `anthropic`)
/// unless `prose.toml` says otherwise.
pub fn max_output_tokens(driver: &str) -> u32 {
    match driver {
        "openai" => MAX_OUTPUT_TOKENS_OPENAI,
        _ => MAX_OUTPUT_TOKENS,
    }
}

/// List prices of the models the drivers use by default. OpenAI bills input its automatic
/// prefix cache serves at half price and charges nothing more to write it; Anthropic bills
/// cache reads at a tenth of the input price and writes at 1.25 times (five minutes) or
/// twice (an hour).
const BUILT_IN: &[(&str, Price)] = &[
    (
        OPENAI_DEFAULT,
        Price {
            cache_read: Some(0.075),
            cache_write: Some(0.15),
            ..Price::plain(0.15, 0.60)
        },
    ),
    (
        "gpt-4o",
        Price {
            cache_read: Some(1.25),
            cache_write: Some(2.50),
            ..Price::plain(2.50, 10.0)
        },
    ),
    (
        HAIKU,
        Price {
            cache_read: Some(0.10),
            cache_write: Some(1.25),
            cache_write_1h: Some(2.0),
            ..Price::plain(1.0, 5.0)
        },
    ),
    (
        SONNET,
        Price {
            cache_read: Some(0.30),
            cache_write: Some(3.75),
            cache_write_1h: Some(6.0),
            ..Price::plain(3.0, 15.0)
        },
    ),
    (
        OPUS,
        Price {
            cache_read: Some(1.50),
            cache_write: Some(18.75),
            cache_write_1h: Some(30.0),
            ..Price::plain(15.0, 75.0)
        },
    ),
];

/// The price of `model`: from `overrides` (`prose.toml`), else the built-in table.
pub fn price(overrides: &BTreeMap<String, Price>, model: &str) -> Option<Price> {
    overrides.get(model).copied().or_else(|| {
        BUILT_IN
            .iter()
            .find(|(id, _)| *id == model)
            .map(|(_, p)| *p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_come_from_the_file_over_the_table() {
        let mut file = BTreeMap::new();
        file.insert(OPENAI_DEFAULT.to_string(), Price::plain(1.0, 2.0));
        assert_eq!(price(&file, OPENAI_DEFAULT).map(|p| p.input), Some(1.0));
        assert_eq!(price(&file, OPUS).map(|p| p.output), Some(75.0));
        assert_eq!(price(&file, "llama3.1"), None);
        let p = price(&file, SONNET).expect("built in");
        assert!((p.cost(2_000_000, 1_000_000) - 21.0).abs() < 1e-9);
    }

    #[test]
    fn every_model_in_the_table_has_cache_prices() {
        for (model, p) in BUILT_IN {
            let (read, write) = (p.cache_read.expect(model), p.cache_write.expect(model));
            assert!(
                read < p.input,
                "{model}: a cache read is cheaper than input"
            );
            assert!(
                write >= p.input,
                "{model}: a cache write costs at least input"
            );
        }
    }

    #[test]
    fn cached_input_is_priced_at_its_own_rates() {
        let sonnet = price(&BTreeMap::new(), SONNET).expect("built in");
        let t = Tokens {
            input: 1_000_000,
            cache_read: 1_000_000,
            cache_write: 1_000_000,
            output: 1_000_000,
        };
        // 3 + 0.30 + 3.75 + 15, and with an hour's writes 3 + 0.30 + 6 + 15.
        assert!((sonnet.cost_of(t, PromptCache::FiveMinutes) - 22.05).abs() < 1e-9);
        assert!((sonnet.cost_of(t, PromptCache::OneHour) - 24.30).abs() < 1e-9);
        // A price without cache prices bills cached input as input.
        let local = Price::plain(1.0, 1.0);
        assert!((local.cost_of(t, PromptCache::OneHour) - 4.0).abs() < 1e-9);
        // prose.toml may set them.
        let s: Price =
            toml::from_str("input = 1.0\noutput = 2.0\ncache_read = 0.1\ncache_write = 1.5")
                .expect("parses");
        assert_eq!(
            (
                s.cache_read_price(),
                s.cache_write_price(PromptCache::OneHour)
            ),
            (0.1, 1.5)
        );
        assert!(toml::from_str::<Price>("input = 1.0\noutput = 2.0\ncached = 0.1").is_err());
    }
}
