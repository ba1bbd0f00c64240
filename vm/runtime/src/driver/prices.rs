//! What tokens cost. The table itself (built-in list prices, `prose.toml` overrides) is the
//! settings', [`prose_settings::prices`], so that `prosec cost` and a run price the same
//! models the same way; here a reply's usage is priced with it.

use prose_machine::protocol::Usage;
pub use prose_settings::prices::{price, Price};

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
    use std::collections::BTreeMap;

    #[test]
    fn prices_come_from_the_file_over_the_table() {
        let mut file = BTreeMap::new();
        file.insert(
            prose_settings::prices::OPENAI_DEFAULT.to_string(),
            Price {
                input: 1.0,
                output: 2.0,
            },
        );
        assert_eq!(
            price(&file, prose_settings::prices::OPENAI_DEFAULT).map(|p| p.input),
            Some(1.0)
        );
        assert_eq!(
            price(&file, prose_settings::prices::OPUS).map(|p| p.output),
            Some(75.0)
        );
        assert_eq!(price(&file, "llama3.1"), None);
        let u = Usage {
            input_tokens: 2_000_000,
            output_tokens: 500_000,
            cost: None,
        };
        let cost = priced(u, price(&file, prose_settings::prices::OPENAI_DEFAULT)).cost;
        assert!((cost.expect("priced") - 3.0).abs() < 1e-9);
    }
}
