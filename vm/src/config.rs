//! `prose.toml`: driver settings kept with a project, so they need not be repeated on every
//! command line. Flags win over the environment, which wins over the file.

use serde::Deserialize;
use std::path::Path;

/// The settings `prose.toml` may hold (every key optional; unknown keys are an error).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `mock`, `command`, `stdio`, `openai` or `anthropic`.
    pub driver: Option<String>,
    /// The command line of the command driver.
    pub command: Option<String>,
    /// The provider's base URL.
    pub base_url: Option<String>,
    /// The model for sessions naming none.
    pub model: Option<String>,
    /// What the aliases map to.
    #[serde(default)]
    pub models: Models,
    /// Requests in flight at once.
    pub max_concurrency: Option<usize>,
    /// Seconds a request may take.
    pub request_timeout: Option<f64>,
    /// Attempts after the first when an HTTP provider is busy or failing.
    pub http_retries: Option<u32>,
    /// Capabilities allowed to every agent: `bash`, `network`.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Model turns a session may take.
    pub max_turns: Option<u32>,
    /// MCP servers that agents may name in `skills:`.
    #[serde(default)]
    pub mcp: crate::agent::mcp::McpConfig,
}

/// The `[models]` table.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Models {
    /// `model: sonnet`.
    pub sonnet: Option<String>,
    /// `model: opus`.
    pub opus: Option<String>,
    /// `model: haiku`.
    pub haiku: Option<String>,
}

impl Config {
    /// Reads `path` if given (it must exist), else `prose.toml` in the working directory if
    /// there is one, else nothing.
    pub fn load(path: Option<&Path>) -> Result<Config, String> {
        let default = Path::new("prose.toml");
        let path = match path {
            Some(p) => p,
            None if default.exists() => default,
            None => return Ok(Config::default()),
        };
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses the text of a `prose.toml`.
    pub fn parse(text: &str) -> Result<Config, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }
}

/// Capabilities a user allows every agent, from their names (`bash`, `network`).
pub fn allowances<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Result<crate::agent::permissions::UserAllow, String> {
    let mut allow = crate::agent::permissions::UserAllow::default();
    for name in names {
        match name {
            "bash" => allow.bash = true,
            "network" => allow.network = true,
            other => {
                return Err(format!(
                    "cannot allow {other:?}: the capabilities a user allows are bash and network"
                ))
            }
        }
    }
    Ok(allow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_read() {
        let c = Config::parse(
            "driver = \"openai\"\nbase_url = \"http://localhost:11434/v1\"\nmodel = \"llama3\"\nmax_concurrency = 2\nrequest_timeout = 30.5\nhttp_retries = 1\ncommand = \"./ask\"\n[models]\nsonnet = \"s\"\nopus = \"o\"\nhaiku = \"h\"\n",
        )
        .expect("valid");
        assert_eq!(c.driver.as_deref(), Some("openai"));
        assert_eq!(c.base_url.as_deref(), Some("http://localhost:11434/v1"));
        assert_eq!(c.model.as_deref(), Some("llama3"));
        assert_eq!(c.max_concurrency, Some(2));
        assert_eq!(c.request_timeout, Some(30.5));
        assert_eq!(c.http_retries, Some(1));
        assert_eq!(c.command.as_deref(), Some("./ask"));
        assert_eq!(c.models.opus.as_deref(), Some("o"));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_with_a_position() {
        let e = Config::parse("drivr = \"mock\"\n").expect_err("unknown key");
        assert!(e.contains("drivr"), "{e}");
        let e = Config::parse("max_concurrency = \"many\"\n").expect_err("bad value");
        assert!(e.contains("line 1"), "{e}");
    }
}
