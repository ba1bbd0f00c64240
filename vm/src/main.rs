//! `prosevm`: runs OpenProse programs.
//!
//! `prosevm exec prog.pbc` runs a compiled artifact (verified first); `prosevm run
//! prog.prose` compiles in memory and runs. The trace goes to stderr, the outputs to stdout.
//! Exit status: 0 success, 1 runtime error or invalid program, 2 usage or I/O error.

use clap::{Args, Parser, Subcommand, ValueEnum};
use prose_machine::trace::Event;
use prose_machine::value::Value;
use prose_runtime::agent::workshop::ToolDefault;
use prose_runtime::config::{self, Config};
use prose_runtime::driver::mock::{Conditions, MockOptions, Rule};
use prose_runtime::driver::settings::{DriverChoice, DriverKind, DriverSettings};
use prose_runtime::driver::stdio;
use prose_runtime::observe::envelope::Envelope;
use prose_runtime::observe::otel::{Export, Otel};
use prose_runtime::observe::progress::Progress;
use prose_runtime::observe::summary::{Ending, Summary};
use prose_runtime::observe::SessionLimits;
use prose_runtime::people::People;
use prose_runtime::program::Program;
use prose_runtime::record::{ExecOptions, RunRecord, RunStatus};
use prose_runtime::runner::RunConfig;
use prosevm::housekeeping;
use prosevm::run::rebuild::rebuild_views;
use prosevm::run::{JournalCheck, Place, Resumed, Resuming, Run, RunError};
use prosevm::store::{self, RunDir};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

mod pg_cli;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "prosevm", version, about = "The OpenProse virtual machine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Colour in diagnostics: `auto` (only on a terminal, and not when NO_COLOR is set),
    /// `always` or `never`.
    #[arg(long, value_enum, default_value = "auto", global = true)]
    color: Color,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Color {
    /// Colour on a terminal, unless NO_COLOR is set.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

impl Color {
    /// Whether stderr gets colour.
    fn on_stderr(self) -> bool {
        use std::io::IsTerminal;
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                std::io::stderr().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        }
    }
}

/// Whether diagnostics on stderr are coloured (set once from `--color`).
static COLOR: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

