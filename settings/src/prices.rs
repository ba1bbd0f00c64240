//! What tokens cost: a table of prices per model id (US dollars per million tokens), the
//! providers' published list prices for the models the drivers name by default, overridable
//! and extendable in `prose.toml` (`[prices."model-id"] input = ..., output = ...`). A model
//! with no price (a local one) costs nothing that can be counted.
//!
//! This is the one table both tools use: `prosevm` prices what a run spends and reserves
//! against a budget with it, and `prosec cost` prices a program's bounds before it runs.
//! The default model ids the drivers send for the spec's aliases live here too, so that
//! both agree on what `model: sonnet` costs.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A model's price in US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million tokens read.
    pub input: f64,
    /// Per million tokens written.
    pub output: f64,
}

impl Price {
    /// What `tokens_in` and `tokens_out` cost.
    pub fn cost(&self, tokens_in: u64, tokens_out: u64) -> f64 {
        (tokens_in as f64 * self.input + tokens_out as f64 * self.output) / 1_000_000.0
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

/// List prices of the models the drivers use by default.
const BUILT_IN: &[(&str, Price)] = &[
    (
        OPENAI_DEFAULT,
        Price {
            input: 0.15,
            output: 0.60,
        },
    ),
    (
        "gpt-4o",
        Price {
            input: 2.50,
            output: 10.0,
        },
    ),
    (
        HAIKU,
        Price {
            input: 1.0,
            output: 5.0,
        },
    ),
    (
        SONNET,
        Price {
            input: 3.0,
            output: 15.0,
        },
    ),
    (
        OPUS,
        Price {
            input: 15.0,
            output: 75.0,
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
        file.insert(
            OPENAI_DEFAULT.to_string(),
            Price {
                input: 1.0,
                output: 2.0,
            },
        );
        assert_eq!(price(&file, OPENAI_DEFAULT).map(|p| p.input), Some(1.0));
        assert_eq!(price(&file, OPUS).map(|p| p.output), Some(75.0));
        assert_eq!(price(&file, "llama3.1"), None);
        let p = price(&file, SONNET).expect("built in");
        assert!((p.cost(2_000_000, 1_000_000) - 21.0).abs() < 1e-9);
    }
}
