//! `prosevm`: runs OpenProse programs.
//!
//! `prosevm exec prog.pbc` runs a compiled artifact (verified first); `prosevm run
//! prog.prose` compiles in memory and runs. The trace goes to stderr, the outputs to stdout.
//! Exit status: 0 success, 1 runtime error or invalid program, 2 usage or I/O error.

use clap::{Args, Parser, Subcommand, ValueEnum};
use prosevm::driver::mock::{Conditions, Mock, MockOptions, Rule};
use prosevm::machine::{Limits, Machine};
use prosevm::runner::{run, RunConfig};
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
}

#[derive(Args)]
struct RunArgs {
    /// A top-level input, NAME=VALUE (repeatable).
    #[arg(long = "input", value_name = "NAME=VALUE")]
    inputs: Vec<String>,
    /// Top-level inputs from a JSON object.
    #[arg(long = "input-file", value_name = "FILE")]
    input_file: Option<PathBuf>,
    /// Which driver answers sessions (the mock when no provider is configured).
    #[arg(long, value_enum, default_value = "mock")]
    driver: DriverKind,
    /// Trace format (on stderr).
    #[arg(long, value_enum, default_value = "narrate")]
    trace: Trace,
    /// Outputs format (on stdout).
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8)]
    max_concurrency: usize,
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

fn execute(artifact: bytecode_spec::Artifact, args: &RunArgs) -> ExitCode {
    let mut inputs = match parse_inputs(args) {
        Ok(i) => i,
        Err(e) => return fail(e, 2),
    };
    let script: Vec<Rule> = match &args.mock_script {
        None => Vec::new(),
        Some(f) => match std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(s) => s,
            Err(e) => return fail(format!("--mock-script {}: {e}", f.display()), 2),
        },
    };
    if args.mock_inputs {
        let m = &artifact.modules[0];
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
    let mut machine = match Machine::new(Arc::new(artifact), &inputs, limits) {
        Ok(m) => m,
        Err(e) => return fail(e, 1),
    };
    machine.set_trace(args.trace != Trace::Quiet);
    let driver = Arc::new(Mock::new(MockOptions {
        conditions: Some(args.mock_conditions),
        inputs: args.mock_inputs,
        latency: Duration::from_millis(args.mock_latency),
        script,
    }));
    let cfg = RunConfig {
        max_concurrency: args.max_concurrency,
        backoff_unit: Duration::from_millis(args.backoff_unit_ms),
    };
    let trace = args.trace;
    if trace == Trace::Narrate {
        eprintln!("[Program] driver: mock (no provider configured; answers are placeholders)");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start the runtime: {e}"), 2),
    };
    let result = runtime.block_on(run(machine, driver, &cfg, |e| match trace {
        Trace::Narrate => eprintln!("{}", e.narrate()),
        Trace::Json => eprintln!("{}", serde_json::to_string(e).unwrap_or_default()),
        Trace::Quiet => {}
    }));
    match result {
        Ok(outputs) => {
            if trace == Trace::Narrate {
                eprintln!("[Program] Program complete");
            }
            match args.output {
                Output::Json => {
                    let obj: serde_json::Map<String, serde_json::Value> = outputs
                        .iter()
                        .map(|(k, v)| (k.clone(), v.to_json()))
                        .collect();
                    println!("{}", serde_json::Value::Object(obj));
                }
                Output::Text => {
                    for (k, v) in &outputs {
                        println!("{k}: {}", v.display());
                    }
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("runtime error: {e}"), 1),
    }
}

fn compile(file: &Path, lib_paths: &[PathBuf]) -> Result<bytecode_spec::Artifact, ExitCode> {
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
    Ok(prosec::codegen::build(&c, root).0)
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
            match bytecode_spec::artifact::load(&bytes) {
                Ok((_, artifact)) => execute(artifact, &opts),
                Err(e) => fail(format!("{}: {e}", file.display()), 1),
            }
        }
        Command::Run {
            file,
            lib_paths,
            opts,
        } => match compile(&file, &lib_paths) {
            Ok(artifact) => execute(artifact, &opts),
            Err(code) => code,
        },
    }
}