#[derive(Subcommand)]
enum Command {
    /// Run a compiled `.pbc` artifact.
    Exec {
        /// The artifact.
        file: PathBuf,
        #[command(flatten)]
        opts: RunArgs,
    },
    /// Compile a `.prose` program in memory and run it.
    Run {
        /// The program.
        file: PathBuf,
        /// Directory holding registry programs as DIR/@handle/slug.prose.
        #[arg(long = "lib-path", value_name = "DIR")]
        lib_paths: Vec<PathBuf>,
        #[command(flatten)]
        opts: RunArgs,
    },
    /// Enqueue a run of a compiled `.pbc` artifact in a Postgres store (for `prosevm
    /// worker` to run) and print its id.
    Submit {
        /// The artifact.
        file: PathBuf,
        /// The store: a postgres:// URL.
        #[arg(long, env = "PROSE_STORE", hide_env_values = true, value_name = "URL")]
        store: String,
        #[command(flatten)]
        opts: RunArgs,
    },
    /// Run the runs of a Postgres store: claim queued runs, and runs whose worker died, up
    /// to `--concurrency` at once, until stopped (SIGTERM or Ctrl-C: runs in progress are
    /// interrupted and queued again).
    Worker {
        /// The store: a postgres:// URL.
        #[arg(long, env = "PROSE_STORE", hide_env_values = true, value_name = "URL")]
        store: String,
        /// Runs driven at once.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// Seconds a claim holds without a heartbeat (renewed every third of it): a worker
        /// silent this long is taken for dead, and its runs are resumed by others.
        #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
        lease: f64,
        /// Milliseconds between looks for work when there was none.
        #[arg(long, value_name = "MS", default_value_t = 500)]
        poll_ms: u64,
        /// Where the runs' sessions act (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Where the runs' views are written, under `pg/` (default: `.prose`).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Requests in flight at once within one run (default 8).
        #[arg(long)]
        max_concurrency: Option<usize>,
        /// Exit once nothing is left to claim and nothing runs.
        #[arg(long)]
        exit_when_idle: bool,
        /// Say nothing about the runs claimed and ended.
        #[arg(long)]
        quiet: bool,
        /// Write no views of the runs (`bindings/`, `state.md` under the state directory's
        /// `pg/`): the store holds everything `inspect` and `report` show, and a worker
        /// without views does only the store's work. Persistent agents' memory is written
        /// either way.
        #[arg(long)]
        no_views: bool,
    },
    /// Continue an interrupted run (by id or path) without asking anything twice.
    Resume {
        /// The run's id or directory.
        run: String,
        /// The Postgres store holding the run (a postgres:// URL); default: the file store.
        #[arg(long, env = "PROSE_STORE", hide_env_values = true, value_name = "URL")]
        store: Option<String>,
        /// Go on although something changed: an edited program (answers are kept where the
        /// edited program asks the same question from an unchanged statement, the rest is
        /// asked again, listed), or a journal that is missing, lost records it held when
        /// last closed, or answers a request twice (each request's first answer is kept).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        opts: RunArgs,
    },
    /// List runs: id, program, status, start time, answers journaled; or prune them.
    Runs {
        /// Where runs live (default: `.prose` in the working directory).
        #[arg(long, value_name = "DIR", global = true)]
        state_dir: Option<PathBuf>,
        /// List (or prune) the runs of this Postgres store (a postgres:// URL) instead.
        #[arg(
            long,
            env = "PROSE_STORE",
            hide_env_values = true,
            value_name = "URL",
            global = true
        )]
        store: Option<String>,
        /// Print one JSON array for tools (each run with its path and whether a process is
        /// running it now).
        #[arg(long)]
        json: bool,
        /// Only runs with this status: running, interrupted, paused, finished or failed, and
        /// on the Postgres store queued (repeatable).
        #[arg(long = "status", value_name = "STATUS", value_parser = parse_listed_status)]
        statuses: Vec<String>,
        #[command(subcommand)]
        action: Option<RunsAction>,
    },
    /// Write a run's report: one self-contained HTML page with the timeline of its requests
    /// (parallel branches side by side), its program's source, and every session in full.
    Report {
        /// The run's id or directory.
        run: String,
        /// The Postgres store holding the run (a postgres:// URL); default: the file store.
        #[arg(long, env = "PROSE_STORE", hide_env_values = true, value_name = "URL")]
        store: Option<String>,
        /// Where runs live (default: `.prose` in the working directory).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// The file to write (default: stdout).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Show a run's record, its bindings and its state.md.
    Inspect {
        /// The run's id or directory.
        run: String,
        /// The Postgres store holding the run (a postgres:// URL); default: the file store.
        #[arg(long, env = "PROSE_STORE", hide_env_values = true, value_name = "URL")]
        store: Option<String>,
        /// Where runs live (default: `.prose` in the working directory).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Print JSON for tools.
        #[arg(long)]
        json: bool,
        /// Show one session's conversation instead: its task, each model turn, each tool call
        /// with its output, and its answer (the session's request id, e.g. `0:3`).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
}

#[derive(Subcommand)]
enum RunsAction {
    /// Remove old or ended runs: by default those that finished or failed, narrowed by
    /// `--older-than` and `--status`. A run a process (or, on the Postgres store, a worker's
    /// live lease) holds is never removed; on the Postgres store its journal goes with it.
    Prune {
        /// Only runs that started at least this long ago (`7d`, `12h`, `30m`, `1d12h`).
        #[arg(long, value_name = "AGE", value_parser = housekeeping::parse_age)]
        older_than: Option<Duration>,
        /// Only runs with this status (repeatable; default: finished and failed).
        #[arg(long = "status", value_name = "STATUS", value_parser = housekeeping::parse_status)]
        statuses: Vec<RunStatus>,
        /// Say what would be removed, and remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Trace {
    /// The narration protocol, for people.
    Narrate,
    /// One JSON event per line, for tools.
    Json,
    /// No trace.
    Quiet,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Output {
    /// `name: value` lines.
    Text,
    /// One JSON object.
    Json,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// A top-level input, NAME=VALUE (repeatable).
    #[arg(long = "input", value_name = "NAME=VALUE")]
    inputs: Vec<String>,
    /// Top-level inputs from a JSON object.
    #[arg(long = "input-file", value_name = "FILE")]
    input_file: Option<PathBuf>,
    /// Which driver answers requests: mock, command, stdio, openai or anthropic (default:
    /// `prose.toml`'s, else the mock; a resumed run keeps the driver it started with).
    #[arg(long, value_parser = parse_driver)]
    driver: Option<DriverKind>,
    /// Settings file (default: `prose.toml` in the working directory, if any).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The command line of `--driver command` (run with `sh -c`, once per request).
    #[arg(long, value_name = "COMMAND LINE")]
    command: Option<String>,
    /// Seconds a request may take before it fails (a failure the session's retry applies
    /// to; default 600).
    #[arg(long, value_name = "SECONDS")]
    request_timeout: Option<f64>,
    /// The provider's base URL (default: `OPENAI_BASE_URL` or `ANTHROPIC_BASE_URL`, else the
    /// provider's public API).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Model for sessions naming none (default: `OPENAI_MODEL` or `ANTHROPIC_MODEL`, else
    /// gpt-4o-mini or claude-sonnet-4-5); for `openai` also what the aliases map to.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// What a model alias maps to, ALIAS=ID with ALIAS one of sonnet, opus, haiku
    /// (repeatable).
    #[arg(long = "model-map", value_name = "ALIAS=ID")]
    model_map: Vec<String>,
    /// Attempts after the first when an HTTP provider is rate limiting or failing
    /// (default 3).
    #[arg(long)]
    http_retries: Option<u32>,
    /// Trace format (on stderr).
    #[arg(long, value_enum, default_value = "narrate")]
    trace: Trace,
    /// Outputs format (on stdout).
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
    /// Requests in flight at once (default 8).
    #[arg(long)]
    max_concurrency: Option<usize>,
    /// Unit of retry backoff delays, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    backoff_unit_ms: u64,
    /// Loop iterations allowed in the whole run.
    #[arg(long, default_value_t = 1_000_000)]
    max_iterations: u64,
    /// Bytes a value (a text, list or record) may take: a number with an optional K, M or G
    /// (default 256M). On `resume`, replaces the recorded limit.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_value_size: Option<u64>,
    /// Bytes the registers of all frames alive at once may take (default 512M). On
    /// `resume`, replaces the recorded limit.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_frame_memory: Option<u64>,
    /// Relaxed runtime rules are errors (a persistent agent's first `resume:`, E018).
    #[arg(long)]
    strict: bool,
    /// Allow every agent a capability its permissions leave unset or `prompt`: `bash` or
    /// `network` (repeatable; an explicit `deny` in the program still wins). Also
    /// `unsandboxed-bash`: where no OS sandbox can be set up, commands run without one
    /// instead of being refused.
    #[arg(long = "allow", value_name = "CAPABILITY")]
    allow: Vec<String>,
    /// Model turns a session may take before it fails (default 40, or `max_turns` in
    /// prose.toml).
    #[arg(long)]
    max_turns: Option<u32>,
    /// Seconds a session run as an agent loop may take, over all its turns and retries,
    /// before it fails (default: no limit, or `session_timeout` in prose.toml).
    #[arg(long, value_name = "SECONDS")]
    session_timeout: Option<f64>,
    /// Seconds a streamed answer may go without a new piece before the request fails and is
    /// tried again (default 120, or `idle_timeout` in prose.toml).
    #[arg(long, value_name = "SECONDS")]
    idle_timeout: Option<f64>,
    /// The tools a session is offered when its agent's `tools:` says nothing: `all` (those
    /// its permissions allow; the default) or `none` (plain completions); also `[tools]
    /// default` in prose.toml.
    #[arg(long, value_name = "all|none", value_parser = parse_tools)]
    tools: Option<ToolDefault>,
    /// Keep every model exchange (each request's body and the provider's reply, never a
    /// header or key) on this tape, a JSON-lines file (openai and anthropic drivers).
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Answer every model request from this tape, recorded with --record, without a
    /// provider; a request the tape does not hold fails. The driver is the tape's API.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// Most tokens the whole run may use: a request whose worst case might not fit is not
    /// sent, and the run pauses (resume it with a larger budget).
    #[arg(long, value_name = "N")]
    max_tokens: Option<u64>,
    /// Most the whole run may cost, in US dollars (prices per model from the built-in table
    /// or `[prices]` in prose.toml): the run pauses before a request that might go over.
    #[arg(long, value_name = "USD")]
    max_cost: Option<f64>,
    /// Under `--driver stdio`: the host answers model turns and the VM runs each session's
    /// agent loop, with the tools and permissions it enforces (permission prompts go to the
    /// host); without it the host runs whole sessions.
    #[arg(long)]
    host_turns: bool,
    /// Never ask a person anything: permission prompts are refused (unless `--allow` allows
    /// the capability). Without it, prompts go to the terminal when stdin and stderr are one.
    #[arg(long)]
    no_input: bool,
    /// Narrate line by line even when stderr is a terminal (where `--trace narrate` otherwise
    /// shows live progress).
    #[arg(long)]
    no_progress: bool,
    /// Mock: how discretion conditions are answered (true, false, after:N). The default,
    /// after:1, answers each condition site false once and then true, so every loop ends.
    #[arg(long, default_value = "after:1")]
    mock_conditions: Conditions,
    /// Mock: answer every missing input with a placeholder.
    #[arg(long)]
    mock_inputs: bool,
    /// Mock: delay every answer by this many milliseconds.
    #[arg(long, default_value_t = 0)]
    mock_latency: u64,
    /// Mock: scripted answers, failures and delays (a JSON list of rules).
    #[arg(long, value_name = "FILE")]
    mock_script: Option<PathBuf>,
    /// Mock: append the id of every request it serves to FILE.
    #[arg(long, value_name = "FILE")]
    mock_log: Option<PathBuf>,
    /// Where runs live (default: `.prose` in the working directory).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// The program's directory, where the search for `prose.toml` starts (set by the
    /// command, not a flag).
    #[arg(skip)]
    program_dir: PathBuf,
}

/// A status `runs --status` may name: a run's, or `queued` (a run of the Postgres store no
/// worker has claimed yet).
fn parse_listed_status(s: &str) -> Result<String, String> {
    if s == "queued" {
        return Ok(s.to_string());
    }
    housekeeping::parse_status(s).map(|st| st.as_str().to_string())
}

fn parse_tools(s: &str) -> Result<ToolDefault, String> {
    s.parse()
}

fn parse_driver(s: &str) -> Result<DriverKind, String> {
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

fn fail(msg: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("prosevm: {msg}");
    ExitCode::from(code)
}

/// The exit status for an error that stops a run from starting or resuming.
fn run_error(e: RunError) -> ExitCode {
    match e {
        RunError::Store(e @ store::StoreError::Io(..)) => fail(e, 2),
        RunError::Store(e) => fail(e, 1),
        RunError::Program(e) => fail(e, 1),
        RunError::Setup(e) => fail(e, 1),
    }
}

fn parse_inputs(args: &RunArgs) -> Result<BTreeMap<String, Value>, String> {
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

impl RunArgs {
    /// The driver these flags choose, completed with `prose.toml`.
    fn driver(&self) -> Result<DriverSettings, String> {
        let script: Vec<Rule> = match &self.mock_script {
            None => Vec::new(),
            Some(f) => std::fs::read_to_string(f)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                .map_err(|e| format!("--mock-script {}: {e}", f.display()))?,
        };
        let choice = DriverChoice {
            driver: self.driver,
            command: self.command.clone(),
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            model_map: self.model_map.clone(),
            request_timeout: self.request_timeout,
            http_retries: self.http_retries,
            backoff_ms: Some(self.backoff_unit_ms),
            host_turns: self.host_turns,
            idle_timeout: self.idle_timeout,
            record: self.record.clone(),
            replay: self.replay.clone(),
            mock: MockOptions {
                conditions: Some(self.mock_conditions),
                inputs: self.mock_inputs,
                latency: Duration::from_millis(self.mock_latency),
                script,
                log: self.mock_log.clone(),
            },
        };
        choice.settings(&self.config()?)
    }

    /// The project's settings file.
    fn config(&self) -> Result<Config, String> {
        Config::load(self.config.as_deref(), &self.program_dir)
    }

    /// Where runs live and how requests are served.
    fn place(&self) -> Result<Place, String> {
        let file = self.config()?;
        Ok(Place {
            state_dir: self.state_dir.clone(),
            config: RunConfig {
                max_concurrency: self
                    .max_concurrency
                    .or(file.max_concurrency)
                    .unwrap_or(RunConfig::default().max_concurrency),
                backoff_unit: Duration::from_millis(self.backoff_unit_ms),
                stop: Default::default(),
                budget: Default::default(),
            },
            people: People::detect(self.no_input),
            mcp: file.mcp,
            budget: (self.max_tokens, self.max_cost),
        })
    }

    /// How the run executes: these flags, completed with `prose.toml`.
    fn options(&self) -> Result<ExecOptions, String> {
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
            tools: match self.tools {
                Some(t) => t,
                None => file.tools.choice()?,
            },
            max_tokens: self.max_tokens.or(file.max_tokens),
            max_cost: self.max_cost.or(file.max_cost),
            max_value_size: self.max_value_size.unwrap_or(defaults.max_value_size),
            max_frame_memory: self.max_frame_memory.unwrap_or(defaults.max_frame_memory),
        })
    }
}

/// How the trace reaches stderr.
enum Display {
    /// Narration lines.
    Narrate,
    /// Live progress on a terminal.
    Progress(Progress),
    /// Stamped JSON lines.
    Json(Envelope),
    /// Nothing.
    Quiet,
}

/// Everything that watches a run from the CLI: the trace display, the summary and, when the
/// environment asks for it, the OpenTelemetry exporter.
struct Watchers {
    display: Display,
    summary: Summary,
    otel: Option<Otel>,
}

impl Watchers {
    /// The watchers `args` ask for, for `run`, exporting through `export` if given.
    fn new(args: &RunArgs, run: &Run, export: Option<Export>) -> Watchers {
        let id = run.record().id.as_str();
        let modules: Vec<(String, String)> = run
            .artifact()
            .modules
            .iter()
            .map(|m| (m.name.clone(), m.import_path.clone()))
            .collect();
        let otel = export.map(|e| Otel::start(e, run.record(), &modules));
        let limits = SessionLimits {
            turns: run.record().options.max_turns,
            time: run
                .record()
                .options
                .session_timeout_s
                .and_then(|s| Duration::try_from_secs_f64(s).ok()),
        };
        let display = match args.trace {
            Trace::Narrate if !args.no_progress && std::io::stderr().is_terminal() => {
                Display::Progress(Progress::stderr(limits))
            }
            Trace::Narrate => Display::Narrate,
            Trace::Json => Display::Json(Envelope::new(id)),
            Trace::Quiet => Display::Quiet,
        };
        Watchers {
            display,
            summary: Summary::new().with_limits(limits),
            otel,
        }
    }

    /// The run ended as `ending` says: the progress display goes, then the summary (in
    /// narration) or the error and end events (in JSON) are written.
    fn ended(&mut self, ending: &Ending) {
        let warning = self
            .otel
            .take()
            .and_then(|otel| otel.finish(ending.status, ending.error).err());
        match &mut self.display {
            Display::Json(env) => {
                if let Some(w) = &warning {
                    eprintln!("{}", env.warning(w));
                }
                if let Some(e) = ending.error {
                    eprintln!("{}", env.error(e));
                }
                eprintln!("{}", env.end(ending.status, ending.error));
                return;
            }
            Display::Progress(p) => p.finish(),
            Display::Narrate | Display::Quiet => {}
        }
        if let Some(w) = &warning {
            eprintln!("prosevm: warning: {w}");
        }
        if matches!(self.display, Display::Quiet) {
            return;
        }
        if ending.status == RunStatus::Finished {
            eprintln!("[Program] Program complete");
        }
        for line in self.summary.lines(ending, self.summary.elapsed()) {
            eprintln!("{line}");
        }
    }
}

impl prose_runtime::runner::Observer for Watchers {
    fn event(&mut self, e: &Event) {
        self.summary.event(e);
        if let Some(otel) = &mut self.otel {
            otel.event(e);
        }
        match &mut self.display {
            Display::Narrate => {
                if let Some(line) = e.narrate() {
                    eprintln!("{line}")
                }
            }
            Display::Progress(p) => p.event(e),
            Display::Json(env) => eprintln!("{}", env.event(e)),
            Display::Quiet => {}
        }
    }
}

/// Starts a run of `program` and drives it.
fn start(program: Program, args: &RunArgs) -> ExitCode {
    let mut inputs = match parse_inputs(args) {
        Ok(i) => i,
        Err(e) => return fail(e, 2),
    };
    let (settings, place) = match (args.driver(), args.place()) {
        (Ok(s), Ok(p)) => (s, p),
        (Err(e), _) | (_, Err(e)) => return fail(e, 2),
    };
    if args.mock_inputs {
        let m = &program.artifact.modules[0];
        for inp in m.inputs.values().filter(|i| i.parameter) {
            let name = m.strings[inp.name].clone();
            inputs
                .entry(name.clone())
                .or_insert_with(|| Value::text(format!("<{name}>")));
        }
    }
    let options = match args.options() {
        Ok(o) => o,
        Err(e) => return fail(e, 2),
    };
    let export = match Export::from_env() {
        Ok(e) => e,
        Err(e) => return fail(e, 2),
    };
    let connected = match connect(&settings, &program.artifact) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match Run::start(&program, inputs, settings, options, &place) {
        Ok(run) => drive(run, connected, args, export),
        Err(e) => run_error(e),
    }
}

/// On Ctrl-C or SIGTERM, asks `stop` to stop cleanly, saying `first` after `who`; on a
/// second one, exits at once with status 130.
fn stop_on_signals(
    runtime: &tokio::runtime::Runtime,
    stop: prose_runtime::runner::Stop,
    who: &'static str,
    first: &'static str,
) {
    runtime.spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            if stop.asked() {
                eprintln!("{who}: stopping at once");
                std::process::exit(130);
            }
            eprintln!("{who}: {first}");
            stop.ask();
        }
    });
}

