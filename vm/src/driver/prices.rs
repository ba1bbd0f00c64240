//! What tokens cost: a table of prices per model id (US dollars per million tokens), the
//! providers' published list prices for the models the drivers name by default, overridable
//! and extendable in `prose.toml` (`[prices."model-id"] input = ..., output = ...`). A model
//! with no price (a local one) costs nothing that can be counted.

use crate::protocol::Usage;
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

/// List prices of the models the drivers use by default.
const BUILT_IN: &[(&str, Price)] = &[
    (
        "gpt-4o-mini",
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
        "claude-haiku-4-5",
        Price {
            input: 1.0,
            output: 5.0,
        },
    ),
    (
        "claude-sonnet-4-5",
        Price {
            input: 3.0,
            output: 15.0,
        },
    ),
    (
        "claude-opus-4-1",
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

/// `usage` with its cost under `price`, when there is one.
pub fn priced(usage: Usage, price: Option<Price>) -> Usage {
    Usage {
        cost: price.map(|p| p.cost(usage.input_tokens, usage.output_tokens)),
        ..usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_come_from_the_file_over_the_table() {
        let mut file = BTreeMap::new();
        file.insert(
            "gpt-4o-mini".to_string(),
            Price {
                input: 1.0,
                output: 2.0,
            },
        );
        assert_eq!(price(&file, "gpt-4o-mini").map(|p| p.input), Some(1.0));
        assert_eq!(
            price(&file, "claude-opus-4-1").map(|p| p.output),
            Some(75.0)
        );
        assert_eq!(price(&file, "llama3.1"), None);
        let u = Usage {
            input_tokens: 2_000_000,
            output_tokens: 500_000,
            cost: None,
        };
        let cost = priced(u, price(&file, "gpt-4o-mini")).cost;
        assert!((cost.expect("priced") - 3.0).abs() < 1e-9);
    }
}
