//! The one `prose.toml` schema: every key either tool reads, each defined once. Unknown
//! keys and values of the wrong type or range are an error, with their place in the file.

use crate::models::ModelAliases;
use crate::prices::Price;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The settings `prose.toml` may hold (every key optional; unknown keys are an error).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// `mock`, `command`, `stdio`, `openai` or `anthropic`.
    pub driver: Option<String>,
    /// The command line of the command driver.
    pub command: Option<String>,
    /// The directory of the `prose.toml` that named `command`: the command runs there, so a
    /// relative path in it means the same wherever the run is resumed from.
    #[serde(skip)]
    pub command_dir: Option<std::path::PathBuf>,
    /// The provider's base URL.
    pub base_url: Option<String>,
    /// The model for sessions naming none.
    pub model: Option<String>,
    /// What the aliases map to.
    #[serde(default)]
    pub models: ModelAliases,
    /// Requests in flight at once.
    pub max_concurrency: Option<usize>,
    /// Settings per provider (`[providers.openai]`, `[providers.anthropic]`).
    #[serde(default)]
    pub providers: ProvidersSettings,
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
    /// Seconds a tool call waits for a person's approval from outside before it is refused.
    pub approval_timeout: Option<f64>,
    /// Which tools sessions are offered (`[tools] default = "none"`).
    #[serde(default)]
    pub tools: ToolsSettings,
    /// MCP servers that agents may name in `skills:`.
    #[serde(default)]
    pub mcp: McpConfig,
    /// Sampling temperature for every model turn.
    pub temperature: Option<f64>,
    /// Most tokens a model reply may use.
    pub max_output_tokens: Option<u32>,
    /// Most tokens the whole run may use (a budget: the run pauses before going over).
    pub max_tokens: Option<u64>,
    /// Most the whole run may cost, in US dollars (a budget: the run pauses before going
    /// over).
    pub max_cost: Option<f64>,
    /// How long a prefix the `anthropic` driver marks for the provider's cache lives:
    /// `5m` (the default), `1h` or `off`.
    pub prompt_cache: Option<crate::cache::PromptCache>,
    /// Whether the `openai` driver asks for agent-loop turns as JSON decoded under a schema:
    /// `auto` (the default), `on` or `off`.
    pub structured_turns: Option<crate::turns::StructuredTurns>,
    /// Answer model requests asked before (the same provider, model, prompt, conversation,
    /// tools and sampling) from the memo kept beside the runs, without a call.
    pub memo: Option<bool>,
    /// Prices per model id, over the built-in table (`[prices."gpt-4o-mini"]`).
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// Sampling per model id (`[model_options."gpt-4o-mini"]`), over the top level's.
    #[serde(default)]
    pub model_options: BTreeMap<String, Sampling>,
    /// Sampling per agent (`[agents.writer]`), over the model's.
    #[serde(default)]
    pub agents: BTreeMap<String, Sampling>,
    /// Lint levels by code (`[lints]`: `W108 = "deny"`), in the order written, the user's
    /// file's before the project's (a later entry for a code wins).
    #[serde(default, deserialize_with = "lints_in_order")]
    pub lints: Vec<LintSetting>,
    /// How `prosec fmt` lays files out (`[fmt]`).
    #[serde(default)]
    pub fmt: FmtSettings,
    /// Whose signed artifacts `prosevm` runs (`[trust]`).
    #[serde(default)]
    pub trust: TrustSettings,
}

/// `[providers]`: settings for each HTTP driver's provider.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProvidersSettings {
    /// `[providers.openai]`.
    #[serde(default)]
    pub openai: ProviderSettings,
    /// `[providers.anthropic]`.
    #[serde(default)]
    pub anthropic: ProviderSettings,
}

impl ProvidersSettings {
    /// The settings of `provider`.
    pub fn of(&self, provider: crate::models::Provider) -> ProviderSettings {
        match provider {
            crate::models::Provider::OpenAi => self.openai,
            crate::models::Provider::Anthropic => self.anthropic,
        }
    }
}

/// One provider's settings.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderSettings {
    /// Requests in flight at once to each of its models, at most (a ceiling on the window
    /// that adapts to its rate limits).
    pub max_concurrency: Option<usize>,
}

impl ProviderSettings {
    fn under(self, over: ProviderSettings) -> ProviderSettings {
        ProviderSettings {
            max_concurrency: over.max_concurrency.or(self.max_concurrency),
        }
    }
}