/// A driver connected, with the runtime it runs on.
struct Connected {
    driver: Arc<prose_runtime::driver::settings::AnyDriver>,
    runtime: tokio::runtime::Runtime,
}

/// Connects the driver `settings` describe and checks, before anything runs, that its
/// provider offers every model `artifact`'s sessions name.
fn connect(
    settings: &DriverSettings,
    artifact: &bytecode_spec::verify::Verified,
) -> Result<Connected, ExitCode> {
    use prose_runtime::driver::Driver;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| fail(format!("cannot start the runtime: {e}"), 2))?;
    // The driver's HTTP client and reader threads belong to this runtime.
    let driver = {
        let _in_runtime = runtime.enter();
        Arc::new(settings.connect().map_err(|e| fail(e, 2))?)
    };
    let models = prosevm::run::models_named(artifact);
    runtime
        .block_on(driver.check_models(&models))
        .map_err(|e| fail(e, 2))?;
    Ok(Connected { driver, runtime })
}

/// Drives `run` with its driver, connected; prints the trace, then the outputs; sends spans
/// through `export` if given.
fn drive(run: Run, connected: Connected, args: &RunArgs, export: Option<Export>) -> ExitCode {
    let settings = run.record().driver.clone();
    let Connected { driver, runtime } = connected;
    let stdio = matches!(settings, DriverSettings::Stdio { .. });
    let id = run.record().id.clone();
    if args.trace == Trace::Narrate {
        eprintln!("[Program] run {id} in {}", run.path().display());
        if run.replayed() > 0 {
            eprintln!(
                "[Program] resuming: {} answer(s) replayed from the journal",
                run.replayed()
            );
        }
        eprintln!("[Program] driver: {}", settings.describe());
    }
    // Ctrl-C or SIGTERM stops the run cleanly (interrupted, resumable); a second one forces.
    stop_on_signals(
        &runtime,
        run.stop_handle(),
        "prosevm",
        "stopping the run (press Ctrl-C again to force)",
    );
    let run_dir = run.path().to_path_buf();
    let mut watchers = Watchers::new(args, &run, export);
    let result = match runtime.block_on(run.drive(driver, &mut watchers)) {
        Ok(r) => r,
        Err(e) => {
            let message = e.to_string();
            watchers.ended(&Ending {
                run_id: &id,
                run_dir: &run_dir,
                status: RunStatus::Running,
                outputs: 0,
                error: Some(&message),
                state_dir: args.state_dir.as_deref(),
            });
            return fail(e, 2);
        }
    };
    match result {
        Ok(outputs) => {
            watchers.ended(&Ending {
                run_id: &id,
                run_dir: &run_dir,
                status: RunStatus::Finished,
                outputs: outputs.len(),
                error: None,
                state_dir: args.state_dir.as_deref(),
            });
            let outputs: serde_json::Map<String, serde_json::Value> = outputs
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect();
            if stdio {
                stdio::send(&serde_json::json!({
                    "type": "done",
                    "run": id,
                    "status": "finished",
                    "outputs": outputs,
                }));
            } else {
                print_outputs(&outputs, args.output);
            }
            ExitCode::SUCCESS
        }
        Err(e) if e.code == bytecode_spec::Code::E217 => {
            watchers.ended(&Ending {
                run_id: &id,
                run_dir: &run_dir,
                status: RunStatus::Paused,
                outputs: 0,
                error: Some(&e.message),
                state_dir: args.state_dir.as_deref(),
            });
            if stdio {
                stdio::send(&serde_json::json!({
                    "type": "done",
                    "run": id,
                    "status": "paused",
                    "error": e.message,
                }));
            }
            fail(
                format!(
                    "run {id} paused at its budget: {}; continue it with a larger one: prosevm resume {id} --max-cost USD (or --max-tokens N)",
                    e.message
                ),
                3,
            )
        }
        Err(e) if e.code == bytecode_spec::Code::E216 => {
            watchers.ended(&Ending {
                run_id: &id,
                run_dir: &run_dir,
                status: RunStatus::Interrupted,
                outputs: 0,
                error: None,
                state_dir: args.state_dir.as_deref(),
            });
            if stdio {
                stdio::send(&serde_json::json!({
                    "type": "done",
                    "run": id,
                    "status": "interrupted",
                }));
            }
            fail(
                format!("run {id} interrupted; continue it with: prosevm resume {id}"),
                130,
            )
        }
        Err(e) => {
            let message = format!("runtime error: {e}");
            watchers.ended(&Ending {
                run_id: &id,
                run_dir: &run_dir,
                status: RunStatus::Failed,
                outputs: 0,
                error: Some(&message),
                state_dir: args.state_dir.as_deref(),
            });
            if stdio {
                stdio::send(&serde_json::json!({
                    "type": "done",
                    "run": id,
                    "status": "failed",
                    "error": e.to_string(),
                }));
            }
            if args.trace == Trace::Json {
                // The error and end events said it: stderr stays pure JSON.
                return ExitCode::from(1);
            }
            fail(message, 1)
        }
    }
}

