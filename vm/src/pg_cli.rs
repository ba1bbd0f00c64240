//! The commands on a Postgres store: `submit`, `worker`, and `runs`, `inspect` and `resume`
//! with `--store`. Arguments are parsed and results rendered here; the work is the
//! library's ([`prosevm::store::pg`], [`prosevm::worker`]).

use super::{connect, drive, fail, parse_inputs, print_outputs, RunArgs};
use prose_machine::value::Value;
use prose_runtime::observe::otel::Export;
use prose_runtime::runner::{RunConfig, Stop};
use prosevm::run::{Place, Resuming, Run};
use prosevm::store::pg::lease::{self, WorkerId};
use prosevm::store::pg::PgStore;
use prosevm::worker::{self, Ended, WorkerEvent, WorkerOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The runtime the store's connections live on.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| fail(format!("cannot start the runtime: {e}"), 2))
}

/// Connects to the store at `url` with up to `connections` connections.
fn open(rt: &tokio::runtime::Runtime, url: &str, connections: usize) -> Result<PgStore, ExitCode> {
    rt.block_on(PgStore::connect(url, connections))
        .map_err(|e| fail(e, 2))
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
    let mut inputs = match parse_inputs(args) {
        Ok(i) => i,
        Err(e) => return fail(e, 2),
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
    let (settings, options) = match (args.driver(), args.options()) {
        (Ok(s), Ok(o)) => (s, o),
        (Err(e), _) | (_, Err(e)) => return fail(e, 2),
    };
    let (rt, store) = match connected(url, 1) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match rt.block_on(store.submit(&program, inputs, settings, options)) {
        Ok(id) => {
            println!("{id}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e, 1),
    }
}

/// The flags of `prosevm worker` (see its help).
pub struct WorkerArgs {
    /// Runs driven at once.
    pub concurrency: usize,
    /// Seconds a claim holds without a heartbeat.
    pub lease: f64,
    /// Milliseconds between looks for work when there was none.
    pub poll_ms: u64,
    /// Where the runs' sessions act.
    pub workdir: Option<PathBuf>,
    /// Where the runs' views go (under `pg/`).
    pub state_dir: Option<PathBuf>,
    /// Requests in flight at once within one run.
    pub max_concurrency: Option<usize>,
    /// Return once idle.
    pub exit_when_idle: bool,
    /// No line per run claimed and ended.
    pub quiet: bool,
    /// Keep no views of the runs.
    pub no_views: bool,
}

/// `prosevm worker --store URL`: works until SIGTERM or Ctrl-C (a second one exits at
/// once), or until idle with `--exit-when-idle`.
pub fn worker(url: &str, args: WorkerArgs) -> ExitCode {
    if !(args.lease.is_finite() && args.lease >= 0.3) {
        return fail("--lease must be at least 0.3 seconds", 2);
    }
    let workdir = match args.workdir.map_or_else(std::env::current_dir, Ok) {
        Ok(d) => std::fs::canonicalize(&d).unwrap_or(d),
        Err(e) => return fail(format!("the working directory: {e}"), 2),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let concurrency = args.concurrency.max(1);
    let store = match rt.block_on(worker::connect(url, concurrency)) {
        Ok(s) => s,
        Err(e) => return fail(e, 2),
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
            ..Place::default()
        },
        exit_when_idle: args.exit_when_idle,
        views: !args.no_views,
    };
    let id = WorkerId::new();
    let shutdown = Stop::default();
    crate::stop_on_signals(
        &rt,
        shutdown.clone(),
        "prosevm worker",
        "stopping: interrupting and releasing the runs held",
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
            Ended::Requeued => eprintln!("[worker] run {run} interrupted and queued again"),
            Ended::Lost(e) => eprintln!("[worker] run {run} let go: {e}"),
        },
    };
    let report = rt.block_on(worker::work(&store, &id, &opts, &shutdown, &log));
    if !quiet {
        eprintln!(
            "prosevm worker {id}: stopped; {} finished, {} failed or paused, {} queued again, {} let go",
            report.finished, report.failed, report.requeued, report.lost
        );
    }
    ExitCode::SUCCESS
}

/// `prosevm runs --store URL`.
pub fn runs(url: &str, json: bool, statuses: &[String]) -> ExitCode {
    let (rt, store) = match connected(url, 1) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rows = match rt.block_on(store.list()) {
        Ok(r) => r,
        Err(e) => return fail(e, 1),
    };
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|r| statuses.is_empty() || statuses.contains(&r.status))
        .collect();
    if json {
        match serde_json::to_string(&rows) {
            Ok(text) => println!("{text}"),
            Err(e) => return fail(e, 2),
        }
        return ExitCode::SUCCESS;
    }
    println!(
        "{:24} {:20} {:11} {:20} {:>8} {:>5}  worker",
        "id", "program", "status", "submitted", "answered", "epoch"
    );
    for r in rows {
        let holder = match (&r.owner, r.lease_left) {
            (Some(o), Some(left)) if left >= 0.0 => format!("{o} ({left:.0} s left)"),
            (Some(o), _) => format!("{o} (lease expired)"),
            _ => String::new(),
        };
        println!(
            "{:24} {:20} {:11} {:20} {:>8} {:>5}  {holder}",
            r.id, r.program, r.status, r.submitted, r.answered, r.epoch
        );
    }
    ExitCode::SUCCESS
}

/// `prosevm runs prune --store URL ...`: removes the runs `rule` selects (ended runs by
/// default: `finished` and `failed`), each with its journal, keeping any a worker holds.
pub fn prune(url: &str, rule: prosevm::housekeeping::PruneRule) -> ExitCode {
    use prosevm::housekeeping::Pruned;
    if let Err(code) = crate::check_prune_rule(&rule) {
        return code;
    }
    let (rt, store) = match connected(url, 1) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let done = match rt.block_on(store.prune(&rule.statuses(), rule.older_than, rule.dry_run)) {
        Ok(d) => d,
        Err(e) => return fail(e, 1),
    };
    let (mut removed, mut kept) = (0, 0);
    for p in &done {
        match p {
            Pruned::Removed(r) | Pruned::WouldRemove(r) => {
                removed += 1;
                let verb = if rule.dry_run {
                    "would remove"
                } else {
                    "removed"
                };
                println!(
                    "{verb} {} ({}, {}, submitted {})",
                    r.id, r.program, r.status, r.submitted
                );
            }
            Pruned::Kept(r, why) => {
                kept += 1;
                println!("kept {}: {why}", r.id);
            }
        }
    }
    let verb = if rule.dry_run {
        "would be removed"
    } else {
        "removed"
    };
    println!("{removed} run(s) {verb}, {kept} kept");
    ExitCode::SUCCESS
}

/// `prosevm report RUN --store URL [-o FILE]`: the run's HTML report, from its record,
/// artifact and journal in the store.
pub fn report(url: &str, run: &str, output: Option<&std::path::Path>) -> ExitCode {
    let (rt, store) = match connected(url, 1) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let loaded = rt.block_on(async {
        let stored = store.run(run).await?;
        let bytes = store.artifact(&stored.record.artifact_sha256).await?;
        let replies = store.journal(run).await?;
        Ok::<_, prosevm::store::pg::PgError>((stored.record, bytes, replies))
    });
    let (record, bytes, replies) = match loaded {
        Ok(parts) => parts,
        Err(e @ prosevm::store::pg::PgError::NoRun(_)) => return fail(e, 2),
        Err(e) => return fail(e, 1),
    };
    let report = match prosevm::report::Report::from_parts(record, bytes, replies) {
        Ok(r) => r,
        Err(e) => return fail(format!("run {run}: {e}"), 1),
    };
    let page = prosevm::report::html::render(&report);
    match output {
        None => print!("{page}"),
        Some(path) => {
            if let Err(e) = std::fs::write(path, page) {
                return fail(format!("cannot write {}: {e}", path.display()), 2);
            }
            eprintln!(
                "prosevm: report of run {run} ({} requests) written to {}",
                report.entries.len(),
                path.display()
            );
        }
    }
    ExitCode::SUCCESS
}

/// `prosevm inspect RUN --store URL`: the run's record, its row and its journal's length;
/// with `--session`, that session's exchange from the journal.
pub fn inspect(url: &str, run: &str, json: bool, session: Option<&str>) -> ExitCode {
    let (rt, store) = match connected(url, 1) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let stored = match rt.block_on(store.run(run)) {
        Ok(r) => r,
        Err(e @ prosevm::store::pg::PgError::NoRun(_)) => return fail(e, 2),
        Err(e) => return fail(e, 1),
    };
    if let Some(id) = session {
        let replies = match rt.block_on(store.journal(run)) {
            Ok(r) => r,
            Err(e) => return fail(e, 1),
        };
        let want: prose_machine::protocol::RequestId = match id.parse() {
            Ok(id) => id,
            Err(e) => return fail(e, 2),
        };
        let found: Vec<_> = replies
            .iter()
            .filter(|r| r.id == want || r.id.whole() == want)
            .collect();
        if found.is_empty() {
            return fail(format!("run {run} recorded nothing under the id {id}"), 1);
        }
        for r in found {
            println!("{}", serde_json::to_string(r).unwrap_or_default());
        }
        return ExitCode::SUCCESS;
    }
    let mut view = match serde_json::to_value(&stored.record) {
        Ok(v) => v,
        Err(e) => return fail(e, 2),
    };
    view["status"] = stored.row.status.clone().into();
    view["answered"] = stored.row.answered.into();
    view["epoch"] = stored.row.epoch.into();
    view["worker"] = stored.row.owner.clone().into();
    view["lease_left"] = stored.row.lease_left.into();
    view["store"] = "postgres".into();
    if json {
        println!("{view}");
    } else {
        println!(
            "{}",
            serde_json::to_string_pretty(&view).unwrap_or_default()
        );
    }
    ExitCode::SUCCESS
}

/// `prosevm resume RUN --store URL`: claims the run (refused while a worker's lease on it
/// holds) and drives it here, like a resume from the file store; a stop leaves it
/// interrupted.
pub fn resume(url: &str, run: &str, args: &RunArgs) -> ExitCode {
    let (rt, store) = match connected(url, 3) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let worker = WorkerId::new();
    let lease_for = Duration::from_secs(30);
    let claim = match rt.block_on(lease::claim_run(&store, run, &worker, lease_for)) {
        Ok(Some(c)) => c,
        Ok(None) => {
            eprintln!("run {run} already finished");
            let record = match rt.block_on(store.run(run)) {
                Ok(r) => r.record,
                Err(e) => return fail(e, 1),
            };
            print_outputs(&record.outputs.unwrap_or_default(), args.output);
            return ExitCode::SUCCESS;
        }
        Err(e @ prosevm::store::pg::PgError::NoRun(_)) => return fail(e, 2),
        Err(e) => return fail(e, 1),
    };
    let driver = match args.driver {
        None => None,
        Some(_) => match args.driver() {
            Ok(d) => Some(d),
            Err(e) => return fail(e, 2),
        },
    };
    let (place, inputs, export) = match (args.place(), parse_inputs(args), Export::from_env()) {
        (Ok(p), Ok(i), Ok(x)) => (p, i, x),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return fail(e, 2),
    };
    let how = Resuming {
        driver,
        inputs,
        max_value_size: args.max_value_size,
        max_frame_memory: args.max_frame_memory,
        ..Resuming::default()
    };
    let workdir = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => return fail(format!("the working directory: {e}"), 2),
    };
    let taken = rt.block_on(Run::take_up_claimed(
        claim.clone(),
        workdir,
        true,
        how,
        &place,
    ));
    let run = match taken {
        Ok(r) => r,
        Err(e) => {
            // Given back as it was, for another resume or a worker.
            let _ = rt.block_on(claim.release());
            return super::run_error(e);
        }
    };
    // The lease is renewed while the run goes on; if another process claims the run, this
    // one stops (its writes would be refused).
    rt.spawn(worker::keep_lease(
        claim.clone(),
        lease_for,
        run.stop_handle(),
        |e| eprintln!("prosevm: warning: heartbeat: {e}"),
    ));
    match connect(&run.record().driver, run.artifact()) {
        Ok(c) => {
            let code = drive(run, c, args, export);
            drop(rt);
            code
        }
        Err(code) => {
            let _ = rt.block_on(claim.release());
            code
        }
    }
}
