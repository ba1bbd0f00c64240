//! The flags of the commands that run programs (`exec`, `run`, `resume`, `submit`), and
//! what they mean: the driver, the run's options and where it is served, each completed with
//! `prose.toml`.

use clap::{Args, ValueEnum};
use prose_agent::people::People;
use prose_agent::workshop::ToolDefault;
use prose_machine::value::Value;
use prose_runtime::config;
use prose_runtime::driver::mock::{Conditions, MockOptions, Rule};
use prose_runtime::driver::settings::{DriverChoice, DriverKind, DriverSettings};
use prose_runtime::record::{ExecOptions, RunStatus};
use prose_runtime::runner::RunConfig;
use prose_settings::turns::StructuredTurns;
use prose_settings::Settings;
use prosevm::run::Place;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Trace {
    /// The narration protocol, for people.
    Narrate,
    /// One JSON event per line, for tools.
    Json,
    /// No trace.
    Quiet,
}

/// `--store` (or `PROSE_STORE`): the store a command keeps or reads runs in.
#[derive(Args, Clone, Debug, Default)]
pub struct StoreArg {
    /// The store keeping the runs: a directory (or file:DIR), sqlite:PATH, or a postgres://
    /// URL (default: the file store under --state-dir).
    #[arg(
        long = "store",
        env = "PROSE_STORE",
        hide_env_values = true,
        value_name = "STORE"
    )]
    pub url: Option<String>,
}