fn print_outputs(outputs: &serde_json::Map<String, serde_json::Value>, format: Output) {
    match format {
        Output::Json => println!("{}", serde_json::Value::Object(outputs.clone())),
        Output::Text => {
            for (k, v) in outputs {
                match v {
                    serde_json::Value::String(s) => println!("{k}: {s}"),
                    other => println!("{k}: {other}"),
                }
            }
        }
    }
}

fn resume(run: &str, force: bool, args: &RunArgs) -> ExitCode {
    let dir = match RunDir::open(args.state_dir.as_deref(), run) {
        Ok(d) => d,
        Err(e) => return fail(e, 2),
    };
    let record = match dir.record() {
        Ok(r) => r,
        Err(e) => return fail(e, 1),
    };
    let args = &RunArgs {
        program_dir: dir_of(&record.origin),
        ..args.clone()
    };
    let mut edited = None;
    if record.status != RunStatus::Finished {
        match same_program(&record) {
            Ok(()) => {}
            Err(Changed::Edited(program)) if force => edited = Some(program),
            Err(Changed::Edited(_)) => {
                return fail(
                    format!(
                        "run {}: {} has changed since the run started; refusing to resume a different program (--force resumes it, asking again what the edit changed)",
                        dir.id,
                        record.origin.display()
                    ),
                    1,
                )
            }
            Err(Changed::Unreadable(e)) => return fail(format!("run {}: {e}", dir.id), 1),
        }
    }
    // An explicit driver replaces the one the run started with.
    let driver = match args.driver {
        None => None,
        Some(_) => match args.driver() {
            Ok(d) => {
                if d != record.driver {
                    eprintln!(
                        "prosevm: warning: run {} started with the {} driver; continuing with {} as asked (recorded)",
                        dir.id,
                        record.driver.name(),
                        d.name()
                    );
                }
                Some(d)
            }
            Err(e) => return fail(e, 2),
        },
    };
    let place = match args.place() {
        Ok(p) => p,
        Err(e) => return fail(e, 2),
    };
    let inputs = match parse_inputs(args) {
        Ok(i) => i,
        Err(e) => return fail(e, 2),
    };
    let export = match Export::from_env() {
        Ok(e) => e,
        Err(e) => return fail(e, 2),
    };
    let how = Resuming {
        driver,
        inputs,
        journal: if force {
            JournalCheck::Force
        } else {
            JournalCheck::Strict
        },
        max_value_size: args.max_value_size,
        max_frame_memory: args.max_frame_memory,
    };
    let resumed = match edited {
        None => Run::resume_with(dir, &place, how),
        Some(program) => Run::resume_edited(dir, &program, how, &place).map(|(r, again)| {
            eprintln!(
                "prosevm: the program changed; {} answer(s) will be asked again{}",
                again.len(),
                if again.is_empty() { "" } else { ":" }
            );
            for a in &again {
                eprintln!("  {a}");
            }
            r
        }),
    };
    match resumed {
        Ok(Resumed::Finished(record)) => {
            eprintln!("run {} already finished", record.id);
            print_outputs(&record.outputs.unwrap_or_default(), args.output);
            ExitCode::SUCCESS
        }
        Ok(Resumed::Ready(run)) => match connect(&run.record().driver, run.artifact()) {
            Ok(c) => drive(*run, c, args, export),
            Err(code) => code,
        },
        Err(e) => run_error(e),
    }
}

