//! `prose.toml`: driver settings kept with a project, so they need not be repeated on every
//! command line. The project's file is found upward from the program's directory (as Cargo
//! finds `Cargo.toml`), the user's in `$XDG_CONFIG_HOME/prose/prose.toml` (else
//! `~/.config/prose/prose.toml`); the project's settings win over the user's. Flags win over
//! the environment, which wins over the files.

use crate::agent::workshop::ToolDefault;
use prosec::settings::ModelAliases;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
    pub models: ModelAliases,
    /// Requests in flight at once.
    pub max_concurrency: Option<usize>,
    /// Seconds a request may take.
    pub request_timeout: Option<f64>,
    /// Seconds a streamed answer may go without a new piece.
    pub idle_timeout: Option<f64>,
    /// Attempts after the first when an HTTP provider is busy or failing.
    pub http_retries: Option<u32>,
    /// Capabilities allowed to every agent: `bash`, `network`.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Model turns a session may take.
    pub max_turns: Option<u32>,
    /// Seconds a session run as an agent loop may take.
    pub session_timeout: Option<f64>,
    /// Which tools sessions are offered (`[tools] default = "none"`).
    #[serde(default)]
    pub tools: ToolsConfig,
    /// MCP servers that agents may name in `skills:`.
    #[serde(default)]
    pub mcp: crate::agent::mcp::McpConfig,
    /// Sampling temperature for every model turn.
    pub temperature: Option<f64>,
    /// Most tokens a model reply may use.
    pub max_output_tokens: Option<u32>,
    /// Most tokens the whole run may use (a budget: the run pauses before going over).
    pub max_tokens: Option<u64>,
    /// Most the whole run may cost, in US dollars (a budget: the run pauses before going
    /// over).
    pub max_cost: Option<f64>,
    /// Prices per model id, over the built-in table (`[prices."gpt-4o-mini"]`).
    #[serde(default)]
    pub prices: BTreeMap<String, crate::driver::prices::Price>,
    /// Sampling per model id (`[model_options."gpt-4o-mini"]`), over the top level's.
    #[serde(default)]
    pub model_options: BTreeMap<String, Sampling>,
    /// Sampling per agent (`[agents.writer]`), over the model's.
    #[serde(default)]
    pub agents: BTreeMap<String, Sampling>,
    /// `prosec`'s lint levels (`[lints]`); read by the compiler, accepted here.
    #[serde(default)]
    pub lints: BTreeMap<String, toml::Value>,
}

/// `[tools]`: which tools sessions are offered.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// `all` or `none`: what a session whose agent's `tools:` says nothing is offered.
    #[serde(default)]
    default: Option<String>,
}

impl ToolsConfig {
    /// The default these settings choose (all tools, when they say nothing).
    pub fn choice(&self) -> Result<ToolDefault, String> {
        match &self.default {
            None => Ok(ToolDefault::All),
            Some(d) => d
                .parse()
                .map_err(|e| format!("prose.toml: [tools] default: {e}")),
        }
    }
}

/// How a model samples: what a `prose.toml` may set globally, per model and per agent, and
/// what the chat drivers send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Most tokens a reply may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
}

impl Sampling {
    /// These settings with `over`'s where it has them.
    pub fn and(self, over: Sampling) -> Sampling {
        Sampling {
            temperature: over.temperature.or(self.temperature),
            max_output_tokens: over.max_output_tokens.or(self.max_output_tokens),
        }
    }
}

impl Config {
    /// Reads `path` if given (it must exist); else the project's `prose.toml`, found upward
    /// from `start` (the program's directory), over the user's; else nothing.
    pub fn load(path: Option<&Path>, start: &Path) -> Result<Config, String> {
        if let Some(p) = path {
            return Config::read(p);
        }
        let user = match prosec::settings::user_file() {
            Some(p) if p.is_file() => Config::read(&p)?,
            _ => Config::default(),
        };
        let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
        match prosec::settings::project_file(&start) {
            Some(p) => Ok(user.under(Config::read(&p)?)),
            None => Ok(user),
        }
    }

    /// The top level's sampling settings.
    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature,
            max_output_tokens: self.max_output_tokens,
        }
    }

    fn read(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// These settings with `over`'s where it has them (tables merged key by key).
    fn under(self, over: Config) -> Config {
        let mut mcp = self.mcp;
        mcp.servers.extend(over.mcp.servers);
        let mut model_options = self.model_options;
        model_options.extend(over.model_options);
        let mut agents = self.agents;
        agents.extend(over.agents);
        let mut lints = self.lints;
        lints.extend(over.lints);
        let mut allow = self.allow;
        allow.extend(over.allow);
        Config {
            driver: over.driver.or(self.driver),
            command: over.command.or(self.command),
            base_url: over.base_url.or(self.base_url),
            model: over.model.or(self.model),
            models: self.models.under(over.models),
            max_concurrency: over.max_concurrency.or(self.max_concurrency),
            request_timeout: over.request_timeout.or(self.request_timeout),
            idle_timeout: over.idle_timeout.or(self.idle_timeout),
            http_retries: over.http_retries.or(self.http_retries),
            allow,
            max_turns: over.max_turns.or(self.max_turns),
            session_timeout: over.session_timeout.or(self.session_timeout),
            tools: ToolsConfig {
                default: over.tools.default.or(self.tools.default),
            },
            mcp,
            temperature: over.temperature.or(self.temperature),
            max_output_tokens: over.max_output_tokens.or(self.max_output_tokens),
            max_tokens: over.max_tokens.or(self.max_tokens),
            max_cost: over.max_cost.or(self.max_cost),
            prices: {
                let mut p = self.prices;
                p.extend(over.prices);
                p
            },
            model_options,
            agents,
            lints,
        }
    }

    /// Parses the text of a `prose.toml`.
    pub fn parse(text: &str) -> Result<Config, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }
}

/// Capabilities a user allows every agent: those `prose.toml`'s `allow` names (`bash`,
/// `network`), then those given with `--allow` (also `unsandboxed-bash`, which only the
/// command line can allow: settings a project ships must not turn the sandbox off).
pub fn allowances<'a>(
    file: impl IntoIterator<Item = &'a str>,
    command_line: impl IntoIterator<Item = &'a str>,
) -> Result<crate::agent::permissions::UserAllow, String> {
    let mut allow = crate::agent::permissions::UserAllow::default();
    let names = file
        .into_iter()
        .map(|n| (n, false))
        .chain(command_line.into_iter().map(|n| (n, true)));
    for (name, flag) in names {
        match name {
            "bash" => allow.bash = true,
            "network" => allow.network = true,
            "unsandboxed-bash" if flag => allow.unsandboxed_bash = true,
            "unsandboxed-bash" => {
                return Err(
                    "prose.toml cannot allow \"unsandboxed-bash\": only the command line can \
                     (--allow unsandboxed-bash)"
                        .into(),
                )
            }
            other => {
                return Err(format!(
                    "cannot allow {other:?}: the capabilities a user allows are bash and \
                     network (and, on the command line, unsandboxed-bash)"
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