/// `[trust]`: the public keys an artifact must be signed by before `prosevm` runs it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrustSettings {
    /// Minisign public key files (`prosec keygen`'s `NAME.pub`); a relative path is relative
    /// to the `prose.toml` that names it.
    #[serde(default)]
    pub keys: Vec<std::path::PathBuf>,
}

/// `[tools]`: which tools sessions are offered.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolsSettings {
    /// `all` or `none`: what a session whose agent's `tools:` says nothing is offered.
    #[serde(default)]
    pub default: Option<String>,
}

/// One entry of `[lints]`: a diagnostic code as written and its level. Which codes are lints
/// is the compiler's to say, so the entry keeps where its code is written, to be pointed at
/// when it names none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LintSetting {
    /// The code as written (`W108`).
    pub code: String,
    /// Its level.
    pub level: LintLevel,
    /// Where the code is written.
    pub at: Place,
}

/// How a lint is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LintLevel {
    /// Not reported.
    Allow,
    /// Reported as a warning.
    Warn,
    /// Reported as an error.
    Deny,
}

/// Where something is written in a `prose.toml`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The file (none for text parsed alone, as [`Settings::parse`] does).
    pub file: Option<PathBuf>,
    /// Its bytes in the file.
    pub span: Range<usize>,
}

/// `[lints]` as entries in the order they are written.
fn lints_in_order<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<LintSetting>, D::Error> {
    let table = BTreeMap::<toml::Spanned<String>, LintLevel>::deserialize(d)?;
    let mut lints: Vec<LintSetting> = table
        .into_iter()
        .map(|(code, level)| LintSetting {
            at: Place {
                file: None,
                span: code.span(),
            },
            code: code.into_inner(),
            level,
        })
        .collect();
    lints.sort_by_key(|l| l.at.span.start);
    Ok(lints)
}

/// `[fmt]`: the one layout choice users really differ on.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FmtSettings {
    /// Spaces per indentation level.
    pub indent_width: Option<IndentWidth>,
}

/// Spaces per indentation level: 1 to 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "i64")]
pub struct IndentWidth(u8);

impl IndentWidth {
    /// The number of spaces.
    pub fn get(self) -> usize {
        usize::from(self.0)
    }
}

impl TryFrom<i64> for IndentWidth {
    type Error = String;

    fn try_from(n: i64) -> Result<IndentWidth, String> {
        match u8::try_from(n) {
            Ok(w @ 1..=8) => Ok(IndentWidth(w)),
            _ => Err(format!("indent-width must be between 1 and 8, not {n}")),
        }
    }
}

/// Why a `prose.toml` cannot be used: the file, where in it, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingsError {
    /// The file (none for text parsed alone).
    pub file: Option<PathBuf>,
    /// The bytes at fault, when the file could be read.
    pub span: Option<Range<usize>>,
    /// What is wrong, without where.
    pub message: String,
    /// What is wrong and where: the line and column, and the line itself.
    report: String,
}

impl SettingsError {
    fn in_file(mut self, path: &Path) -> SettingsError {
        self.file = Some(path.to_path_buf());
        self
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}: {}", file.display(), self.report),
            None => f.write_str(&self.report),
        }
    }
}

impl std::error::Error for SettingsError {}

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

impl Settings {
    /// Reads `path` if given (it must exist); else the project's `prose.toml`, found upward
    /// from `start` (the program's directory), over the user's; else nothing.
    pub fn load(path: Option<&Path>, start: &Path) -> Result<Settings, SettingsError> {
        crate::files::layered(path, start, Settings::read, Settings::under)
    }

    /// The settings of a project whose `prose.toml` is `project` (none: it has none): that
    /// file over the user's, as [`Settings::load`] layers them once it has found the file.
    pub fn of_project(project: Option<&Path>) -> Result<Settings, SettingsError> {
        crate::files::over_users(project, Settings::read, Settings::under)
    }