/// How the program at a run's origin differs from the one it started with.
enum Changed {
    /// It was edited: here it is, compiled.
    Edited(Program),
    /// It cannot be read or compiled.
    Unreadable(String),
}

/// Checks that the program a run started with is still what its origin holds.
fn same_program(record: &RunRecord) -> Result<(), Changed> {
    let origin = &record.origin;
    let current = if origin.extension().is_some_and(|x| x == "prose") {
        compile(origin, &[]).ok()
    } else {
        std::fs::read(origin)
            .ok()
            .and_then(|b| Program::from_bytes(b, origin.clone()).ok())
    };
    match current {
        Some(p) if p.sha256() == record.artifact_sha256 => Ok(()),
        Some(p) => Err(Changed::Edited(p)),
        None => Err(Changed::Unreadable(format!(
            "cannot read its program {}",
            origin.display()
        ))),
    }
}

fn runs(state_dir: Option<&Path>, json: bool, statuses: &[String]) -> ExitCode {
    // No run of the file store is queued: `--status queued` alone lists none.
    let rows: Vec<housekeeping::RunRow> = housekeeping::list(state_dir)
        .into_iter()
        .filter(|r| {
            statuses.is_empty()
                || r.status
                    .is_some_and(|s| statuses.iter().any(|want| want == s.as_str()))
        })
        .collect();
    if json {
        match serde_json::to_string(&rows) {
            Ok(text) => println!("{text}"),
            Err(e) => return fail(e, 2),
        }
        return ExitCode::SUCCESS;
    }
    println!(
        "{:24} {:20} {:11} {:20} {:>8} {:>9} {:>9}",
        "id", "program", "status", "started", "answered", "tokens", "cost"
    );
    for r in rows {
        let status = if r.live {
            format!("{} (live)", r.status_text())
        } else {
            r.status_text().to_string()
        };
        let tokens = r.usage.map_or(String::new(), |u| u.tokens().to_string());
        let cost = r
            .usage
            .and_then(|u| u.cost)
            .map_or(String::new(), |c| format!("${c:.4}"));
        println!(
            "{:24} {:20} {:11} {:20} {:>8} {tokens:>9} {cost:>9}",
            r.id,
            r.program,
            status,
            r.started.as_deref().unwrap_or("?"),
            r.answered
        );
    }
    ExitCode::SUCCESS
}

