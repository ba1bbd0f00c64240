//! What `prose.toml` says about pricing, read the way `prosevm` reads it: the driver
//! (`openai` sends every alias as one model, `gpt-4o-mini` unless `model` says otherwise;
//! any other driver prices as `anthropic`), `model` (sessions naming none), `[models]`
//! (what `sonnet`, `opus` and `haiku` are sent as), `[prices."model-id"]` and
//! `max_output_tokens` (the most a reply may use, what a budget reserves for it). Other keys
//! belong to the VM and are skipped.

use super::Pricing;
use crate::prices::{self, Price};
use crate::settings::ModelAliases;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The pricing keys of a `prose.toml`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct PriceSettings {
    /// `driver`.
    pub driver: Option<String>,
    /// `model`: the model for sessions naming none.
    pub model: Option<String>,
    /// `[models]`.
    #[serde(default)]
    pub models: ModelAliases,
    /// `[prices]`.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// `max_output_tokens`: the most a reply may use.
    pub max_output_tokens: Option<u32>,
}

impl PriceSettings {
    /// Parses the text of a `prose.toml`.
    pub fn parse(text: &str) -> Result<PriceSettings, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Reads a `prose.toml`.
    pub fn read(path: &Path) -> Result<PriceSettings, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        PriceSettings::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The settings `path` gives if given (it must exist); else the project's `prose.toml`
    /// found upward from `start` over the user's (`$XDG_CONFIG_HOME/prose/prose.toml`, else
    /// `~/.config/prose/prose.toml`), as `prosevm` finds them.
    pub fn load(path: Option<&Path>, start: &Path) -> Result<PriceSettings, String> {
        if let Some(p) = path {
            return PriceSettings::read(p);
        }
        let user = match crate::settings::user_file() {
            Some(p) if p.is_file() => PriceSettings::read(&p)?,
            _ => PriceSettings::default(),
        };
        let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
        match crate::settings::project_file(&start) {
            Some(p) => Ok(user.under(PriceSettings::read(&p)?)),
            None => Ok(user),
        }
    }

    /// These settings with `over`'s where it has them.
    pub fn under(self, over: PriceSettings) -> PriceSettings {
        let mut prices = self.prices;
        prices.extend(over.prices);
        PriceSettings {
            driver: over.driver.or(self.driver),
            model: over.model.or(self.model),
            models: self.models.under(over.models),
            prices,
            max_output_tokens: over.max_output_tokens.or(self.max_output_tokens),
        }
    }

    /// The pricing these settings give, with `tokens_in` and `tokens_out` per request.
    pub fn pricing(&self, tokens_in: u64, tokens_out: u64) -> Pricing {
        let openai = self.driver.as_deref() == Some("openai");
        let driver = if openai { "openai" } else { "anthropic" };
        let mut p = Pricing {
            prices: self.prices.clone(),
            tokens_in,
            tokens_out,
            max_output_tokens: self
                .max_output_tokens
                .unwrap_or(prices::max_output_tokens(driver)),
            ..Pricing::default()
        };
        if openai {
            let m = self.model.as_deref().unwrap_or(prices::OPENAI_DEFAULT);
            p.sonnet = m.into();
            p.opus = m.into();
            p.haiku = m.into();
            p.default = m.into();
        } else if let Some(m) = &self.model {
            p.default = m.clone();
        }
        for (alias, id) in self.models.for_driver(driver) {
            match alias {
                "sonnet" => p.sonnet = id.to_string(),
                "opus" => p.opus = id.to_string(),
                _ => p.haiku = id.to_string(),
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_sets_models_and_prices_as_the_vm_reads_them() {
        let s = PriceSettings::parse(
            "driver = \"openai\"\nmodel = \"gpt-4o\"\nmax_cost = 2.0\n[models]\nopus = \"o3\"\n[prices.o3]\ninput = 2.0\noutput = 8.0\n[lints]\nW108 = \"deny\"\n",
        )
        .expect("parses");
        let p = s.pricing(10, 20);
        assert_eq!(p.resolve(None), "gpt-4o");
        assert_eq!(p.resolve(Some("sonnet")), "gpt-4o");
        assert_eq!(p.resolve(Some("opus")), "o3");
        assert_eq!(p.price("o3").map(|p| p.output), Some(8.0));
        assert_eq!((p.tokens_in, p.tokens_out), (10, 20));
        assert_eq!(p.max_output_tokens, prices::MAX_OUTPUT_TOKENS_OPENAI);
        // Anthropic by default: the aliases' own models, `model` for sessions naming none.
        let p = PriceSettings::parse("model = \"claude-haiku-4-5\"")
            .expect("parses")
            .pricing(1, 1);
        assert_eq!(p.max_output_tokens, prices::MAX_OUTPUT_TOKENS);
        assert_eq!(p.resolve(None), prices::HAIKU);
        assert_eq!(p.resolve(Some("opus")), prices::OPUS);
        assert!(PriceSettings::parse("[prices.x]\ninput = \"cheap\"").is_err());
    }

    #[test]
    fn a_project_file_wins_over_the_users() {
        let user = PriceSettings::parse("model = \"a\"\n[prices.a]\ninput = 1.0\noutput = 1.0")
            .expect("parses");
        let project =
            PriceSettings::parse("[prices.a]\ninput = 2.0\noutput = 2.0").expect("parses");
        let s = user.under(project);
        assert_eq!(
            s.clone()
                .under(PriceSettings::parse("max_output_tokens = 100").expect("parses"))
                .pricing(1, 1)
                .max_output_tokens,
            100
        );
        assert_eq!(s.model.as_deref(), Some("a"));
        assert_eq!(s.prices["a"].input, 2.0);
    }
}
