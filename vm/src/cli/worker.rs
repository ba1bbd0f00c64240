//! The commands of the Postgres store's queue: `submit` enqueues a run, `worker` runs the
//! queue. (Every other command takes the Postgres store through `--store`, like the others.)

use super::args::RunArgs;
use super::{fail, runtime};
use prose_runtime::runner::{RunConfig, StopSignal};
use prose_store::pg::lease::WorkerId;
use prose_store::pg::PgStore;
use prosec::console::Exit;
use prosevm::run::Place;
use prosevm::worker::{self, Ended, WorkerEvent, WorkerOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Connects to the store at `url` with up to `connections` connections.
fn open(rt: &tokio::runtime::Runtime, url: &str, connections: usize) -> Result<PgStore, ExitCode> {
    rt.block_on(PgStore::connect(url, connections))
        .map_err(|e| fail(e, Exit::Unusable))
}

/// A runtime and the store at `url` on it, with a pool of up to `connections`; a failure
/// is reported and becomes the exit code.
fn connected(
    url: &str,
    connections: usize,
) -> Result<(tokio::runtime::Runtime, PgStore), ExitCode> {
    let rt = runtime()?;
    let store = open(&rt, url, connections)?;
    Ok((rt, store))
}

/// `prosevm submit FILE --store URL`: enqueues a run, prints its id.
pub fn submit(url: &str, program: prose_runtime::program::Program, args: &RunArgs) -> ExitCode {
    match args.place().map(|place| place.check_trust(&program.bytes)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return super::run_error(e),
        Err(e) => return fail(e, Exit::Unusable),
    }
    let inputs = match args.inputs_for(&program) {
        Ok(i) => i,
        Err(e) => return fail(e, Exit::Unusable),
    };
    let (settings, options) = match (args.driver(), args.options()) {
        (Ok(s), Ok(o)) => (s, o),
        (Err(e), _) | (_, Err(e)) => return fail(e, Exit::Unusable),
    };
    if let Err(e) = prosevm::run::check_budget(
        &settings,
        &program.artifact,
        options.max_tokens,
        options.max_cost,
    ) {
        return fail(e, Exit::Unusable);
    }
    let (rt, store) = match connected(url, 1) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match rt.block_on(store.submit(&program, inputs, settings, options)) {
        Ok(id) => {
            if prosec::console::Console::json() {
                println!(
                    "{}",
                    serde_json::json!({ "run": id.to_string(), "status": "queued" })
                );
            } else {
                println!("{id}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e, Exit::Failed),
    }
}

/// The flags of `prosevm worker` but its store.
#[derive(clap::Args)]
pub struct WorkerArgs {
    /// Runs driven at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Seconds a claim holds without a heartbeat (renewed every third of it): a worker
    /// silent this long is taken for dead, and its runs are resumed by others.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub lease: f64,
    /// Milliseconds between looks for work when there was none.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub poll_ms: u64,
    /// Where the runs' sessions act (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Where the runs' views are written, under `pg/` (default: `.prose`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Requests in flight at once within one run (default 8).
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// Exit once nothing is left to claim and nothing runs.
    #[arg(long)]
    pub exit_when_idle: bool,
    /// Seconds the runs in progress may go on after SIGTERM or Ctrl-C before they are
    /// interrupted and queued again (0: at once).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub drain: f64,
    /// Say nothing about the runs claimed and ended.
    #[arg(long)]
    pub quiet: bool,
    /// Write no views of the runs (`bindings/`, `state.md` under the state directory's
    /// `pg/`): the store holds everything `inspect` and `report` show, and a worker
    /// without views does only the store's work. Persistent agents' memory is written
    /// either way.
    #[arg(long)]
    pub no_views: bool,
    /// Run only artifacts signed by this public key (repeatable; also `PROSE_TRUST` and
    /// `[trust] keys` in the working directory's prose.toml): a claimed run whose
    /// artifact is unsigned, foreign-signed or altered fails without running.
    #[arg(long, value_name = "KEY.pub")]
    pub trust: Vec<PathBuf>,
}

/// `prosevm worker --store URL`: works until SIGTERM or Ctrl-C (then drains for up to
/// `--drain`; a second one exits at once), or until idle with `--exit-when-idle`.
pub fn worker(url: &str, args: WorkerArgs) -> ExitCode {
    if !(args.lease.is_finite() && args.lease >= 0.3) {
        return fail("--lease must be at least 0.3 seconds", Exit::Unusable);
    }
    let Ok(drain) = Duration::try_from_secs_f64(args.drain) else {
        return fail(
            "--drain must be a number of seconds, 0 or more",
            Exit::Unusable,
        );
    };
    let workdir = match args.workdir.map_or_else(std::env::current_dir, Ok) {
        Ok(d) => std::fs::canonicalize(&d).unwrap_or(d),
        Err(e) => return fail(format!("the working directory: {e}"), Exit::Unusable),
    };
    let trust = match prose_settings::Settings::load(None, &workdir)
        .map_err(|e| e.to_string())
        .and_then(|settings| prosec::ship::keys::trusted(&args.trust, &settings))
    {
        Ok(keys) => keys,
        Err(e) => return fail(e, Exit::Unusable),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let concurrency = args.concurrency.max(1);
    let store = match rt.block_on(worker::connect(url, concurrency)) {
        Ok(s) => s,
        Err(e) => return fail(e, Exit::Unusable),
    };
    let opts = WorkerOptions {
        concurrency,
        lease: Duration::from_secs_f64(args.lease),
        poll: Duration::from_millis(args.poll_ms.max(1)),
        workdir,
        place: Place {
            state_dir: args.state_dir,
            config: RunConfig {
                max_concurrency: args
                    .max_concurrency
                    .unwrap_or(RunConfig::default().max_concurrency),
                ..RunConfig::default()
            },
            trust,
            ..Place::default()
        },
        exit_when_idle: args.exit_when_idle,
        drain,
        views: !args.no_views,
        follower: None,
    };
    let id = WorkerId::new();
    let shutdown = StopSignal::default();
    super::exec::stop_on_signals(
        &rt,
        shutdown.clone(),
        "prosevm worker",
        if drain.is_zero() {
            "stopping: interrupting and releasing the runs held"
        } else {
            "draining: claiming no more runs; those held may finish before they are interrupted and released"
        },
    );
    let quiet = args.quiet;
    if !quiet {
        eprintln!("prosevm worker {id}: working ({concurrency} runs at once)");
    }
    let log = move |e: &WorkerEvent| match e {
        WorkerEvent::Trouble(t) => eprintln!("prosevm worker: {t}"),
        _ if quiet => {}
        WorkerEvent::Claimed { run, epoch } => {
            eprintln!("[worker] claimed run {run} (epoch {})", epoch.0)
        }
        WorkerEvent::Ended { run, how } => match how {
            Ended::Finished => eprintln!("[worker] run {run} finished"),
            Ended::Failed(e) => eprintln!("[worker] run {run} failed: {e}"),
            Ended::Paused => eprintln!("[worker] run {run} paused at its budget"),
            Ended::Waiting => eprintln!("[worker] run {run} waits for an input"),
            Ended::Requeued => eprintln!("[worker] run {run} interrupted and queued again"),
            Ended::Lost(e) => eprintln!("[worker] run {run} let go: {e}"),
        },
    };
    let report = rt.block_on(worker::work(&store, &id, &opts, &shutdown, &log));
    if !quiet {
        eprintln!(
            "prosevm worker {id}: stopped; {} finished, {} failed, paused or waiting, {} queued again, {} let go",
            report.finished, report.failed, report.requeued, report.lost
        );
    }
    ExitCode::SUCCESS
}