/// Refuses a prune rule that names no runs (neither an age nor a status).
fn check_prune_rule(rule: &housekeeping::PruneRule) -> Result<(), ExitCode> {
    if rule.older_than.is_none() && rule.statuses.is_empty() {
        return Err(fail(
            "say which runs to prune: --older-than AGE, --status STATUS, or both",
            2,
        ));
    }
    Ok(())
}

fn prune(state_dir: Option<&Path>, rule: housekeeping::PruneRule) -> ExitCode {
    use housekeeping::Pruned;
    if let Err(code) = check_prune_rule(&rule) {
        return code;
    }
    let done = housekeeping::prune(state_dir, &rule, std::time::SystemTime::now());
    let (mut removed, mut kept) = (0, 0);
    for p in &done {
        match p {
            Pruned::Removed(r) | Pruned::WouldRemove(r) => {
                removed += 1;
                println!(
                    "{} {} ({}, {}, started {})",
                    if rule.dry_run {
                        "would remove"
                    } else {
                        "removed"
                    },
                    r.id,
                    r.program,
                    r.status_text(),
                    r.started.as_deref().unwrap_or("?")
                );
            }
            Pruned::Kept(r, why) => {
                kept += 1;
                println!("kept {}: {why}", r.id);
            }
        }
    }
    println!(
        "{removed} run(s) {}, {kept} kept",
        if rule.dry_run {
            "would be removed"
        } else {
            "removed"
        }
    );
    ExitCode::SUCCESS
}

