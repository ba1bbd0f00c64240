//! `prosevm`: runs OpenProse programs.
//!
//! `prosevm exec prog.pbc` runs a compiled artifact (verified first); `prosevm run
//! prog.prose` compiles in memory and runs. The trace goes to stderr, the outputs to stdout.
//! Exit status: 0 success, 1 runtime error or invalid program, 2 usage or I/O error.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use cli::args::Trace;
use cli::args::{parse_listed_status, RunArgs, StoreArg};
use cli::{build, exec, memo, runs, serve, worker};
use prose_runtime::record::RunStatus;
use prosec::console::{Color, Console, Exit, Format};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

mod cli;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "prosevm", version, about = "The OpenProse virtual machine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How results and errors are printed: `text` for people, `json` (one document on
    /// stdout, errors included) for tools.
    #[arg(long, value_enum, default_value = "text", global = true)]
    format: Format,
    /// The same as `--format json` (the older spelling).
    #[arg(long, global = true, hide = true)]
    json: bool,
    /// Colour in diagnostics: `auto` (only on a terminal, and not when NO_COLOR is set),
    /// `always` or `never`.
    #[arg(long, value_enum, default_value = "auto", global = true)]
    color: Color,
}

#[derive(Subcommand)]
enum Command {
    /// Run a compiled `.pbc` artifact.
    Exec {
        /// The artifact.
        file: PathBuf,
        /// The store keeping the run: a directory (or file:DIR), sqlite:PATH, or a
        /// postgres:// URL (default: the file store under --state-dir).
        #[arg(long, value_name = "STORE")]
        store: Option<String>,
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
        /// Refuse to run a program the compiler warns about (the warnings are shown
        /// either way, before the run starts).
        #[arg(long)]
        deny_warnings: bool,
        /// The store keeping the run: a directory (or file:DIR), sqlite:PATH, or a
        /// postgres:// URL (default: the file store under --state-dir).
        #[arg(long, value_name = "STORE")]
        store: Option<String>,
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
    /// to `--concurrency` at once, until stopped (SIGTERM or Ctrl-C: no more runs are
    /// claimed, those in progress go on for up to `--drain` seconds, then the rest are
    /// interrupted and queued again; a second signal exits at once).
    Worker {
        /// The store: a postgres:// URL.
        #[arg(long, env = "PROSE_STORE", hide_env_values = true, value_name = "URL")]
        store: String,
        #[command(flatten)]
        args: worker::WorkerArgs,
    },
    /// Describe a `.pbc` artifact before running it: its program, inputs and outputs,
    /// agents (models, permissions, skills), MCP servers, bundled skills and programs with
    /// their hashes, cost bounds, and its signature.
    Info {
        /// The artifact.
        file: PathBuf,
        /// A public key to check the signature against (repeatable; also `PROSE_TRUST` and
        /// `[trust] keys` in prose.toml).
        #[arg(long, value_name = "KEY.pub")]
        trust: Vec<PathBuf>,
        /// The `prose.toml` to price the cost bounds and name MCP servers with (default: the
        /// project's, found upward from the artifact's directory, over the user's).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Serve shipped workflows over HTTP: upload artifacts, start runs with this server's
    /// driver, follow their events, answer them, and a web page at `/` (see
    /// docs/service.md). Runs live in the store; SIGTERM stops them, to be taken up at the next
    /// start, as are runs a crash left unfinished. `--max-concurrency` counts the requests in
    /// flight over all the runs it drives.
    Serve {
        /// The address to listen on, HOST:PORT (a non-loopback one needs --token-file).
        #[arg(long, value_name = "HOST:PORT")]
        listen: String,
        #[command(flatten)]
        store: StoreArg,
        /// A file holding the token every API request must bear (Authorization: Bearer).
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// Runs driven at once; more wait their turn (started and durable).
        #[arg(long, default_value_t = 4)]
        max_runs: usize,
        /// HTTP requests handled at once over every route but /healthz; more wait their
        /// turn. A request counts once its body has come in, until its answer starts: an
        /// event stream only until it starts streaming. As many bodies are read at once.
        #[arg(long, default_value_t = 64)]
        max_requests: usize,
        /// Seconds to wait for the next piece of a request's body; a body must also come
        /// at 64 KiB a second or more. Slower, the request is refused with 408.
        #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
        body_timeout: f64,
        /// Connections one client address may hold at once; one more is closed as soon as
        /// it is accepted.
        #[arg(long, value_name = "N", default_value_t = 256)]
        max_client_connections: usize,
        /// With a Postgres store, also work its queue like `prosevm worker`: claim runs
        /// submitted there and runs whose worker died (up to --max-runs of them at once), and
        /// follow them like the server's own.
        #[arg(long)]
        worker: bool,
        /// Also serve the library's workflows as MCP tools at /mcp (streamable HTTP, behind
        /// the same token): each call runs one and answers with its outputs.
        #[arg(long)]
        mcp: bool,
        /// A URL under which runs and schedules may name a webhook, posted to when a run
        /// finishes, fails, waits or pauses (repeatable; scheme, host and port as given, the
        /// path or under it). Needs --webhook-secret-file.
        #[arg(long, value_name = "URL")]
        webhook_allow: Vec<String>,
        /// A file holding the secret webhook deliveries are signed with (HMAC-SHA256, as
        /// Standard Webhooks signs; `whsec_` and base64, or any text of 16 characters or
        /// more).
        #[arg(long, value_name = "FILE")]
        webhook_secret_file: Option<PathBuf>,
        /// Seconds a webhook delivery is tried for, from its run's end, before it is given
        /// up.
        #[arg(long, value_name = "SECONDS", default_value_t = 86400.0)]
        webhook_retry_for: f64,
        #[command(flatten)]
        opts: RunArgs,
    },
    /// Continue an interrupted run (by id or path) without asking anything twice.
    Resume {
        /// The run: its id, a prefix of it, its directory, or `latest` (the default).
        run: Option<String>,
        #[command(flatten)]
        store: StoreArg,
        /// Go on although something changed: an edited program (answers are kept where the
        /// edited program asks the same question from an unchanged statement, the rest is
        /// asked again, listed), or a journal that is missing, lost records it held when
        /// last closed, or answers a request twice (each request's first answer is kept).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        opts: RunArgs,
    },
    /// Start a new run of a run's program and inputs that reuses its answers (up to a
    /// request, with --from) and asks this driver (the flags', else the run's) for the
    /// rest: compare models on one program without paying twice for what they share.
    Fork {
        /// The run to fork (its id, a prefix of it, its directory, or `latest`); it is only
        /// read.
        run: String,
        /// Reuse the answers journaled before this request was first answered (an id as
        /// `inspect` and the trace show it, e.g. `0:3`); without it, every answer.
        #[arg(long, value_name = "REQUEST-ID")]
        from: Option<String>,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        opts: RunArgs,
    },
    /// Run the tests beside programs (`NAME.test.toml`): each case's run answered by the
    /// mock, a mock script or a recorded tape, and its checks; exit status 1 when one fails
    /// (see docs/testing-workflows.md).
    Test {
        #[command(flatten)]
        args: cli::test::TestArgs,
    },
    /// Run a program over a dataset against a real model and score each row with the
    /// eval file's checks and judges; keep the eval in the store, compare it with a
    /// baseline (exit status 1 when a score dropped).
    Eval {
        #[command(flatten)]
        args: cli::eval::EvalArgs,
    },
    /// List the evals a store keeps, or show one (and write its page with -o).
    Evals {
        #[command(flatten)]
        args: cli::eval::EvalsArgs,
    },
    /// Show where two runs' answers and outputs differ, request by request (exit status 1
    /// when they differ, as diff does).
    Diff {
        /// The first run (its id, a prefix of it, its directory, or `latest`).
        a: String,
        /// The second run.
        b: String,
        #[command(flatten)]
        at: runs::At,
        /// Characters of each answer shown on its line.
        #[arg(long, default_value_t = 100)]
        width: usize,
    },
    /// Give a waiting run what it waits for: the mid-program inputs no one could give when
    /// it asked, and the approvals of tool calls no one was there to allow (it then goes on
    /// under `prosevm serve`, or with `prosevm resume`).
    #[command(group(clap::ArgGroup::new("given").required(true).multiple(true).args(["answers", "approve", "deny"])))]
    Answer {
        /// The run: its id, a prefix of it, its directory, or `latest`.
        run: String,
        /// An input's answer, NAME=VALUE.
        #[arg(value_name = "NAME=VALUE")]
        answers: Vec<String>,
        /// Allow the tool call that approval ID waits for (repeatable; the ids are in
        /// `prosevm runs` and `prosevm inspect`).
        #[arg(long = "approve", value_name = "ID")]
        approve: Vec<String>,
        /// Refuse the tool call that approval ID waits for: the model is told a person said
        /// no (repeatable).
        #[arg(long = "deny", value_name = "ID")]
        deny: Vec<String>,
        /// With --approve: allow every later call needing the same capability in that
        /// session too, as answering "always" at a terminal does.
        #[arg(long, requires = "approve")]
        always: bool,
        #[command(flatten)]
        at: runs::At,
    },
    /// List runs: id, program, status, start time, answers journaled; or prune them.
    Runs {
        /// Where runs live (default: `.prose` in the working directory).
        #[arg(long, value_name = "DIR", global = true)]
        state_dir: Option<PathBuf>,
        /// The store whose runs to list or prune: a directory (or file:DIR),
        /// sqlite:PATH, or a postgres:// URL (default: the file store under --state-dir).
        #[arg(
            long,
            env = "PROSE_STORE",
            hide_env_values = true,
            value_name = "STORE",
            global = true
        )]
        store: Option<String>,
        /// Only runs with this status: running, interrupted, paused, waiting, finished or
        /// failed, and on the Postgres store queued (repeatable).
        #[arg(long = "status", value_name = "STATUS", value_parser = parse_listed_status)]
        statuses: Vec<String>,
        #[command(subcommand)]
        action: Option<RunsAction>,
    },
    /// Show how many model answers the memo beside the runs keeps (what runs under `--memo`
    /// answer from, without a call), or empty it.
    Memo {
        /// Where runs live (default: `.prose` in the working directory); the file store's
        /// memo is its `memo/` directory.
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArg,
        /// Remove every answer it keeps.
        #[arg(long)]
        clear: bool,
    },
    /// Write a run's report: one self-contained HTML page with the timeline of its requests
    /// (parallel branches side by side), its program's source, and every session in full.
    Report {
        /// The run: its id, a prefix of it, its directory, or `latest`.
        run: String,
        #[command(flatten)]
        at: runs::At,
        /// The file to write (default: stdout).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Show a run's record, its bindings (those bound inside block calls too, rebuilt from
    /// the journal) and its state.md.
    Inspect {
        /// The run: its id, a prefix of it, its directory, or `latest`.
        run: String,
        #[command(flatten)]
        at: runs::At,
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
    /// live lease) holds is never removed; its journal goes with it.
    Prune {
        /// Only runs that started at least this long ago (`7d`, `12h`, `30m`, `1d12h`).
        #[arg(long, value_name = "AGE", value_parser = cli::args::parse_age)]
        older_than: Option<Duration>,
        /// Only runs with this status (repeatable; default: finished and failed).
        #[arg(long = "status", value_name = "STATUS", value_parser = cli::args::parse_status)]
        statuses: Vec<RunStatus>,
        /// Say what would be removed, and remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// The run flags a command takes with the others but has no use for, and why: hidden from
/// its help, and refused when given.
const UNUSED: [(&str, &[&str], &str); 2] = [
    (
        "submit",
        &["trace", "no_progress", "no_input", "state_dir"],
        "a worker drives the run, with its own trace, terminal and views",
    ),
    (
        "serve",
        &["inputs", "input_file", "trace", "no_progress", "no_input"],
        "each run brings its own inputs (POST /v1/runs), its events go to its stream, and a server asks no terminal",
    ),
];

/// The command line both parsed and shown in `--help`: the exit statuses at the end of
/// every page, and the run flags a command has no use for hidden.
fn command_line() -> clap::Command {
    let mut cmd = prosec::console::with_exit_table(Cli::command());
    for (name, ids, _) in UNUSED {
        cmd = cmd.mut_subcommand(name, |sub| {
            ids.iter()
                .fold(sub, |sub, id| sub.mut_arg(*id, |a| a.hide(true)))
        });
    }
    cmd
}

/// A usage error when the command line gives a flag its command has no use for.
fn unused_given(cmd: &clap::Command, matches: &clap::ArgMatches) -> Option<clap::Error> {
    let (name, sub) = matches.subcommand()?;
    let (_, ids, why) = UNUSED.iter().find(|(n, _, _)| *n == name)?;
    let id = ids
        .iter()
        .find(|id| sub.value_source(id) == Some(clap::parser::ValueSource::CommandLine))?;
    let flag = cmd
        .find_subcommand(name)
        .and_then(|s| s.get_arguments().find(|a| a.get_id() == *id))
        .and_then(|a| a.get_long())
        .unwrap_or(id);
    let mut shown = cmd
        .find_subcommand(name)
        .cloned()
        .unwrap_or_else(|| cmd.clone());
    Some(shown.error(
        clap::error::ErrorKind::ArgumentConflict,
        format!("`prosevm {name}` has no use for --{flag}: {why}"),
    ))
}

fn main() -> ExitCode {
    cli::pipe::end_quietly_when_the_reader_goes();
    let words: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json = prosec::console::json_asked(&words);
    let command = command_line();
    let parsed = command
        .clone()
        .try_get_matches_from(&words)
        .and_then(|m| Cli::from_arg_matches(&m).map(|c| (c, m)));
    let (mut cli, matches) = match parsed {
        Ok(c) => c,
        Err(e) => return prosec::console::usage_error(e, json),
    };
    if let Some(e) = unused_given(&command, &matches) {
        return prosec::console::usage_error(e, json);
    }
    if let (Some(opts), Some((_, sub))) = (cli.command.run_args_mut(), matches.subcommand()) {
        opts.given = sub
            .ids()
            .filter(|id| {
                sub.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
            })
            .map(|id| id.to_string())
            .collect();
    }
    let format = if cli.json { Format::Json } else { cli.format };
    Console::set(format, cli.color);
    if cli
        .command
        .run_args()
        .is_some_and(|o| o.trace == Trace::Json)
    {
        cli::trace_json();
    }
    // Still one thread: the keys leave the environment before anything can start a child.
    prose_agent::secrets::take();
    let json = Console::json();
    match cli.command {
        Command::Exec {
            file,
            store,
            mut opts,
        } => {
            opts.program_dir = build::dir_of(&file);
            opts.store = store;
            match build::load(&file, &opts) {
                Ok(program) => exec::start(program, &opts),
                Err(code) => code,
            }
        }
        Command::Run {
            file,
            lib_paths,
            deny_warnings,
            store,
            mut opts,
        } => {
            let file = std::fs::canonicalize(&file).unwrap_or(file);
            opts.program_dir = build::dir_of(&file);
            opts.store = store;
            let program =
                if build::is_artifact(&file) || opts.trusted_keys().is_ok_and(|k| !k.is_empty()) {
                    build::load(&file, &opts)
                } else {
                    let dry = matches!(
                        opts.driver(),
                        Ok(prose_runtime::driver::settings::DriverSettings::Mock(_))
                    );
                    let warnings = if deny_warnings {
                        build::Warnings::Deny
                    } else {
                        build::Warnings::Show
                    };
                    build::compile(&file, &lib_paths, dry, warnings)
                };
            match program {
                Ok(program) => exec::start(program, &opts),
                Err(code) => code,
            }
        }
        Command::Submit {
            file,
            store,
            mut opts,
        } => {
            opts.program_dir = build::dir_of(&file);
            match build::load(&file, &opts) {
                Ok(program) => worker::submit(&store, program, &opts),
                Err(code) => code,
            }
        }
        Command::Worker { store, args } => worker::worker(&store, args),
        Command::Info {
            file,
            trust,
            config,
        } => match prosec::info::of_file(&file, &trust, config.as_deref()) {
            Ok(info) => prosec::info::show("prosevm", &info),
            Err((e, status)) => cli::fail(e, Exit::from_code(status)),
        },
        Command::Serve {
            listen,
            store,
            token_file,
            max_runs,
            max_requests,
            body_timeout,
            max_client_connections,
            worker,
            mcp,
            webhook_allow,
            webhook_secret_file,
            webhook_retry_for,
            mut opts,
        } => {
            opts.program_dir = PathBuf::from(".");
            serve::serve(
                serve::ServeArgs {
                    listen,
                    store: store.url,
                    token_file,
                    max_runs,
                    max_requests,
                    body_timeout,
                    max_client_connections,
                    worker,
                    mcp,
                    webhook_allow,
                    webhook_secret_file,
                    webhook_retry_for,
                },
                &opts,
            )
        }
        Command::Resume {
            run,
            store,
            force,
            mut opts,
        } => {
            opts.store = store.url;
            exec::resume(run.as_deref(), force, &opts)
        }
        Command::Fork {
            run,
            from,
            store,
            mut opts,
        } => {
            opts.store = store.url;
            exec::fork(&run, from.as_deref(), &opts)
        }
        Command::Diff { a, b, at, width } => runs::diff(&at, &a, &b, json, width),
        Command::Test { args } => cli::test::test(args),
        Command::Eval { args } => cli::eval::eval(args),
        Command::Evals { args } => cli::eval::evals(args),
        Command::Runs {
            state_dir,
            store,
            statuses,
            action,
        } => {
            let at = runs::At::new(store, state_dir);
            match action {
                Some(RunsAction::Prune {
                    older_than,
                    statuses,
                    dry_run,
                }) => runs::prune(
                    &at,
                    prose_store::PruneRule {
                        older_than,
                        statuses,
                        dry_run,
                    },
                ),
                None => runs::runs(&at, json, &statuses),
            }
        }
        Command::Memo {
            state_dir,
            store,
            clear,
        } => memo::memo(store.url.as_deref(), state_dir.as_deref(), clear, json),
        Command::Answer {
            run,
            answers,
            approve,
            deny,
            always,
            at,
        } => runs::answer(
            &at,
            &run,
            &answers,
            &runs::Approvals {
                approve,
                deny,
                always,
            },
        ),
        Command::Report { run, at, output } => runs::report(&at, &run, output.as_deref()),
        Command::Inspect { run, at, session } => match session {
            Some(id) => runs::inspect_session(&at, &run, &id, json),
            None => runs::inspect(&at, &run, json),
        },
    }
}

impl Command {
    /// The run flags of a command that runs programs.
    fn run_args_mut(&mut self) -> Option<&mut RunArgs> {
        match self {
            Command::Exec { opts, .. }
            | Command::Run { opts, .. }
            | Command::Submit { opts, .. }
            | Command::Serve { opts, .. }
            | Command::Resume { opts, .. }
            | Command::Fork { opts, .. } => Some(opts),
            _ => None,
        }
    }

    fn run_args(&self) -> Option<&RunArgs> {
        match self {
            Command::Exec { opts, .. }
            | Command::Run { opts, .. }
            | Command::Submit { opts, .. }
            | Command::Serve { opts, .. }
            | Command::Resume { opts, .. }
            | Command::Fork { opts, .. } => Some(opts),
            _ => None,
        }
    }
}
