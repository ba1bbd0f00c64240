//! Provider prompt caching, as `prose.toml` chooses it (`prompt_cache = "5m"`, `"1h"` or
//! `"off"`): how long a prefix the `anthropic` driver marks for caching lives, and so which
//! price its writes pay. OpenAI-compatible servers cache prefixes by themselves; the
//! setting does not change what the `openai` driver sends.

use serde::{Deserialize, Serialize};

/// How long a cached prompt prefix lives, or no caching asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PromptCache {
    /// Five minutes, renewed by every read (the default).
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    /// One hour: for runs whose sessions are further apart than five minutes; writes cost
    /// more.
    #[serde(rename = "1h")]
    OneHour,
    /// No breakpoints are sent.
    #[serde(rename = "off")]
    Off,
}

impl PromptCache {
    /// Whether this is the default, five minutes.
    pub fn is_default(&self) -> bool {
        *self == PromptCache::FiveMinutes
    }

    /// The setting's value as `prose.toml` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            PromptCache::FiveMinutes => "5m",
            PromptCache::OneHour => "1h",
            PromptCache::Off => "off",
        }
    }
}

impl std::str::FromStr for PromptCache {
    type Err = String;

    fn from_str(s: &str) -> Result<PromptCache, String> {
        [
            PromptCache::FiveMinutes,
            PromptCache::OneHour,
            PromptCache::Off,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
        .ok_or_else(|| format!("prompt cache {s:?}: want `5m`, `1h` or `off`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_reads_as_written_and_refuses_the_rest() {
        for c in [
            PromptCache::FiveMinutes,
            PromptCache::OneHour,
            PromptCache::Off,
        ] {
            assert_eq!(c.as_str().parse(), Ok(c));
        }
        assert!("10m".parse::<PromptCache>().is_err());
        assert_eq!(PromptCache::default(), PromptCache::FiveMinutes);
    }
}