#[derive(Args, Clone)]
pub struct RunArgs {
    /// A top-level input, NAME=VALUE (repeatable).
    #[arg(long = "input", value_name = "NAME=VALUE")]
    pub inputs: Vec<String>,
    /// Top-level inputs from a JSON object.
    #[arg(long = "input-file", value_name = "FILE")]
    pub input_file: Option<PathBuf>,
    /// Which driver answers requests: mock, command, stdio, openai or anthropic (default:
    /// `prose.toml`'s, else the mock; a resumed run keeps the driver it started with).
    #[arg(long, value_parser = parse_driver)]
    pub driver: Option<DriverKind>,
    /// Settings file, used alone (default: the nearest `prose.toml` in the program's
    /// directory or above it, layered over the user's).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The command line of `--driver command` (run with `sh -c`, once per request).
    #[arg(long, value_name = "COMMAND LINE")]
    pub command: Option<String>,
    /// Seconds a request may take before it fails (a failure the session's retry applies
    /// to; default 600).
    #[arg(long, value_name = "SECONDS")]
    pub request_timeout: Option<f64>,
    /// The provider's base URL (default: `OPENAI_BASE_URL` or `ANTHROPIC_BASE_URL`, else the
    /// provider's public API).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Model for sessions naming none (default: `OPENAI_MODEL` or `ANTHROPIC_MODEL`, else
    /// gpt-4o-mini or claude-sonnet-4-5); for `openai` also what the aliases map to.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// What a model alias maps to, ALIAS=ID with ALIAS one of sonnet, opus, haiku
    /// (repeatable).
    #[arg(long = "model-map", value_name = "ALIAS=ID")]
    pub model_map: Vec<String>,
    /// Attempts after the first when an HTTP provider is rate limiting or failing
    /// (default 3).
    #[arg(long)]
    pub http_retries: Option<u32>,
    /// Trace format (on stderr).
    #[arg(long, value_enum, default_value = "narrate")]
    pub trace: Trace,
    /// Requests in flight at once (default 8; for the openai and anthropic drivers 256, a
    /// ceiling under which each model's window adapts to the provider's rate limits).
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// Unit of retry backoff delays, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub backoff_unit_ms: u64,
    /// Loop iterations allowed in the whole run.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_iterations: u64,
    /// Bytes a value (a text, list or record) may take: a number with an optional K, M or G
    /// (default 256M). On `resume`, replaces the recorded limit.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_value_size: Option<u64>,
    /// Bytes the registers of all frames alive at once may take (default 512M). On
    /// `resume`, replaces the recorded limit.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_frame_memory: Option<u64>,
    /// Parallel branches alive at once (default 100,000): a fork that would go past it fails
    /// with E209, the guard against runaway recursion; raise it for a larger fan-out. On
    /// `resume`, replaces the recorded limit.
    #[arg(long, value_name = "N")]
    pub max_branches: Option<u64>,
    /// Relaxed runtime rules are errors (a persistent agent's first `resume:`, E018).
    #[arg(long)]
    pub strict: bool,
    /// Allow every agent a capability its permissions leave unset or `prompt`: `bash` or
    /// `network` (repeatable; an explicit `deny` in the program still wins). Also
    /// `unsandboxed-bash`: where no OS sandbox can be set up, commands run without one
    /// instead of being refused.
    #[arg(long = "allow", value_name = "CAPABILITY")]
    pub allow: Vec<String>,
    /// Model turns a session may take before it fails (default 40, or `max_turns` in
    /// prose.toml).
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// Seconds a session run as an agent loop may take, over all its turns and retries,
    /// before it fails (default: no limit, or `session_timeout` in prose.toml).
    #[arg(long, value_name = "SECONDS")]
    pub session_timeout: Option<f64>,
    /// Seconds a tool call its agent's permissions say `prompt` for waits for a person's
    /// approval, when no one is at hand to ask, before it is refused and the run goes on
    /// (default: as long as it takes, or `approval_timeout` in prose.toml).
    #[arg(long, value_name = "SECONDS")]
    pub approval_timeout: Option<f64>,
    /// Seconds a streamed answer may go without a new piece before the request fails and is
    /// tried again (default 120, or `idle_timeout` in prose.toml).
    #[arg(long, value_name = "SECONDS")]
    pub idle_timeout: Option<f64>,
    /// The tools a session is offered when its agent's `tools:` says nothing: `all` (those
    /// its permissions allow; the default) or `none` (plain completions); also `[tools]
    /// default` in prose.toml.
    #[arg(long, value_name = "all|none", value_parser = parse_tools)]
    pub tools: Option<ToolDefault>,
    /// Ask agent-loop turns as one JSON step under a schema (a call of one tool, or the
    /// answer) rather than offering the tools natively: `auto` (where the server is known
    /// to decode under a schema, llama.cpp's), `on` or `off` (the default); also
    /// `structured_turns` in prose.toml (openai driver).
    #[arg(long, value_name = "auto|on|off", value_parser = parse_structured)]
    pub structured_turns: Option<StructuredTurns>,
    /// Keep every model exchange (each request's body and the provider's reply, never a
    /// header or key) on this tape, a JSON-lines file (openai and anthropic drivers).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Answer every model request from this tape, recorded with --record, without a
    /// provider; a request the tape does not hold fails. The driver is the tape's API.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Most tokens the whole run may use: a request whose worst case might not fit is not
    /// sent, and the run pauses (resume it with a larger budget).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Most the whole run may cost, in US dollars (prices per model from the built-in table
    /// or `[prices]` in prose.toml): the run pauses before a request that might go over.
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<f64>,
    /// Answer model requests asked before (the same provider, model, prompt, conversation,
    /// tools and sampling) from the memo kept beside the runs, without a call, and keep new
    /// answers there (openai and anthropic drivers; also `memo = true` in prose.toml).
    /// `prosevm memo` shows and clears it.
    #[arg(long)]
    pub memo: bool,
    /// Under `--driver stdio`: the host answers model turns and the VM runs each session's
    /// agent loop, with the tools and permissions it enforces (permission prompts go to the
    /// host); without it the host runs whole sessions.
    #[arg(long)]
    pub host_turns: bool,
    /// Never ask a person anything: permission prompts are refused (unless `--allow` allows
    /// the capability). Without it, prompts go to the terminal when stdin and stderr are one.
    #[arg(long)]
    pub no_input: bool,
    /// Narrate line by line even when stderr is a terminal (where `--trace narrate` otherwise
    /// shows live progress).
    #[arg(long)]
    pub no_progress: bool,
    /// Mock: how discretion conditions are answered (true, false, after:N). The default,
    /// after:1, answers each condition site false once and then true, so every loop ends.
    #[arg(long, default_value = "after:1")]
    pub mock_conditions: Conditions,
    /// Mock: answer every missing input with a placeholder.
    #[arg(long)]
    pub mock_inputs: bool,
    /// Mock: delay every answer by this many milliseconds.
    #[arg(long, default_value_t = 0)]
    pub mock_latency: u64,
    /// Mock: scripted answers, failures and delays (a JSON list of rules).
    #[arg(long, value_name = "FILE")]
    pub mock_script: Option<PathBuf>,
    /// Mock: append the id of every request it serves to FILE.
    #[arg(long, value_name = "FILE")]
    pub mock_log: Option<PathBuf>,
    /// Where runs live (default: `.prose` in the working directory).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Run only artifacts signed by this public key (`prosec keygen`'s NAME.pub;
    /// repeatable; also `PROSE_TRUST` and `[trust] keys` in prose.toml): an unsigned,
    /// foreign-signed or altered artifact is refused before anything runs.
    #[arg(long, value_name = "KEY.pub")]
    pub trust: Vec<PathBuf>,
    /// The program's directory, where the search for `prose.toml` starts (set by the
    /// command, not a flag).
    #[arg(skip)]
    pub program_dir: PathBuf,
    /// The store keeping the run (`--store` of the command, not of these flags).
    #[arg(skip)]
    pub store: Option<String>,
    /// The ids of the flags given on the command line (set by the command, from clap's
    /// matches): a resumed or forked run's driver changes only where a flag says so.
    #[arg(skip)]
    pub given: std::collections::BTreeSet<String>,
}

