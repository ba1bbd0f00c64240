//! `prosevm`: runs OpenProse programs.
//!
//! `prosevm exec prog.pbc` runs a compiled artifact (verified first); `prosevm run
//! prog.prose` compiles in memory and runs. The trace goes to stderr, the outputs to stdout.
//! Exit status: 0 success, 1 runtime error or invalid program, 2 usage or I/O error.

use clap::{Args, Parser, Subcommand, ValueEnum};
use prosevm::config::Config;
use prosevm::driver::chat::{Api, ChatDriver, Models};
use prosevm::driver::command::CommandDriver;
use prosevm::driver::http::HttpOptions;
use prosevm::driver::mock::{Conditions, Mock, MockOptions, Rule};
use prosevm::driver::stdio::{self, StdioDriver};
use prosevm::driver::Driver;
use prosevm::machine::{Limits, Machine};
use prosevm::runner::{run_durable, Durable, Observer, RunConfig};
use prosevm::snapshot::Snapshot;
use prosevm::store::view::RunView;
use prosevm::store::{self, agents, journal, RunDir, RunInfo};
use prosevm::trace::Event;
use prosevm::value::Value;
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "prosevm", version, about = "The OpenProse virtual machine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

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
    /// Continue an interrupted run (by id or path) without asking anything twice.
    Resume {
        /// The run's id or directory.
        run: String,
        #[command(flatten)]
        opts: RunArgs,
    },
    /// List runs: id, program, status, start time, answers journaled.
    Runs {
        /// Where runs live (default: `.prose` in the working directory).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Show a run's record, its bindings and its state.md.
    Inspect {
        /// The run's id or directory.
        run: String,
        /// Where runs live (default: `.prose` in the working directory).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Print JSON for tools.
        #[arg(long)]
        json: bool,
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

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum DriverKind {
    /// The deterministic offline mock.
    Mock,
    /// A shell command run once per request (`--command`).
    Command,
    /// An agent host on stdin/stdout (one JSON line per request and per reply).
    Stdio,
    /// An OpenAI-compatible chat completions server (`--base-url`, `OPENAI_API_KEY`).
    Openai,
    /// Anthropic's Messages API (`ANTHROPIC_API_KEY`).
    Anthropic,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// A top-level input, NAME=VALUE (repeatable).
    #[arg(long = "input", value_name = "NAME=VALUE")]
    inputs: Vec<String>,
    /// Top-level inputs from a JSON object.
    #[arg(long = "input-file", value_name = "FILE")]
    input_file: Option<PathBuf>,
    /// Which driver answers requests (default: `prose.toml`'s, else the mock).
    #[arg(long, value_enum)]
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
    /// What `prose.toml` says (filled in by [`configured`]).
    #[arg(skip)]
    file: Config,
}

/// `args` completed with the settings file: flags win, then the environment (for base URL
/// and model), then the file, then the defaults.
fn configured(args: &RunArgs) -> Result<RunArgs, ExitCode> {
    let file = Config::load(args.config.as_deref()).map_err(|e| fail(e, 2))?;
    let mut a = args.clone();
    if a.driver.is_none() {
        a.driver = match file.driver.as_deref() {
            None => None,
            Some(name) => Some(
                DriverKind::from_str(name, true)
                    .map_err(|_| fail(format!("prose.toml: unknown driver {name:?}"), 2))?,
            ),
        };
    }
    a.command = a.command.or(file.command.clone());
    a.request_timeout = a.request_timeout.or(file.request_timeout);
    a.http_retries = a.http_retries.or(file.http_retries);
    a.max_concurrency = a.max_concurrency.or(file.max_concurrency);
    let from_file = [
        ("sonnet", &file.models.sonnet),
        ("opus", &file.models.opus),
        ("haiku", &file.models.haiku),
    ]
    .into_iter()
    .filter_map(|(alias, id)| id.as_ref().map(|id| format!("{alias}={id}")));
    a.model_map = from_file.chain(a.model_map).collect();
    a.file = file;
    Ok(a)
}

fn fail(msg: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("prosevm: {msg}");
    ExitCode::from(code)
}

fn parse_inputs(args: &RunArgs) -> Result<FxHashMap<String, Value>, String> {
    let mut inputs = FxHashMap::default();
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

/// Where an artifact came from: its bytes, and the file it was read or compiled from.
struct Program {
    artifact: bytecode_spec::Artifact,
    bytes: Vec<u8>,
    origin: PathBuf,
}

fn mock(args: &RunArgs) -> Result<Mock, ExitCode> {
    let script: Vec<Rule> = match &args.mock_script {
        None => Vec::new(),
        Some(f) => std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            .map_err(|e| fail(format!("--mock-script {}: {e}", f.display()), 2))?,
    };
    Ok(Mock::new(MockOptions {
        conditions: Some(args.mock_conditions),
        inputs: args.mock_inputs,
        latency: Duration::from_millis(args.mock_latency),
        script,
        log: args.mock_log.clone(),
    }))
}

/// Watches a run: keeps its run directory's views and prints the trace.
struct Watch {
    view: RunView,
    trace: Trace,
}

impl Observer for Watch {
    fn event(&mut self, e: &Event) {
        self.view.observe(e);
        match self.trace {
            Trace::Narrate => eprintln!("{}", e.narrate()),
            Trace::Json => eprintln!("{}", serde_json::to_string(e).unwrap_or_default()),
            Trace::Quiet => {}
        }
    }

    fn wants_snapshot(&mut self, idle: bool) -> bool {
        self.view.due(idle)
    }

    fn snapshot(&mut self, snapshot: &Snapshot) {
        self.view.write(snapshot);
    }
}

/// Runs a program in a run directory (a new one, or `resume`'s) with the driver `args`
/// choose, journaling every answer.
fn execute(
    program: Program,
    inputs: FxHashMap<String, Value>,
    args: &RunArgs,
    resume: Option<RunDir>,
) -> ExitCode {
    let args = &match configured(args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    match args.driver.unwrap_or(DriverKind::Mock) {
        DriverKind::Mock => match mock(args) {
            Ok(d) => execute_with(
                Arc::new(d),
                "mock (no provider configured; answers are placeholders)",
                program,
                inputs,
                args,
                resume,
            ),
            Err(code) => code,
        },
        DriverKind::Command => {
            let Some(command) = args.command.clone() else {
                return fail("--driver command needs --command \"PROGRAM ARGS\"", 2);
            };
            let timeout = match request_timeout(args) {
                Ok(t) => t,
                Err(code) => return code,
            };
            execute_with(
                Arc::new(CommandDriver::new(command, timeout)),
                "command",
                program,
                inputs,
                args,
                resume,
            )
        }
        DriverKind::Openai | DriverKind::Anthropic => {
            let api = if args.driver == Some(DriverKind::Openai) {
                Api::OpenAi
            } else {
                Api::Anthropic
            };
            match chat(args, api) {
                Ok(d) => execute_with(
                    Arc::new(d),
                    if api == Api::OpenAi {
                        "openai (chat completions)"
                    } else {
                        "anthropic (messages)"
                    },
                    program,
                    inputs,
                    args,
                    resume,
                ),
                Err(code) => code,
            }
        }
        DriverKind::Stdio => match request_timeout(args) {
            Ok(timeout) => execute_with(
                Arc::new(StdioDriver::start(timeout)),
                "stdio (requests on stdout, replies on stdin)",
                program,
                inputs,
                args,
                resume,
            ),
            Err(code) => code,
        },
    }
}

/// A chat driver for `api` from flags and the environment.
fn chat(args: &RunArgs, api: Api) -> Result<ChatDriver, ExitCode> {
    let timeout = request_timeout(args)?;
    let (prefix, base) = match api {
        Api::OpenAi => ("OPENAI", "https://api.openai.com/v1"),
        Api::Anthropic => ("ANTHROPIC", "https://api.anthropic.com"),
    };
    let env = |name: &str| std::env::var(format!("{prefix}_{name}")).ok();
    let base = args
        .base_url
        .clone()
        .or_else(|| env("BASE_URL"))
        .or_else(|| args.file.base_url.clone())
        .unwrap_or_else(|| base.into());
    let mut models = Models::defaults(api);
    if let Some(m) = args
        .model
        .clone()
        .or_else(|| env("MODEL"))
        .or_else(|| args.file.model.clone())
    {
        if api == Api::OpenAi {
            models = Models {
                sonnet: m.clone(),
                opus: m.clone(),
                haiku: m.clone(),
                default: m,
            };
        } else {
            models.default = m;
        }
    }
    for entry in &args.model_map {
        let slot = match entry.split_once('=') {
            Some(("sonnet", id)) => (&mut models.sonnet, id),
            Some(("opus", id)) => (&mut models.opus, id),
            Some(("haiku", id)) => (&mut models.haiku, id),
            _ => {
                return Err(fail(
                    format!("--model-map {entry}: want sonnet=ID, opus=ID or haiku=ID"),
                    2,
                ))
            }
        };
        *slot.0 = slot.1.to_string();
    }
    let http = HttpOptions {
        timeout,
        retries: args.http_retries.unwrap_or(3),
        backoff: Duration::from_millis(args.backoff_unit_ms),
    };
    ChatDriver::new(api, &base, env("API_KEY"), models, http).map_err(|e| fail(e.0, 2))
}

/// `--request-timeout` as a duration.
fn request_timeout(args: &RunArgs) -> Result<Duration, ExitCode> {
    match Duration::try_from_secs_f64(args.request_timeout.unwrap_or(600.0)) {
        Ok(t) if !t.is_zero() => Ok(t),
        _ => Err(fail(
            "--request-timeout must be a positive number of seconds",
            2,
        )),
    }
}

/// [`execute`] with `driver` (described in the trace as `about`).
fn execute_with<D: Driver>(
    driver: Arc<D>,
    about: &str,
    program: Program,
    mut inputs: FxHashMap<String, Value>,
    args: &RunArgs,
    resume: Option<RunDir>,
) -> ExitCode {
    if args.mock_inputs && resume.is_none() {
        let m = &program.artifact.modules[0];
        for inp in m.inputs.values().filter(|i| i.parameter) {
            let name = m.strings[inp.name].clone();
            inputs
                .entry(name.clone())
                .or_insert_with(|| Value::text(format!("<{name}>")));
        }
    }
    let limits = Limits {
        iterations: args.max_iterations,
        ..Limits::default()
    };
    let artifact = Arc::new(program.artifact);
    let mut machine = match Machine::new(artifact.clone(), &inputs, limits) {
        Ok(m) => m,
        Err(e) => return fail(e, 1),
    };
    // Trace events feed the run directory's binding files and state.md, so they stay on
    // even when nothing is printed.
    let resuming = resume.is_some();
    let (dir, replay) = match resume {
        Some(dir) => match journal::read(&dir.journal_path()) {
            Ok(records) => (
                dir,
                records
                    .into_iter()
                    .collect::<std::collections::HashMap<_, _>>(),
            ),
            Err(e) => return fail(format!("run {}: {e}", dir.id), 1),
        },
        None => {
            let inputs_json: serde_json::Map<String, serde_json::Value> = inputs
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect();
            let info = RunInfo {
                program: artifact.modules[0].name.clone(),
                origin: program.origin.clone(),
                artifact_sha256: store::sha256_hex(&program.bytes),
                inputs: serde_json::Value::Object(inputs_json),
            };
            match RunDir::create(
                args.state_dir.as_deref(),
                &info,
                &artifact.modules[0].source,
                &program.bytes,
            ) {
                Ok(dir) => (dir, Default::default()),
                Err(e) => return fail(e, 2),
            }
        }
    };
    let _lock = match dir.lock() {
        Ok(l) => l,
        Err(e) => return fail(e, 1),
    };
    // Persistent agents: what their memory was when the run started, recorded with the run
    // so that a resume starts from the same memory.
    let mut meta = match dir.meta() {
        Ok(m) => m,
        Err(e) => return fail(e, 1),
    };
    let homes = if resuming {
        agents::from_json(&meta["agents"])
    } else {
        let root = args
            .state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(".prose"));
        let homes = agents::discover(&artifact, &dir.path, &root);
        meta["agents"] = agents::to_json(&homes);
        if let Err(e) = dir.write_meta(&meta) {
            return fail(e, 2);
        }
        homes
    };
    for h in &homes {
        if let Some(memory) = &h.memory {
            machine.preload_memory(&h.name, memory.clone());
        }
    }
    let journal = match journal::Journal::open(&dir.journal_path()) {
        Ok(j) => j,
        Err(e) => return fail(e, 2),
    };
    let replayed = replay.len();
    let mut durable = Durable {
        journal,
        replay,
        batch: driver.side_effect_free(),
    };
    let cfg = RunConfig {
        max_concurrency: args.max_concurrency.unwrap_or(8),
        backoff_unit: Duration::from_millis(args.backoff_unit_ms),
    };
    let trace = args.trace;
    let started = meta["started"].as_str().unwrap_or_default().to_string();
    let mut top_inputs: Vec<(String, Value)> =
        inputs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    top_inputs.sort_by(|a, b| a.0.cmp(&b.0));
    let view = RunView::new(
        dir.path.clone(),
        dir.id.clone(),
        started,
        artifact.clone(),
        &top_inputs,
        homes,
    );
    if trace == Trace::Narrate {
        eprintln!("[Program] run {} in {}", dir.id, dir.path.display());
        if replayed > 0 {
            eprintln!("[Program] resuming: {replayed} answer(s) replayed from the journal");
        }
        eprintln!("[Program] driver: {about}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start the runtime: {e}"), 2),
    };
    let mut watch = Watch { view, trace };
    let result = runtime.block_on(run_durable(
        machine,
        driver,
        &cfg,
        Some(&mut durable),
        &mut watch,
    ));
    let view = watch.view;
    let code = match &result {
        Ok(outputs) => {
            if trace == Trace::Narrate {
                eprintln!("[Program] Program complete");
            }
            let obj: serde_json::Map<String, serde_json::Value> = outputs
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect();
            meta["status"] = "finished".into();
            meta["outputs"] = serde_json::Value::Object(obj);
            if args.driver == Some(DriverKind::Stdio) {
                stdio::send(&serde_json::json!({
                    "type": "done",
                    "run": dir.id,
                    "status": "finished",
                    "outputs": meta["outputs"],
                }));
            } else {
                print_outputs(&meta["outputs"], args.output);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            meta["status"] = "failed".into();
            meta["error"] = e.to_string().into();
            if args.driver == Some(DriverKind::Stdio) {
                stdio::send(&serde_json::json!({
                    "type": "done",
                    "run": dir.id,
                    "status": "failed",
                    "error": e.to_string(),
                }));
            }
            fail(format!("runtime error: {e}"), 1)
        }
    };
    // The views first: run.json saying the run ended is the commit point, so a run killed
    // in between is resumed (and its views rebuilt) rather than reported finished.
    let status = if result.is_ok() { "finished" } else { "failed" };
    if let Err(e) = view.finish(status) {
        return fail(e, 2);
    }
    if let Err(e) = dir.write_meta(&meta) {
        return fail(e, 2);
    }
    code
}

fn print_outputs(outputs: &serde_json::Value, format: Output) {
    match format {
        Output::Json => println!("{outputs}"),
        Output::Text => {
            if let serde_json::Value::Object(map) = outputs {
                for (k, v) in map {
                    match v {
                        serde_json::Value::String(s) => println!("{k}: {s}"),
                        other => println!("{k}: {other}"),
                    }
                }
            }
        }
    }
}

fn resume(run: &str, args: &RunArgs) -> ExitCode {
    let dir = match RunDir::open(args.state_dir.as_deref(), run) {
        Ok(d) => d,
        Err(e) => return fail(e, 2),
    };
    let meta = match dir.meta() {
        Ok(m) => m,
        Err(e) => return fail(e, 1),
    };
    match meta["status"].as_str() {
        Some("finished") => {
            eprintln!("run {} already finished", dir.id);
            print_outputs(&meta["outputs"], args.output);
            return ExitCode::SUCCESS;
        }
        Some("failed") => {
            return fail(
                format!(
                    "run {} already failed: {}",
                    dir.id,
                    meta["error"].as_str().unwrap_or("")
                ),
                1,
            );
        }
        _ => {}
    }
    // The program must be the one the run started with.
    let origin = PathBuf::from(meta["origin"].as_str().unwrap_or_default());
    let current = if origin.extension().is_some_and(|x| x == "prose") {
        compile(&origin, &[]).ok().map(|p| p.bytes)
    } else {
        std::fs::read(&origin).ok()
    };
    let recorded = meta["artifact_sha256"].as_str().unwrap_or_default();
    match current {
        Some(bytes) if store::sha256_hex(&bytes) == recorded => {}
        Some(_) => {
            return fail(
                format!("run {}: {} has changed since the run started; refusing to resume a different program", dir.id, origin.display()),
                1,
            )
        }
        None => return fail(format!("run {}: cannot read its program {}", dir.id, origin.display()), 1),
    }
    let bytes = match std::fs::read(dir.path.join("artifact.pbc")) {
        Ok(b) => b,
        Err(e) => return fail(format!("run {}: {e}", dir.id), 2),
    };
    let artifact = match bytecode_spec::artifact::load(&bytes) {
        Ok((_, a)) => a,
        Err(e) => return fail(format!("run {}: {e}", dir.id), 1),
    };
    let inputs = match &meta["inputs"] {
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), Value::from_json(v)))
            .collect(),
        _ => FxHashMap::default(),
    };
    execute(
        Program {
            artifact,
            bytes,
            origin,
        },
        inputs,
        args,
        Some(dir),
    )
}

