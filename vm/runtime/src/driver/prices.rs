//! What tokens cost. The table itself (built-in list prices, `prose.toml` overrides) is the
//! settings', [`prose_settings::prices`], so that `prosec cost` and a run price the same
//! models the same way; here a reply's usage is priced with it.

use prose_machine::protocol::Usage;
use prose_settings::cache::PromptCache;
use prose_settings::prices::Tokens;
pub use prose_settings::prices::{price, Price};

/// `usage` with its cost under `price`, when there is one: plain input, input read from
/// and written to the provider's cache (writes made to live as `ttl` says), and output,
/// each at its own rate.
pub fn priced(usage: Usage, price: Option<Price>, ttl: PromptCache) -> Usage {
    let tokens = Tokens {
        input: usage.input_tokens,
        cache_read: usage.cache_read_tokens,
        cache_write: usage.cache_write_tokens,
        output: usage.output_tokens,
    };
    Usage {
        cost: price.map(|p| p.cost_of(tokens, ttl)),
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
            Price::plain(1.0, 2.0),
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
        let u = Usage::plain(2_000_000, 500_000);
        let cost = priced(
            u,
            price(&file, prose_settings::prices::OPENAI_DEFAULT),
            PromptCache::default(),
        )
        .cost;
        assert!((cost.expect("priced") - 3.0).abs() < 1e-9);
        // Cached input at the cache's rates: a million read from Sonnet's cache is $0.30,
        // a million written to it for an hour $6.
        let cached = Usage {
            cache_read_tokens: 1_000_000,
            cache_write_tokens: 1_000_000,
            ..Usage::default()
        };
        let sonnet = price(&file, prose_settings::prices::SONNET);
        let cost = priced(cached, sonnet, PromptCache::OneHour).cost;
        assert!((cost.expect("priced") - 6.30).abs() < 1e-9);
        // A provider that reports no cache fields is priced as before.
        assert_eq!(priced(u, None, PromptCache::Off).cost, None);
    }
}