    /// The top level's sampling settings.
    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature,
            max_output_tokens: self.max_output_tokens,
        }
    }

    /// Reads one `prose.toml`.
    pub fn read(path: &Path) -> Result<Settings, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            SettingsError {
                file: None,
                span: None,
                message: e.to_string(),
                report: e.to_string(),
            }
            .in_file(path)
        })?;
        let mut settings = Settings::parse(&text).map_err(|e| e.in_file(path))?;
        for lint in &mut settings.lints {
            lint.at.file = Some(path.to_path_buf());
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        if settings.command.is_some() {
            settings.command_dir = Some(std::path::absolute(dir).unwrap_or(dir.to_path_buf()));
        }
        for key in &mut settings.trust.keys {
            if key.is_relative() {
                *key = dir.join(&*key);
            }
        }
        Ok(settings)
    }

    /// These settings with `over`'s where it has them (tables merged key by key).
    pub fn under(self, over: Settings) -> Settings {
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
        let mut trust = self.trust;
        trust.keys.extend(over.trust.keys);
        let (command, command_dir) = match over.command {
            Some(c) => (Some(c), over.command_dir),
            None => (self.command, self.command_dir),
        };
        Settings {
            driver: over.driver.or(self.driver),
            command,
            command_dir,
            base_url: over.base_url.or(self.base_url),
            model: over.model.or(self.model),
            models: self.models.under(over.models),
            max_concurrency: over.max_concurrency.or(self.max_concurrency),
            providers: ProvidersSettings {
                openai: self.providers.openai.under(over.providers.openai),
                anthropic: self.providers.anthropic.under(over.providers.anthropic),
            },
            request_timeout: over.request_timeout.or(self.request_timeout),
            idle_timeout: over.idle_timeout.or(self.idle_timeout),
            http_retries: over.http_retries.or(self.http_retries),
            allow,
            max_turns: over.max_turns.or(self.max_turns),
            session_timeout: over.session_timeout.or(self.session_timeout),
            approval_timeout: over.approval_timeout.or(self.approval_timeout),
            tools: ToolsSettings {
                default: over.tools.default.or(self.tools.default),
            },
            mcp,
            temperature: over.temperature.or(self.temperature),
            max_output_tokens: over.max_output_tokens.or(self.max_output_tokens),
            max_tokens: over.max_tokens.or(self.max_tokens),
            max_cost: over.max_cost.or(self.max_cost),
            prompt_cache: over.prompt_cache.or(self.prompt_cache),
            structured_turns: over.structured_turns.or(self.structured_turns),
            memo: over.memo.or(self.memo),
            prices: {
                let mut p = self.prices;
                p.extend(over.prices);
                p
            },
            model_options,
            agents,
            lints,
            fmt: FmtSettings {
                indent_width: over.fmt.indent_width.or(self.fmt.indent_width),
            },
            trust,
        }
    }

    /// Parses the text of a `prose.toml`.
    pub fn parse(text: &str) -> Result<Settings, SettingsError> {
        toml::from_str(text).map_err(|e: toml::de::Error| SettingsError {
            file: None,
            span: e.span(),
            message: e.message().to_string(),
            report: e.to_string(),
        })
    }
}

/// The `[mcp]` table of `prose.toml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// The servers, by name (`[mcp.servers.NAME]`).
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// One `[mcp.servers.NAME]` table: `command` (with `args`, `env`) or `url`, and `network`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program to run (found on `PATH` unless it is a path).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A streamable-HTTP endpoint instead of a program.
    pub url: Option<String>,
    /// Whether the server reaches out to the network (default: true for `url`, false for
    /// `command`).
    pub network: Option<bool>,
}

impl McpServerConfig {
    /// Whether calling this server's tools needs the `network` permission.
    pub fn reaches_network(&self) -> bool {
        self.network.unwrap_or(self.url.is_some())
    }
}

/// Sampling settings from `prose.toml`: the defaults, then per model id, then per agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingTable {
    /// For every turn.
    #[serde(default)]
    pub default: Sampling,
    /// Per model id, over the defaults.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, Sampling>,
    /// Per agent, over the model's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, Sampling>,
}