/// A status `runs --status` may name: a run's, or `queued` (a run of the Postgres store no
/// worker has claimed yet).
pub fn parse_listed_status(s: &str) -> Result<String, String> {
    if s == "queued" {
        return Ok(s.to_string());
    }
    parse_status(s).map(|st| st.as_str().to_string())
}

fn parse_tools(s: &str) -> Result<ToolDefault, String> {
    s.parse()
}

/// Whether turns are structured, as named on the command line.
pub fn parse_structured(s: &str) -> Result<StructuredTurns, String> {
    s.parse()
}

/// A driver named on the command line.
pub fn parse_driver(s: &str) -> Result<DriverKind, String> {
    s.parse()
}

/// A size in bytes: digits, then optionally K, M or G (powers of 1,024), with an optional
/// `iB` or `B` after.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{s:?} is not a size (e.g. 4096, 64K, 256M, 1G)"))
}

pub fn parse_inputs(args: &RunArgs) -> Result<BTreeMap<String, Value>, String> {
    let mut inputs = BTreeMap::new();
    if let Some(f) = &args.input_file {
        let text =
            std::fs::read_to_string(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", f.display()))?;
        let serde_json::Value::Object(map) = json else {
            return Err(format!("{}: inputs must be a JSON object", f.display()));
        };
        for (k, v) in map {
            inputs.insert(k, Value::from_json(&v));
        }
    }
    for kv in &args.inputs {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--input {kv:?}: expected NAME=VALUE"))?;
        inputs.insert(k.to_string(), Value::text(v));
    }
    Ok(inputs)
}

/// The ids of the flags that shape a driver (beside `--driver` itself): given to `resume` or
/// `fork`, they change the driver the run goes on with.
pub const DRIVER_FLAGS: [&str; 16] = [
    "command",
    "base_url",
    "model",
    "model_map",
    "request_timeout",
    "http_retries",
    "host_turns",
    "idle_timeout",
    "structured_turns",
    "record",
    "replay",
    "mock_conditions",
    "mock_inputs",
    "mock_latency",
    "mock_script",
    "mock_log",
];

impl RunArgs {
    /// The top-level inputs these flags give for `program`: `--input-file`, then `--input`;
    /// with `--mock-inputs`, a placeholder for every parameter still missing.
    pub fn inputs_for(
        &self,
        program: &prose_runtime::program::Program,
    ) -> Result<BTreeMap<String, Value>, String> {
        let mut inputs = parse_inputs(self)?;
        if self.mock_inputs {
            let m = &program.artifact.modules[0];
            for inp in m.inputs.values().filter(|i| i.parameter) {
                let name = m.strings[inp.name].clone();
                inputs
                    .entry(name.clone())
                    .or_insert_with(|| Value::text(format!("<{name}>")));
            }
        }
        Ok(inputs)
    }

    /// The driver these flags choose, completed with `prose.toml`.
    pub fn driver(&self) -> Result<DriverSettings, String> {
        let choice = DriverChoice {
            driver: self.driver,
            command: self.command.clone(),
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            model_map: self.model_map.clone(),
            request_timeout: self.request_timeout,
            http_retries: self.http_retries,
            max_concurrency: self.max_concurrency,
            backoff_ms: Some(self.backoff_unit_ms),
            host_turns: self.host_turns,
            idle_timeout: self.idle_timeout,
            structured_turns: self.structured_turns,
            record: self.record.clone(),
            replay: self.replay.clone(),
            mock: self.mock_over(MockOptions::default(), true)?,
        };
        choice.settings(&self.config()?)
    }

    /// The mock's options these flags give over `base`: each mock flag replaces what `base`
    /// says where it was given on the command line, or everywhere when `all`.
    fn mock_over(&self, base: MockOptions, all: bool) -> Result<MockOptions, String> {
        let given = |id: &str| all || self.given.contains(id);
        let mut mock = base;
        if given("mock_conditions") {
            mock.conditions = Some(self.mock_conditions);
        }
        if given("mock_inputs") {
            mock.inputs = self.mock_inputs;
        }
        if given("mock_latency") {
            mock.latency = Duration::from_millis(self.mock_latency);
        }
        if given("mock_script") {
            mock.script = match &self.mock_script {
                None => Vec::new(),
                Some(f) => std::fs::read_to_string(f)
                    .map_err(|e| e.to_string())
                    .and_then(|t| serde_json::from_str::<Vec<Rule>>(&t).map_err(|e| e.to_string()))
                    .map_err(|e| format!("--mock-script {}: {e}", f.display()))?,
            };
        }
        if given("mock_log") {
            mock.log = self.mock_log.clone();
        }
        Ok(mock)
    }

    /// The driver a resumed or forked run goes on with, the one it `recorded` as changed by
    /// these flags: `None` when no flag changes it. `--driver` starts afresh (the driver
    /// built from the flags and `prose.toml`, as for a new run; the caller says what changed
    /// from the recorded one); without it, the flags that shape a driver shape the run's own,
    /// and the mock keeps every option the run recorded but those given again
    /// (`--mock-latency 0` changes only the latency). A mock flag for a run another driver
    /// answers is refused, naming that driver.
    pub fn driver_over(&self, recorded: &DriverSettings) -> Result<Option<DriverSettings>, String> {
        let shaping: Vec<&str> = DRIVER_FLAGS
            .iter()
            .copied()
            .filter(|f| self.given.contains(*f))
            .collect();
        let mock_flags: Vec<&str> = shaping
            .iter()
            .copied()
            .filter(|f| f.starts_with("mock_"))
            .collect();
        let flags = |ids: &[&str]| {
            ids.iter()
                .map(|id| format!("--{}", id.replace('_', "-")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let kind = match self.driver {
            Some(kind) => kind,
            None if shaping.is_empty() => return Ok(None),
            None => recorded
                .name()
                .parse()
                .map_err(|_| format!("the run's driver `{}` is unknown here", recorded.name()))?,
        };
        let recorded_mock = match recorded {
            DriverSettings::Mock(m) => Some(m.clone()),
            _ => None,
        };
        if kind == DriverKind::Mock {
            return Ok(Some(DriverSettings::Mock(match recorded_mock {
                Some(base) if self.driver.is_none() => self.mock_over(base, false)?,
                _ => self.mock_over(MockOptions::default(), true)?,
            })));
        }
        if !mock_flags.is_empty() {
            let name = kind.name();
            let whose = if self.driver.is_some() {
                "named by --driver"
            } else {
                "kept from the run"
            };
            return Err(format!(
                "{} set the mock driver's answers, and this run goes on with the {name} \
                 driver ({whose}); pass --driver mock to answer it with the mock",
                flags(&mock_flags),
            ));
        }
        let mut with = self.clone();
        with.driver = Some(kind);
        with.driver().map(Some)
    }

    /// The project's settings file.
    pub fn config(&self) -> Result<Settings, String> {
        Settings::load(self.config.as_deref(), &self.program_dir).map_err(|e| e.to_string())
    }

    /// The keys an artifact must be signed by: `--trust`, `PROSE_TRUST`, `[trust] keys`.
    pub fn trusted_keys(&self) -> Result<Vec<bytecode_spec::signature::TrustKey>, String> {
        prosec::ship::keys::trusted(&self.trust, &self.config()?)
    }

    /// Where runs live and how requests are served.
    pub fn place(&self) -> Result<Place, String> {
        let file = self.config()?;
        Ok(Place {
            state_dir: self.state_dir.clone(),
            config: RunConfig {
                max_concurrency: match self.max_concurrency.or(file.max_concurrency) {
                    Some(n) => n,
                    // The HTTP drivers' windows adapt under a ceiling of their own.
                    None => self
                        .driver()
                        .ok()
                        .and_then(|d| d.max_concurrency())
                        .unwrap_or(RunConfig::default().max_concurrency),
                },
                backoff_unit: Duration::from_millis(self.backoff_unit_ms),
                stop: Default::default(),
                budget: Default::default(),
                shared: None,
            },
            people: People::detect(self.no_input),
            trust: prosec::ship::keys::trusted(&self.trust, &file)?,
            mcp: file.mcp,
            budget: (self.max_tokens, self.max_cost),
            workdir: None,
        })
    }

    /// How the run executes: these flags, completed with `prose.toml`.
    pub fn options(&self) -> Result<ExecOptions, String> {
        let file = self.config()?;
        let defaults = ExecOptions::default();
        Ok(ExecOptions {
            max_iterations: self.max_iterations,
            strict: self.strict,
            allow: config::allowances(
                file.allow.iter().map(String::as_str),
                self.allow.iter().map(String::as_str),
            )?,
            max_turns: self
                .max_turns
                .or(file.max_turns)
                .unwrap_or(defaults.max_turns),
            session_timeout_s: self.session_timeout.or(file.session_timeout),
            approval_timeout_s: match self.approval_timeout.or(file.approval_timeout) {
                Some(s) if !(s.is_finite() && s > 0.0 && s <= MAX_APPROVAL_TIMEOUT) => {
                    return Err(format!(
                        "approval timeout {s}: not a number of seconds above 0 (and at most {MAX_APPROVAL_TIMEOUT}, ten years)"
                    ))
                }
                t => t,
            },
            tools: match self.tools {
                Some(t) => t,
                None => config::tools_choice(&file.tools)?,
            },
            max_tokens: self.max_tokens.or(file.max_tokens),
            max_cost: self.max_cost.or(file.max_cost),
            max_value_size: self.max_value_size.unwrap_or(defaults.max_value_size),
            max_frame_memory: self.max_frame_memory.unwrap_or(defaults.max_frame_memory),
            max_branches: self.max_branches.unwrap_or(defaults.max_branches),
            memo: self.memo || file.memo.unwrap_or(false),
        })
    }
}

/// The longest approval timeout taken, in seconds: ten years (a longer one is a mistake, or
/// a wait as long as it takes, which is the default).
const MAX_APPROVAL_TIMEOUT: f64 = 315_360_000.0;

/// A status by its name in `run.json` (`running`, `finished`, ...).
pub fn parse_status(s: &str) -> Result<RunStatus, String> {
    RunStatus::ALL
        .into_iter()
        .find(|status| status.as_str() == s)
        .ok_or_else(|| {
            let names: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            format!("unknown status `{s}` (want one of: {})", names.join(", "))
        })
}

/// A duration such as `7d`, `12h`, `30m`, `45s`, `2w` or `1d12h`.
pub fn parse_age(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration (for example 7d, 12h, 30m, 1d12h)");
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in s.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        digits.clear();
    }
    if !digits.is_empty() || total == 0 && s.trim().is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_reads_by_its_name_and_others_are_refused() {
        for status in RunStatus::ALL {
            assert_eq!(parse_status(status.as_str()), Ok(status));
        }
        let e = parse_status("done").expect_err("unknown");
        assert_eq!(
            e,
            "unknown status `done` (want one of: running, interrupted, paused, waiting, finished, failed)"
        );
    }

    #[test]
    fn ages_read_in_the_usual_units() {
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("1d12h"), Ok(Duration::from_secs(36 * 3600)));
        assert_eq!(parse_age("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_age("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_age("0d"), Ok(Duration::ZERO));
        for bad in ["", "7", "d", "7x", "-1d", "1.5d", "99999999999999999999w"] {
            assert!(parse_age(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn statuses_are_named_as_in_the_record() {
        assert_eq!(parse_status("failed"), Ok(RunStatus::Failed));
        assert!(parse_status("done").is_err_and(|e| e.contains("finished")));
    }
}
