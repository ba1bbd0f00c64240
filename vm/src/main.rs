//! `prosevm`: runs OpenProse programs.
//!
//! `prosevm exec prog.pbc` runs a compiled artifact (verified first); `prosevm run
//! prog.prose` compiles in memory and runs. The trace goes to stderr, the outputs to stdout.
//! Exit status: 0 success, 1 runtime error or invalid program, 2 usage or I/O error.

use clap::{Args, Parser, Subcommand, ValueEnum};
use prosevm::config::Config;
use prosevm::driver::mock::{Conditions, MockOptions, Rule};
use prosevm::driver::settings::{DriverChoice, DriverKind, DriverSettings};
use prosevm::driver::stdio;
use prosevm::run::rebuild::rebuild_views;
use prosevm::run::record::{ExecOptions, RunRecord, RunStatus};
use prosevm::run::{JournalCheck, Place, Program, Resumed, Resuming, Run, RunError};
use prosevm::runner::RunConfig;
use prosevm::store::{self, RunDir};
use prosevm::trace::Event;
use prosevm::value::Value;
use std::collections::BTreeMap;
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
        /// Go on even if the journal is missing, lost records it held when last closed, or
        /// answers a request twice (keeping each request's first answer).
        #[arg(long)]
        force: bool,
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
        Config::load(self.config.as_deref())
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
            },
        })
    }
}

/// Prints the trace as the run goes.
struct Printer {
    trace: Trace,
}

impl prosevm::runner::Observer for Printer {
    fn event(&mut self, e: &Event) {
        match self.trace {
            Trace::Narrate => eprintln!("{}", e.narrate()),
            Trace::Json => eprintln!("{}", serde_json::to_string(e).unwrap_or_default()),
            Trace::Quiet => {}
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
    let defaults = ExecOptions::default();
    let options = ExecOptions {
        max_iterations: args.max_iterations,
        strict: args.strict,
        max_value_size: args.max_value_size.unwrap_or(defaults.max_value_size),
        max_frame_memory: args.max_frame_memory.unwrap_or(defaults.max_frame_memory),
    };
    match Run::start(&program, inputs, settings, options, &place) {
        Ok(run) => drive(run, args),
        Err(e) => run_error(e),
    }
}

/// Drives `run` with the driver its record names; prints the trace, then the outputs.
fn drive(run: Run, args: &RunArgs) -> ExitCode {
    let settings = run.record().driver.clone();
    let driver = match settings.connect() {
        Ok(d) => Arc::new(d),
        Err(e) => return fail(e, 2),
    };
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start the runtime: {e}"), 2),
    };
    let mut printer = Printer { trace: args.trace };
    let result = match runtime.block_on(run.drive(driver, &mut printer)) {
        Ok(r) => r,
        Err(e) => return fail(e, 2),
    };
    match result {
        Ok(outputs) => {
            if args.trace == Trace::Narrate {
                eprintln!("[Program] Program complete");
            }
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
        Err(e) => {
            if stdio {
                stdio::send(&serde_json::json!({
                    "type": "done",
                    "run": id,
                    "status": "failed",
                    "error": e.to_string(),
                }));
            }
            fail(format!("runtime error: {e}"), 1)
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
    if record.status != RunStatus::Finished {
        if let Err(e) = same_program(&record) {
            return fail(format!("run {}: {e}", dir.id), 1);
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
    let how = Resuming {
        driver,
        journal: if force {
            JournalCheck::Force
        } else {
            JournalCheck::Strict
        },
        max_value_size: args.max_value_size,
        max_frame_memory: args.max_frame_memory,
    };
    match Run::resume_with(dir, &place, how) {
        Ok(Resumed::Finished(record)) => {
            eprintln!("run {} already finished", record.id);
            print_outputs(&record.outputs.unwrap_or_default(), args.output);
            ExitCode::SUCCESS
        }
        Ok(Resumed::Ready(run)) => drive(*run, args),
        Err(e) => run_error(e),
    }
}

/// Checks that the program a run started with is still what its origin holds.
fn same_program(record: &RunRecord) -> Result<(), String> {
    let origin = &record.origin;
    let current = if origin.extension().is_some_and(|x| x == "prose") {
        compile(origin, &[]).ok().map(|p| p.bytes)
    } else {
        std::fs::read(origin).ok()
    };
    match current {
        Some(bytes) if store::sha256_hex(&bytes) == record.artifact_sha256 => Ok(()),
        Some(_) => Err(format!(
            "{} has changed since the run started; refusing to resume a different program",
            origin.display()
        )),
        None => Err(format!("cannot read its program {}", origin.display())),
    }
}

fn runs(state_dir: Option<&Path>) -> ExitCode {
    println!(
        "{:24} {:20} {:11} {:20} answered",
        "id", "program", "status", "started"
    );
    for dir in RunDir::list(state_dir) {
        let (program, status, started, answered) = match dir.record() {
            Ok(r) => (
                r.program.clone(),
                r.status.as_str().to_string(),
                r.started.clone(),
                dir.read_journal(&r)
                    .map_or("?".to_string(), |c| c.records.len().to_string()),
            ),
            Err(_) => ("?".into(), "unreadable".into(), "?".into(), "?".into()),
        };
        println!(
            "{:24} {:20} {:11} {:20} {answered}",
            dir.id, program, status, started
        );
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
        let mut err = StandardStream::stderr(ColorChoice::Auto);
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
    match cli.command {
        Command::Exec { file, opts } => match load(&file) {
            Ok(program) => start(program, &opts),
            Err(code) => code,
        },
        Command::Run {
            file,
            lib_paths,
            opts,
        } => {
            let file = std::fs::canonicalize(&file).unwrap_or(file);
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
        Command::Resume { run, force, opts } => resume(&run, force, &opts),
        Command::Runs { state_dir } => runs(state_dir.as_deref()),
        Command::Inspect {
            run,
            state_dir,
            json,
        } => inspect(state_dir.as_deref(), &run, json),
    }
}
