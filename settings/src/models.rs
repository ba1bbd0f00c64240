//! Model aliases and their resolution: what `model: sonnet`, `opus` and `haiku`, and a
//! session naming no model, are sent as. The one resolution both tools use: the drivers send
//! these ids, and `prosec cost` prices them.

use crate::prices;
use serde::{Deserialize, Serialize};

/// The `[models]` table: the model id each alias is sent as, for every driver, and in
/// `[models.openai]` or `[models.anthropic]` for that driver only (over the former).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelAliases {
    /// `model: sonnet`.
    pub sonnet: Option<String>,
    /// `model: opus`.
    pub opus: Option<String>,
    /// `model: haiku`.
    pub haiku: Option<String>,
    /// For the `openai` driver.
    #[serde(default)]
    pub openai: ProviderAliases,
    /// For the `anthropic` driver.
    #[serde(default)]
    pub anthropic: ProviderAliases,
}

/// A provider's own `[models.<driver>]` table.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderAliases {
    /// `model: sonnet`.
    pub sonnet: Option<String>,
    /// `model: opus`.
    pub opus: Option<String>,
    /// `model: haiku`.
    pub haiku: Option<String>,
}

impl ProviderAliases {
    fn under(self, over: ProviderAliases) -> ProviderAliases {
        ProviderAliases {
            sonnet: over.sonnet.or(self.sonnet),
            opus: over.opus.or(self.opus),
            haiku: over.haiku.or(self.haiku),
        }
    }
}

impl ModelAliases {
    /// These aliases with `over`'s where it has them.
    pub fn under(self, over: ModelAliases) -> ModelAliases {
        ModelAliases {
            sonnet: over.sonnet.or(self.sonnet),
            opus: over.opus.or(self.opus),
            haiku: over.haiku.or(self.haiku),
            openai: self.openai.under(over.openai),
            anthropic: self.anthropic.under(over.anthropic),
        }
    }

    /// Each alias with the id it maps to for `driver`, where one is set: the driver's own
    /// table first, then the shared one.
    pub fn for_driver(&self, driver: &str) -> impl Iterator<Item = (&'static str, &str)> {
        fn pick<'a>(
            shared: &'a Option<String>,
            own: Option<&'a Option<String>>,
        ) -> Option<&'a str> {
            own.and_then(|o| o.as_deref()).or(shared.as_deref())
        }
        let own = match driver {
            "openai" => Some(&self.openai),
            "anthropic" => Some(&self.anthropic),
            _ => None,
        };
        [
            ("sonnet", pick(&self.sonnet, own.map(|o| &o.sonnet))),
            ("opus", pick(&self.opus, own.map(|o| &o.opus))),
            ("haiku", pick(&self.haiku, own.map(|o| &o.haiku))),
        ]
        .into_iter()
        .filter_map(|(alias, id)| id.map(|id| (alias, id)))
    }
}

/// The kind of API a driver speaks, as far as models go: an OpenAI-compatible server (every
/// alias one model, `gpt-4o-mini` unless told) or Anthropic's (a model per alias).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// An OpenAI-compatible server.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic's API.
    Anthropic,
}

impl Provider {
    /// Every provider.
    pub const ALL: [Provider; 2] = [Provider::OpenAi, Provider::Anthropic];

    /// The provider named `name` (`openai`, `anthropic`), if any.
    pub fn named(name: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The driver's name (`openai`, `anthropic`), as `[models.<driver>]` names it.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }
}

/// Model ids for the spec's aliases, and for sessions naming no model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The ids `provider` is sent without settings: Anthropic's model per alias, or one
    /// model for every alias on an OpenAI-compatible server.
    pub fn defaults(provider: Provider) -> Models {
        let all = |m: &str| Models {
            sonnet: m.into(),
            opus: m.into(),
            haiku: m.into(),
            default: m.into(),
        };
        match provider {
            Provider::Anthropic => Models {
                opus: prices::OPUS.into(),
                haiku: prices::HAIKU.into(),
                ..all(prices::SONNET)
            },
            Provider::OpenAi => all(prices::OPENAI_DEFAULT),
        }
    }

    /// The ids `provider` is sent: `model` for sessions naming none (on an OpenAI-compatible
    /// server, for every alias too), then `aliases` (`[models]`), then `map`'s `ALIAS=ID`
    /// entries (`--model-map`) over them.
    pub fn chosen(
        provider: Provider,
        model: Option<String>,
        aliases: &ModelAliases,
        map: &[String],
    ) -> Result<Models, String> {
        let mut models = Models::defaults(provider);
        if let Some(m) = model {
            models = match provider {
                Provider::OpenAi => Models {
                    sonnet: m.clone(),
                    opus: m.clone(),
                    haiku: m.clone(),
                    default: m,
                },
                Provider::Anthropic => Models {
                    default: m,
                    ..models
                },
            };
        }
        let from_file = aliases
            .for_driver(provider.name())
            .map(|(alias, id)| format!("{alias}={id}"));
        for entry in from_file.chain(map.iter().cloned()) {
            let (slot, id) = match entry.split_once('=') {
                Some(("sonnet", id)) => (&mut models.sonnet, id),
                Some(("opus", id)) => (&mut models.opus, id),
                Some(("haiku", id)) => (&mut models.haiku, id),
                _ => {
                    return Err(format!(
                        "--model-map {entry}: want sonnet=ID, opus=ID or haiku=ID"
                    ))
                }
            };
            *slot = id.to_string();
        }
        Ok(models)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_merge_key_by_key() {
        let user: ModelAliases =
            toml::from_str("sonnet = \"s1\"\nopus = \"o1\"\n[anthropic]\nhaiku = \"h-a\"\n")
                .expect("user");
        let project: ModelAliases =
            toml::from_str("opus = \"o2\"\n[openai]\nsonnet = \"s-o\"\n").expect("project");
        let merged = user.under(project);
        assert_eq!(
            merged.for_driver("openai").collect::<Vec<_>>(),
            [("sonnet", "s-o"), ("opus", "o2")]
        );
        assert_eq!(
            merged.for_driver("anthropic").collect::<Vec<_>>(),
            [("sonnet", "s1"), ("opus", "o2"), ("haiku", "h-a")]
        );
        assert!(toml::from_str::<ModelAliases>("[gemini]\nsonnet = \"x\"\n").is_err());
    }

    #[test]
    fn one_resolution_for_drivers_and_prices() {
        let aliases: ModelAliases =
            toml::from_str("opus = \"big\"\n[anthropic]\nhaiku = \"small\"\n").expect("aliases");
        let m = Models::chosen(Provider::Anthropic, None, &aliases, &["sonnet=mid".into()])
            .expect("models");
        assert_eq!(
            (
                m.resolve(Some("sonnet")),
                m.resolve(Some("opus")),
                m.resolve(Some("haiku"))
            ),
            ("mid", "big", "small")
        );
        assert_eq!(m.resolve(None), prices::SONNET);
        assert_eq!(m.resolve(Some("llama3")), "llama3");
        // An OpenAI-compatible server sends every alias as the one model named.
        let m = Models::chosen(
            Provider::OpenAi,
            Some("qwen".into()),
            &ModelAliases::default(),
            &[],
        )
        .expect("models");
        assert_eq!((m.resolve(Some("opus")), m.resolve(None)), ("qwen", "qwen"));
        assert!(Models::chosen(Provider::OpenAi, None, &aliases, &["gpt=x".into()]).is_err());
    }
}
