//! Structured turns, as `prose.toml` chooses them (`structured_turns = "auto"`, `"on"` or
//! `"off"`): whether the `openai` driver asks for each agent-loop turn as one JSON object
//! decoded under a schema (a call of one tool on offer, or the answer) instead of offering
//! the tools natively. Small local models rarely call tools natively; under a schema they
//! cannot write anything but one well-formed step. `auto` turns it on for servers known to
//! decode under a schema (llama.cpp's), `on` for any OpenAI-compatible server that honours
//! `response_format` with a JSON schema.

use serde::{Deserialize, Serialize};

/// Whether agent-loop turns are structured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StructuredTurns {
    /// Structured where the server is known to decode under a schema.
    Auto,
    /// Always structured.
    On,
    /// Never: tools are offered natively (the default: on the acting suite structured turns
    /// did more tool work but answered tool-less tasks worse, so they are asked for).
    #[default]
    Off,
}

impl StructuredTurns {
    /// Whether this is the default, `off`.
    pub fn is_default(&self) -> bool {
        *self == StructuredTurns::Off
    }

    /// The setting's value as `prose.toml` and the command line write it.
    pub fn as_str(self) -> &'static str {
        match self {
            StructuredTurns::Auto => "auto",
            StructuredTurns::On => "on",
            StructuredTurns::Off => "off",
        }
    }
}

impl std::str::FromStr for StructuredTurns {
    type Err = String;

    fn from_str(s: &str) -> Result<StructuredTurns, String> {
        [
            StructuredTurns::Auto,
            StructuredTurns::On,
            StructuredTurns::Off,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
        .ok_or_else(|| format!("structured turns {s:?}: want `auto`, `on` or `off`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_reads_as_written_and_refuses_the_rest() {
        for c in [
            StructuredTurns::Auto,
            StructuredTurns::On,
            StructuredTurns::Off,
        ] {
            assert_eq!(c.as_str().parse(), Ok(c));
        }
        assert!("yes".parse::<StructuredTurns>().is_err());
        assert_eq!(StructuredTurns::default(), StructuredTurns::Off);
    }
}
