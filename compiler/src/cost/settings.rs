//! What `prose.toml` ([`Settings`], the one schema both tools read) says about pricing, read
//! the way `prosevm` reads it: the driver (`openai` sends every alias as one model,
//! `gpt-4o-mini` unless `model` says otherwise; any other driver prices as `anthropic`),
//! `model` (sessions naming none), `[models]` (what `sonnet`, `opus` and `haiku` are sent
//! as, resolved as the drivers resolve them), `[prices."model-id"]`, `max_output_tokens`
//! (the most a reply may use, what a budget reserves for it) and `prompt_cache` (how long
//! the `anthropic` driver's cached prefixes live, or `off`; an OpenAI-compatible server
//! caches prefixes by itself).

use super::Pricing;
use prose_settings::cache::PromptCache;
use prose_settings::models::{Models, Provider};
use prose_settings::prices;
use prose_settings::Settings;

impl Pricing {
    /// The pricing `settings` give, with `tokens_in` and `tokens_out` per request.
    pub fn from_settings(settings: &Settings, tokens_in: u64, tokens_out: u64) -> Pricing {
        let provider = if settings.driver.as_deref() == Some("openai") {
            Provider::OpenAi
        } else {
            Provider::Anthropic
        };
        let cache = match (provider, settings.prompt_cache) {
            (Provider::OpenAi, _) => Some(PromptCache::default()),
            (Provider::Anthropic, Some(PromptCache::Off)) => None,
            (Provider::Anthropic, ttl) => Some(ttl.unwrap_or_default()),
        };
        Pricing {
            prices: settings.prices.clone(),
            // The aliases a file gives are always well formed: nothing here can fail.
            models: Models::chosen(provider, settings.model.clone(), &settings.models, &[])
                .unwrap_or_else(|_| Models::defaults(provider)),
            tokens_in,
            tokens_out,
            tokens_cached: super::DEFAULT_TOKENS_CACHED,
            cache,
            max_output_tokens: settings
                .max_output_tokens
                .unwrap_or(prices::max_output_tokens(provider.name())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_sets_models_and_prices_as_the_vm_reads_them() {
        let s = Settings::parse(
            "driver = \"openai\"\nmodel = \"gpt-4o\"\nmax_cost = 2.0\n[models]\nopus = \"o3\"\n[prices.o3]\ninput = 2.0\noutput = 8.0\n[lints]\nW108 = \"deny\"\n",
        )
        .expect("parses");
        let p = Pricing::from_settings(&s, 10, 20);
        assert_eq!(p.resolve(None), "gpt-4o");
        assert_eq!(p.resolve(Some("sonnet")), "gpt-4o");
        assert_eq!(p.resolve(Some("opus")), "o3");
        assert_eq!(p.price("o3").map(|p| p.output), Some(8.0));
        assert_eq!((p.tokens_in, p.tokens_out), (10, 20));
        assert_eq!(p.max_output_tokens, prices::MAX_OUTPUT_TOKENS_OPENAI);
        // Anthropic by default: the aliases' own models, `model` for sessions naming none.
        let s = Settings::parse("model = \"claude-haiku-4-5\"").expect("parses");
        let p = Pricing::from_settings(&s, 1, 1);
        assert_eq!(p.max_output_tokens, prices::MAX_OUTPUT_TOKENS);
        assert_eq!(p.resolve(None), prices::HAIKU);
        assert_eq!(p.resolve(Some("opus")), prices::OPUS);
        assert!(Settings::parse("[prices.x]\ninput = \"cheap\"").is_err());
        // Caching: the anthropic driver's as prose.toml says; always on OpenAI's.
        assert_eq!(p.cache, Some(PromptCache::FiveMinutes));
        let off = Settings::parse("prompt_cache = \"off\"").expect("parses");
        assert_eq!(Pricing::from_settings(&off, 1, 1).cache, None);
        let hour = Settings::parse("prompt_cache = \"1h\"").expect("parses");
        assert_eq!(
            Pricing::from_settings(&hour, 1, 1).cache,
            Some(PromptCache::OneHour)
        );
        let openai =
            Settings::parse("driver = \"openai\"\nprompt_cache = \"off\"").expect("parses");
        assert!(Pricing::from_settings(&openai, 1, 1).cache.is_some());
    }

    #[test]
    fn a_project_file_wins_over_the_users() {
        let user = Settings::parse("model = \"a\"\n[prices.a]\ninput = 1.0\noutput = 1.0")
            .expect("parses");
        let project = Settings::parse("[prices.a]\ninput = 2.0\noutput = 2.0").expect("parses");
        let s = user.under(project);
        let over = s
            .clone()
            .under(Settings::parse("max_output_tokens = 100").expect("parses"));
        assert_eq!(Pricing::from_settings(&over, 1, 1).max_output_tokens, 100);
        assert_eq!(s.model.as_deref(), Some("a"));
        assert_eq!(s.prices["a"].input, 2.0);
    }
}