impl SamplingTable {
    /// The settings for a turn of `agent` on model `model` (a provider id).
    pub fn for_turn(&self, model: &str, agent: Option<&str>) -> Sampling {
        let mut s = self.default;
        if let Some(m) = self.models.get(model) {
            s = s.and(*m);
        }
        if let Some(a) = agent.and_then(|a| self.agents.get(a)) {
            s = s.and(*a);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_read() {
        let c = Settings::parse(
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
        let c = Settings::parse("prompt_cache = \"1h\"\nmemo = true\n").expect("valid");
        assert_eq!(c.prompt_cache, Some(crate::cache::PromptCache::OneHour));
        assert_eq!(c.memo, Some(true));
        let over = Settings::parse("prompt_cache = \"off\"\n").expect("valid");
        let both = c.under(over);
        assert_eq!(both.prompt_cache, Some(crate::cache::PromptCache::Off));
        assert_eq!(both.memo, Some(true));
        let e = Settings::parse("prompt_cache = \"10m\"\n").expect_err("bad value");
        assert!(e.to_string().contains("line 1"), "{e}");
    }

    #[test]
    fn a_provider_may_have_its_own_ceiling_and_nothing_unknown() {
        let user = Settings::parse("[providers.openai]\nmax_concurrency = 16\n").expect("valid");
        let project =
            Settings::parse("[providers.anthropic]\nmax_concurrency = 4\n").expect("valid");
        let both = user.under(project);
        assert_eq!(both.providers.openai.max_concurrency, Some(16));
        assert_eq!(both.providers.anthropic.max_concurrency, Some(4));
        for bad in [
            "[providers.openai]\nmax_concurency = 16\n",
            "[providers.mistral]\nmax_concurrency = 16\n",
            "[providers.openai]\nmax_concurrency = -1\n",
        ] {
            let e = Settings::parse(bad).expect_err(bad);
            assert!(e.to_string().contains("line "), "{e}");
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_with_a_position() {
        let e = Settings::parse("drivr = \"mock\"\n").expect_err("unknown key");
        assert!(e.to_string().contains("drivr"), "{e}");
        let e = Settings::parse("max_concurrency = \"many\"\n").expect_err("bad value");
        assert!(e.to_string().contains("line 1"), "{e}");
    }

    #[test]
    fn trust_keys_are_relative_to_the_file_naming_them_and_add_up() {
        let dir = std::env::temp_dir().join(format!("prose-trust-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("dirs");
        let file = dir.join("sub").join("prose.toml");
        std::fs::write(
            &file,
            "[trust]\nkeys = [\"team.pub\", \"/etc/prose/ci.pub\"]\n",
        )
        .expect("write");
        let read = Settings::read(&file).expect("valid");
        assert_eq!(
            read.trust.keys,
            vec![dir.join("sub").join("team.pub"), "/etc/prose/ci.pub".into()]
        );
        let user = Settings::parse("[trust]\nkeys = [\"/home/me/mine.pub\"]\n").expect("valid");
        assert_eq!(user.under(read).trust.keys.len(), 3);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn lints_are_typed_kept_in_order_and_the_projects_come_last() {
        let text = "[lints]\nW108 = \"deny\"\nE140 = \"allow\"\nE999 = \"warn\"\n";
        let user = Settings::parse(text).expect("valid");
        let read: Vec<(&str, LintLevel, &str)> = user
            .lints
            .iter()
            .map(|l| (l.code.as_str(), l.level, &text[l.at.span.clone()]))
            .collect();
        assert_eq!(
            read,
            [
                ("W108", LintLevel::Deny, "W108"),
                ("E140", LintLevel::Allow, "E140"),
                ("E999", LintLevel::Warn, "E999"),
            ]
        );
        let project = Settings::parse("[lints]\nw108 = \"allow\"\n").expect("valid");
        let both = user.under(project);
        let codes: Vec<&str> = both.lints.iter().map(|l| l.code.as_str()).collect();
        assert_eq!(codes, ["W108", "E140", "E999", "w108"]);
        let e = Settings::parse("[lints]\nW108 = \"off\"\n").expect_err("bad level");
        assert_eq!(e.span, Some(15..20), "{e}");
        assert!(e.message.contains("allow"), "{e}");
    }

    #[test]
    fn the_indent_width_is_one_to_eight() {
        let s = Settings::parse("[fmt]\nindent-width = 4\n").expect("valid");
        assert_eq!(s.fmt.indent_width.map(IndentWidth::get), Some(4));
        for bad in ["0", "9", "-1", "\"4\""] {
            let text = format!("[fmt]\nindent-width = {bad}\n");
            let e = Settings::parse(&text).expect_err(bad);
            assert_eq!(e.span, Some(21..21 + bad.len()), "{e}");
        }
        let e = Settings::parse("[fmt]\nindent-width = 0\n").expect_err("0");
        assert!(e.message.contains("between 1 and 8, not 0"), "{e}");
    }

    #[test]
    fn a_files_errors_name_it() {
        let dir = std::env::temp_dir().join(format!("prose-errors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("prose.toml");
        std::fs::write(&file, "[lints]\nW108 = \"deny\"\n[fmt]\nindent-width = 0\n")
            .expect("write");
        let e = Settings::read(&file).expect_err("bad width");
        assert_eq!(e.file.as_deref(), Some(file.as_path()));
        assert!(
            e.to_string().starts_with(&file.display().to_string()),
            "{e}"
        );
        std::fs::write(&file, "[lints]\nW108 = \"deny\"\n").expect("write");
        let read = Settings::read(&file).expect("valid");
        assert_eq!(read.lints[0].at.file.as_deref(), Some(file.as_path()));
        std::fs::remove_dir_all(&dir).expect("clean up");
        assert!(Settings::read(&file).expect_err("gone").span.is_none());
    }
}