fn runs(state_dir: Option<&Path>) -> ExitCode {
    println!(
        "{:24} {:20} {:9} {:20} answered",
        "id", "program", "status", "started"
    );
    for dir in RunDir::list(state_dir) {
        let meta = dir.meta().unwrap_or_default();
        let answered = journal::read(&dir.journal_path())
            .map(|r| r.len())
            .unwrap_or(0);
        println!(
            "{:24} {:20} {:9} {:20} {answered}",
            dir.id,
            meta["program"].as_str().unwrap_or("?"),
            meta["status"].as_str().unwrap_or("?"),
            meta["started"].as_str().unwrap_or("?")
        );
    }
    ExitCode::SUCCESS
}

fn inspect(state_dir: Option<&Path>, run: &str, json: bool) -> ExitCode {
    let dir = match RunDir::open(state_dir, run) {
        Ok(d) => d,
        Err(e) => return fail(e, 2),
    };
    let mut meta = match dir.meta() {
        Ok(m) => m,
        Err(e) => return fail(e, 1),
    };
    let answers = match journal::read(&dir.journal_path()) {
        Ok(r) => r,
        Err(e) => return fail(e, 1),
    };
    meta["answered"] = answers.len().into();
    meta["path"] = dir.path.display().to_string().into();
    meta["bindings"] = serde_json::json!(store::view::read_bindings(&dir.path));
    let state = std::fs::read_to_string(dir.path.join("state.md")).ok();
    if json {
        meta["state"] = state.into();
        println!("{meta}");
    } else {
        println!(
            "{}",
            serde_json::to_string_pretty(&meta).unwrap_or_default()
        );
        if let Some(state) = state {
            println!("\n{state}");
        }
    }
    ExitCode::SUCCESS
}