fn report(state_dir: Option<&Path>, run: &str, output: Option<&Path>) -> ExitCode {
    let dir = match RunDir::open(state_dir, run) {
        Ok(d) => d,
        Err(e) => return fail(e, 2),
    };
    let report = match prosevm::report::Report::load(&dir) {
        Ok(r) => r,
        Err(e) => return fail(format!("run {}: {e}", dir.id), 1),
    };
    let page = prosevm::report::html::render(&report);
    match output {
        None => print!("{page}"),
        Some(path) => {
            if let Err(e) = std::fs::write(path, page) {
                return fail(format!("cannot write {}: {e}", path.display()), 2);
            }
            eprintln!(
                "prosevm: report of run {} ({} requests) written to {}",
                dir.id,
                report.entries.len(),
                path.display()
            );
        }
    }
    ExitCode::SUCCESS
}

fn inspect(state_dir: Option<&Path>, run: &str, json: bool) -> ExitCode {
    let dir = match RunDir::open(state_dir, run) {
        Ok(d) => d,
        Err(e) => return fail(e, 2),
    };
    // A run nobody holds that did not end was interrupted: its views may lag its journal.
    // A run another process holds is left alone (that process keeps its views).
    match rebuild_views(&dir) {
        Ok(_) | Err(RunError::Store(store::StoreError::Held(_))) => {}
        Err(e) => eprintln!("prosevm: note: the views were not rebuilt: {e}"),
    }
    let record = match dir.record() {
        Ok(r) => r,
        Err(e) => return fail(e, 1),
    };
    let answers = match dir.read_journal(&record) {
        Ok(c) => c.records,
        Err(e) => return fail(format!("run {}: {e}", dir.id), 1),
    };
    let mut view = match serde_json::to_value(&record) {
        Ok(v) => v,
        Err(e) => return fail(e, 2),
    };
    view["answered"] = answers.len().into();
    view["path"] = dir.path.display().to_string().into();
    view["bindings"] = serde_json::json!(store::view::read_bindings(&dir.path));
    let state = std::fs::read_to_string(dir.path.join("state.md")).ok();
    if json {
        view["state"] = state.into();
        println!("{view}");
    } else {
        println!(
            "{}",
            serde_json::to_string_pretty(&view).unwrap_or_default()
        );
        if let Some(state) = state {
            println!("\n{state}");
        }
    }
    ExitCode::SUCCESS
}

/// Prints session `id` of a run: its task and system prompt, its agent loop's turns and tool
/// calls with their outputs, and its answer, rebuilt from the journal.
fn inspect_session(state_dir: Option<&Path>, run: &str, id: &str, json: bool) -> ExitCode {
    use prose_machine::protocol::{Answer, Ask, RequestId};
    let id: RequestId = match id.parse() {
        Ok(id) => id,
        Err(e) => return fail(e, 2),
    };
    let dir = match RunDir::open(state_dir, run) {
        Ok(d) => d,
        Err(e) => return fail(e, 2),
    };
    let loaded = dir.record().map_err(|e| e.to_string()).and_then(|record| {
        let bytes = std::fs::read(dir.path.join("artifact.pbc")).map_err(|e| e.to_string())?;
        let program =
            Program::from_bytes(bytes, record.origin.clone()).map_err(|e| e.to_string())?;
        let replies = dir
            .read_journal(&record)
            .map_err(|e| e.to_string())?
            .in_order();
        prosevm::run::transcript::exchanges(&record, &program.artifact, replies)
    });
    let exchanges = match loaded {
        Ok(x) => x,
        Err(e) => return fail(format!("run {}: {e}", dir.id), 1),
    };
    let Some(x) = exchanges.into_iter().find(|x| x.request.id == id) else {
        return fail(format!("run {} asked nothing under the id {id}", dir.id), 1);
    };
    let Ask::Session(s) = &x.request.ask else {
        return fail(
            format!("{id} is a `{}` request, not a session", x.request.kind()),
            1,
        );
    };
    if json {
        let view = serde_json::json!({
            "request": x.request,
            "steps": x.steps,
            "reply": x.reply,
        });
        println!("{view}");
        return ExitCode::SUCCESS;
    }
    let indent = |t: &str| t.lines().map(|l| format!("  {l}\n")).collect::<String>();
    print!("session {id} at {}", x.request.site);
    if let Some(a) = &s.agent {
        print!(" (agent {a})");
    }
    println!();
    if let Some(m) = &s.model {
        println!("model: {m}");
    }
    if let Some(sys) = &s.system {
        print!("system:\n{}", indent(sys));
    }
    print!(
        "task:\n{}",
        indent(&prose_runtime::driver::render::session(s))
    );
    for step in &x.steps {
        match &step.outcome {
            Ok(Answer::Turn(t)) => {
                println!("{}: {}", step.id, t.text);
                for c in &t.tool_calls {
                    println!("  -> {} {}", c.name, c.arguments);
                }
            }
            Ok(Answer::Tool(out)) => {
                let mark = if out.is_error { " (error)" } else { "" };
                print!("{}{mark}:\n{}", step.id, indent(&out.content));
            }
            Ok(Answer::Permission(p)) => println!(
                "{}: permission answered {}",
                step.id,
                serde_json::to_string(p).unwrap_or_default()
            ),
            Ok(_) => println!(
                "{}: {}",
                step.id,
                serde_json::to_string(step).unwrap_or_default()
            ),
            Err(e) => println!("{} failed: {e}", step.id),
        }
    }
    match x.reply.as_ref().map(|r| (&r.outcome, r.usage)) {
        Some((Ok(Answer::Session(a)), usage)) => {
            print!("answer:\n{}", indent(&a.text));
            if let Some(m) = &a.memory {
                print!("memory:\n{}", indent(m));
            }
            if let Some(u) = usage {
                println!("tokens: {} in, {} out", u.input_tokens, u.output_tokens);
            }
        }
        Some((Err(e), _)) => println!("failed: {e}"),
        _ => println!("(no answer yet)"),
    }
    ExitCode::SUCCESS
}