fn compile(file: &Path, lib_paths: &[PathBuf]) -> Result<Program, ExitCode> {
    use codespan_reporting::term::termcolor::{ColorChoice, StandardStream};
    let mut c = prosec::compile::Compilation::new(prosec::compile::Options {
        lib_paths: lib_paths.to_vec(),
        require_imports: true,
        ..Default::default()
    });
    let root = c.add_file(file).map_err(|e| fail(e, 2))?;
    if c.error_count() > 0 {
        let mut err = StandardStream::stderr(ColorChoice::Auto);
        let _ = prosec::diagnostics::render_text(&mut err, &c.sources, &c.diagnostics);
        return Err(fail(
            format!("{}: {} error(s)", file.display(), c.error_count()),
            1,
        ));
    }
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).map_err(|e| fail(e, 1))?;
    let (_, artifact) = bytecode_spec::artifact::load(&bytes).map_err(|e| fail(e, 1))?;
    Ok(Program {
        artifact,
        bytes,
        origin: file.to_path_buf(),
    })
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
    match cli.command {
        Command::Exec { file, opts } => {
            let bytes = match std::fs::read(&file) {
                Ok(b) => b,
                Err(e) => return fail(format!("cannot read {}: {e}", file.display()), 2),
            };
            let inputs = match parse_inputs(&opts) {
                Ok(i) => i,
                Err(e) => return fail(e, 2),
            };
            let origin = std::fs::canonicalize(&file).unwrap_or(file.clone());
            match bytecode_spec::artifact::load(&bytes) {
                Ok((_, artifact)) => execute(
                    Program {
                        artifact,
                        bytes,
                        origin,
                    },
                    inputs,
                    &opts,
                    None,
                ),
                Err(e) => fail(format!("{}: {e}", file.display()), 1),
            }
        }
        Command::Run {
            file,
            lib_paths,
            opts,
        } => {
            let inputs = match parse_inputs(&opts) {
                Ok(i) => i,
                Err(e) => return fail(e, 2),
            };
            let file = std::fs::canonicalize(&file).unwrap_or(file);
            match compile(&file, &lib_paths) {
                Ok(program) => execute(program, inputs, &opts, None),
                Err(code) => code,
            }
        }
        Command::Resume { run, opts } => resume(&run, &opts),
        Command::Runs { state_dir } => runs(state_dir.as_deref()),
        Command::Inspect {
            run,
            state_dir,
            json,
        } => inspect(state_dir.as_deref(), &run, json),
    }
}