/// Compiles `file` in memory (with its imports found through `lib_paths`).
fn compile(file: &Path, lib_paths: &[PathBuf]) -> Result<Program, ExitCode> {
    use codespan_reporting::term::termcolor::{ColorChoice, StandardStream};
    let mut c = prosec::compile::Compilation::new(prosec::compile::Options {
        lib_paths: lib_paths.to_vec(),
        require_imports: true,
        ..Default::default()
    });
    let root = c.add_file(file).map_err(|e| fail(e, 2))?;
    if c.error_count() > 0 {
        let choice = if COLOR.get().copied().unwrap_or(false) {
            ColorChoice::Always
        } else {
            ColorChoice::Never
        };
        let mut err = StandardStream::stderr(choice);
        let _ = prosec::diagnostics::render_text(&mut err, &c.sources, &c.diagnostics);
        return Err(fail(
            format!("{}: {} error(s)", file.display(), c.error_count()),
            1,
        ));
    }
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).map_err(|e| fail(e, 1))?;
    Program::from_bytes(bytes, file.to_path_buf()).map_err(|e| fail(e, 1))
}

/// Reads the artifact `file`.
fn load(file: &Path) -> Result<Program, ExitCode> {
    let bytes =
        std::fs::read(file).map_err(|e| fail(format!("cannot read {}: {e}", file.display()), 2))?;
    let origin = std::fs::canonicalize(file).unwrap_or(file.to_path_buf());
    Program::from_bytes(bytes, origin).map_err(|e| fail(format!("{}: {e}", file.display()), 1))
}

/// The directory `file` is in (where the search for `prose.toml` starts).
fn dir_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether `file` starts like a `.pbc` artifact (whatever its name).
fn is_artifact(file: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == bytecode_spec::artifact::MAGIC)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // Still one thread: the keys leave the environment before anything can start a child.
    prose_runtime::secrets::take();
    let _ = COLOR.set(cli.color.on_stderr());
    match cli.command {
        Command::Exec { file, mut opts } => {
            opts.program_dir = dir_of(&file);
            match load(&file) {
                Ok(program) => start(program, &opts),
                Err(code) => code,
            }
        }
        Command::Run {
            file,
            lib_paths,
            mut opts,
        } => {
            let file = std::fs::canonicalize(&file).unwrap_or(file);
            opts.program_dir = dir_of(&file);
            let program = if is_artifact(&file) {
                load(&file)
            } else {
                compile(&file, &lib_paths)
            };
            match program {
                Ok(program) => start(program, &opts),
                Err(code) => code,
            }
        }
        Command::Submit {
            file,
            store,
            mut opts,
        } => {
            opts.program_dir = dir_of(&file);
            match load(&file) {
                Ok(program) => pg_cli::submit(&store, program, &opts),
                Err(code) => code,
            }
        }
        Command::Worker {
            store,
            concurrency,
            lease,
            poll_ms,
            workdir,
            state_dir,
            max_concurrency,
            exit_when_idle,
            quiet,
            no_views,
        } => pg_cli::worker(
            &store,
            pg_cli::WorkerArgs {
                concurrency,
                lease,
                poll_ms,
                workdir,
                state_dir,
                max_concurrency,
                exit_when_idle,
                quiet,
                no_views,
            },
        ),
        Command::Resume {
            run,
            store: Some(store),
            opts,
            ..
        } => pg_cli::resume(&store, &run, &opts),
        Command::Resume {
            run, force, opts, ..
        } => resume(&run, force, &opts),
        Command::Runs {
            store: Some(store),
            action:
                Some(RunsAction::Prune {
                    older_than,
                    statuses,
                    dry_run,
                }),
            ..
        } => pg_cli::prune(
            &store,
            housekeeping::PruneRule {
                older_than,
                statuses,
                dry_run,
            },
        ),
        Command::Runs {
            state_dir,
            action:
                Some(RunsAction::Prune {
                    older_than,
                    statuses,
                    dry_run,
                }),
            ..
        } => prune(
            state_dir.as_deref(),
            housekeeping::PruneRule {
                older_than,
                statuses,
                dry_run,
            },
        ),
        Command::Runs {
            store: Some(store),
            json,
            statuses,
            action: None,
            ..
        } => pg_cli::runs(&store, json, &statuses),
        Command::Runs {
            state_dir,
            json,
            statuses,
            action: None,
            ..
        } => runs(state_dir.as_deref(), json, &statuses),
        Command::Report {
            run,
            store: Some(store),
            output,
            ..
        } => pg_cli::report(&store, &run, output.as_deref()),
        Command::Report {
            run,
            state_dir,
            output,
            ..
        } => report(state_dir.as_deref(), &run, output.as_deref()),
        Command::Inspect {
            run,
            store: Some(store),
            json,
            session,
            ..
        } => pg_cli::inspect(&store, &run, json, session.as_deref()),
        Command::Inspect {
            run,
            state_dir,
            json,
            session: Some(id),
            ..
        } => inspect_session(state_dir.as_deref(), &run, &id, json),
        Command::Inspect {
            run,
            state_dir,
            json,
            session: None,
            ..
        } => inspect(state_dir.as_deref(), &run, json),
    }
}
