//! A worker of the Postgres store: claims runs that are queued, or whose worker died (its
//! lease expired), up to a number at once; holds them by a lease renewed by a heartbeat;
//! drives each with the same run lifecycle as `prosevm exec` ([`Run::take_up`],
//! [`Run::drive`]), resuming from its journal; and on a stop (SIGTERM) claims nothing more,
//! lets what it runs go on for the drain time, then interrupts the rest, abandoning requests
//! in flight unrecorded, and releases their leases (the runs are queued again for any
//! worker). A stop takes a bounded time: a run that has not let go within a lease after it
//! was interrupted is left to its lease, which expires.
//!
//! Any number of workers, on any number of machines, may serve one store: claims skip runs
//! another worker is claiming, and every write is fenced by the claim's epoch.

use crate::run::{Place, Resuming, Run, RunError};
use prose_runtime::record::{RunFailure, RunRecord, RunStatus};
use prose_runtime::runner::StopSignal;
use prose_store::pg::lease::{self, Claim, Epoch, WorkerId};
use prose_store::pg::{PgError, PgStore, RunId};
use prose_store::HeldRun;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::task::JoinSet;

/// How a worker works.
#[derive(Clone)]
pub struct WorkerOptions {
    /// Runs driven at once.
    pub concurrency: usize,
    /// How long a claim holds without a heartbeat: a worker silent this long is taken for
    /// dead and its runs are claimed by others. The heartbeat renews it every third of it.
    pub lease: Duration,
    /// How long to wait before looking again when there was nothing to claim.
    pub poll: Duration,
    /// The working directory the runs' sessions act in.
    pub workdir: PathBuf,
    /// The state directory (the runs' views go under `pg/`), concurrency of requests within
    /// a run, people and MCP servers.
    pub place: Place,
    /// Return once nothing is left to claim and nothing runs (for benchmarks and batch
    /// jobs); otherwise wait for more until stopped.
    pub exit_when_idle: bool,
    /// How long the runs held may go on once a stop is asked (claiming nothing more) before
    /// they are interrupted and queued again.
    pub drain: Duration,
    /// Write each run's views (`bindings/`, `state.md`) under the state directory's `pg/`;
    /// without them a worker does only the store's work (persistent agents' memory files
    /// are written either way).
    pub views: bool,
    /// Who follows the runs it drives (a server: their events, their stops); none for a
    /// plain worker.
    pub follower: Option<Arc<dyn Follower>>,
}

/// Who follows the runs a worker drives.
pub trait Follower: Send + Sync {
    /// `run` is about to be driven: what sees its events.
    fn follow(&self, run: &Run) -> Box<dyn Following>;
}

/// The following of one run: sees its events, then how its drive ended.
pub trait Following: prose_runtime::observe::Observer {
    /// The drive ended: `status` is how the run stands, `error` why it stopped, if it did,
    /// and `code` that error's stable code.
    fn ended(
        self: Box<Self>,
        status: prose_runtime::record::RunStatus,
        error: Option<&str>,
        code: Option<&str>,
    );
}

/// A following as an observer the run lifecycle can take.
struct Follows<'a>(&'a mut dyn Following);

impl prose_runtime::observe::Observer for Follows<'_> {
    fn event(&mut self, e: &prose_machine::trace::Event) {
        self.0.event(e)
    }
    fn wants_snapshot(&mut self, idle: bool) -> bool {
        self.0.wants_snapshot(idle)
    }
    fn snapshot(&mut self, s: &prose_machine::snapshot::Snapshot) {
        self.0.snapshot(s)
    }
}

impl Default for WorkerOptions {
    fn default() -> WorkerOptions {
        WorkerOptions {
            concurrency: 4,
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(500),
            workdir: PathBuf::from("."),
            place: Place::default(),
            exit_when_idle: false,
            drain: Duration::ZERO,
            views: true,
            follower: None,
        }
    }
}

/// How one claimed run ended for this worker.
#[derive(Clone, Debug, PartialEq)]
pub enum Ended {
    /// It finished with its outputs.
    Finished,
    /// It failed (recorded, resumable by hand).
    Failed(String),
    /// It paused at its budget (recorded, resumable with a larger one).
    Paused,
    /// It waits for inputs no one could give (recorded; resumable once answered).
    Waiting,
    /// The worker stopped it: it is queued again.
    Requeued,
    /// Its claim was lost, or the store failed: nothing more was recorded by this worker.
    Lost(String),
}

/// What a worker did, as it happens.
#[derive(Clone, Debug)]
pub enum WorkerEvent {
    /// A run was claimed.
    Claimed {
        /// The run.
        run: RunId,
        /// The claim's epoch.
        epoch: Epoch,
    },
    /// A claimed run ended for this worker.
    Ended {
        /// The run.
        run: RunId,
        /// How.
        how: Ended,
    },
    /// The store could not be reached for a claim or heartbeat; the worker goes on trying.
    Trouble(String),
}

/// How many runs ended how, for this worker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Runs finished.
    pub finished: usize,
    /// Runs that failed, paused, or wait for an input.
    pub failed: usize,
    /// Runs stopped and queued again.
    pub requeued: usize,
    /// Runs whose claim was lost.
    pub lost: usize,
}

/// Runs held now, with their epochs and stops; shared with the heartbeat, which runs on
/// the runtime's other threads so that busy runs cannot delay it.
type Held = Arc<Mutex<HashMap<RunId, (Epoch, StopSignal)>>>;

/// The runs held (a panic elsewhere does not stop the others from being tracked).
fn lock(held: &Held) -> MutexGuard<'_, HashMap<RunId, (Epoch, StopSignal)>> {
    held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Works for `store` as `worker` until `shutdown` is asked (or, with
/// [`WorkerOptions::exit_when_idle`], until nothing is left): claims runs, drives them, and
/// on shutdown interrupts and releases what it holds. `log` sees what happens. The runs are
/// driven on the current thread; their requests and the heartbeat go to the runtime's
/// other threads (give it some: a busy thread must not delay the heartbeat).
pub async fn work(
    store: &PgStore,
    worker: &WorkerId,
    opts: &WorkerOptions,
    shutdown: &StopSignal,
    log: &dyn Fn(&WorkerEvent),
) -> WorkerReport {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(work_here(Work {
            store,
            worker,
            opts,
            shutdown,
            log,
        }))
        .await
}

/// What [`work`] was given, for the part of it that runs on its local task set.
struct Work<'a> {
    store: &'a PgStore,
    worker: &'a WorkerId,
    opts: &'a WorkerOptions,
    shutdown: &'a StopSignal,
    log: &'a dyn Fn(&WorkerEvent),
}

async fn work_here(work: Work<'_>) -> WorkerReport {
    let Work {
        store,
        worker,
        opts,
        shutdown,
        log,
    } = work;
    let held: Held = Arc::default();
    let (trouble_tx, mut trouble) = tokio::sync::mpsc::unbounded_channel::<String>();
    let heartbeat = tokio::spawn(heartbeat(
        store.clone(),
        worker.clone(),
        opts.lease,
        held.clone(),
        trouble_tx,
    ));
    let mut tasks: JoinSet<(RunId, Ended)> = JoinSet::new();
    let mut report = WorkerReport::default();
    let limit = opts.concurrency.max(1);
    let count = |how: &Ended, report: &mut WorkerReport| match how {
        Ended::Finished => report.finished += 1,
        Ended::Failed(_) | Ended::Paused | Ended::Waiting => report.failed += 1,
        Ended::Requeued => report.requeued += 1,
        Ended::Lost(_) => report.lost += 1,
    };
    loop {
        while let Ok(t) = trouble.try_recv() {
            log(&WorkerEvent::Trouble(t));
        }
        if shutdown.asked() {
            break;
        }
        // Claim while there is room and something to claim.
        let mut idle = false;
        while tasks.len() < limit && !shutdown.asked() {
            match lease::claim_next(store, worker, opts.lease).await {
                Ok(Some(claim)) => {
                    log(&WorkerEvent::Claimed {
                        run: claim.run.clone(),
                        epoch: claim.epoch,
                    });
                    let stop = StopSignal::default();
                    lock(&held).insert(claim.run.clone(), (claim.epoch, stop.clone()));
                    let opts = opts.clone();
                    let held = held.clone();
                    tasks.spawn_local(async move {
                        let run = claim.run.clone();
                        let how = run_claimed(claim, &opts, stop).await;
                        lock(&held).remove(&run);
                        (run, how)
                    });
                }
                Ok(None) => {
                    idle = true;
                    break;
                }
                Err(e) => {
                    log(&WorkerEvent::Trouble(e.to_string()));
                    idle = true;
                    break;
                }
            }
        }
        if idle && tasks.is_empty() && opts.exit_when_idle {
            break;
        }
        let pause = if idle || tasks.len() >= limit {
            opts.poll
        } else {
            Duration::ZERO
        };
        tokio::select! {
            () = shutdown.wait() => break,
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Ok((run, how)) = joined {
                    count(&how, &mut report);
                    log(&WorkerEvent::Ended { run, how });
                }
            }
            () = tokio::time::sleep(pause) => {}
        }
    }
    // Draining: nothing more is claimed; the runs held go on until the drain time is up.
    let ended = |joined: Result<(RunId, Ended), _>, report: &mut WorkerReport| {
        if let Ok((run, how)) = joined {
            count(&how, report);
            log(&WorkerEvent::Ended { run, how });
        }
    };
    let drained = tokio::time::Instant::now() + opts.drain;
    while let Ok(Some(joined)) = tokio::time::timeout_at(drained, tasks.join_next()).await {
        ended(joined, &mut report);
    }
    // Stopping: every run still held is interrupted (what is in flight abandoned,
    // unrecorded) and queued again, releasing its lease. One that has not let go within a
    // lease is left to it: the lease expires and another worker takes the run up.
    for (_, stop) in lock(&held).values() {
        stop.ask();
    }
    let released = tokio::time::Instant::now() + opts.lease;
    while let Ok(Some(joined)) = tokio::time::timeout_at(released, tasks.join_next()).await {
        ended(joined, &mut report);
    }
    if !tasks.is_empty() {
        log(&WorkerEvent::Trouble(format!(
            "{} run(s) did not let go within {} s of being interrupted; left to their leases",
            tasks.len(),
            opts.lease.as_secs_f64()
        )));
        report.lost += tasks.len();
        tasks.abort_all();
    }
    heartbeat.abort();
    report
}

/// Renews the leases of the runs held every third of `lease`; a run whose claim is gone is
/// stopped (its writes would be refused anyway).
async fn heartbeat(
    store: PgStore,
    worker: WorkerId,
    lease: Duration,
    held: Held,
    trouble: tokio::sync::mpsc::UnboundedSender<String>,
) {
    loop {
        tokio::time::sleep(lease / 3).await;
        let runs: Vec<(RunId, Epoch)> = lock(&held)
            .iter()
            .map(|(r, (e, _))| (r.clone(), *e))
            .collect();
        match lease::heartbeat(&store, &worker, &runs, lease).await {
            Ok(kept) => {
                for (run, _) in &runs {
                    if !kept.contains(run) {
                        if let Some((_, stop)) = lock(&held).get(run) {
                            stop.ask();
                        }
                    }
                }
            }
            Err(e) => {
                let _ = trouble.send(format!("heartbeat: {e}"));
            }
        }
    }
}

/// Drives the run `claim` holds to its end (or until `stop`), in `opts`' working
/// directory, with the driver its record names.
pub async fn run_claimed(claim: Claim, opts: &WorkerOptions, stop: StopSignal) -> Ended {
    let mut place = opts.place.clone();
    place.config.stop = stop;
    let how = Resuming {
        workdir: Some(opts.workdir.clone()),
        ..Resuming::default()
    };
    let taken = match claim.store.taken(claim.clone(), opts.views).await {
        Ok(t) => t,
        Err(e) => return Ended::Lost(e.to_string()),
    };
    let run = match Run::take_up(taken, how, &place).await {
        Ok(run) => run,
        Err(not) => {
            return match not.error {
                RunError::Store(e) => Ended::Lost(e.to_string()),
                e => give_up(&*not.held, not.record, e.to_string()).await,
            }
        }
    };
    let record = run.record();
    if let Err(e) = crate::run::check_budget(
        &record.driver,
        run.artifact(),
        record.options.max_tokens,
        record.options.max_cost,
    ) {
        return give_up_run(run, e).await;
    }
    let memo = crate::run::memo_for(&claim.store, run.record().options.memo);
    let driver = match crate::run::connect(&run.record().driver, run.artifact(), memo).await {
        Ok(d) => d,
        Err(e) => return give_up_run(run, e).await,
    };
    let mut following = opts.follower.as_ref().map(|f| f.follow(&run));
    let driven = match following.as_deref_mut() {
        Some(f) => run.drive(driver, &mut Follows(f)).await,
        None => {
            run.drive(driver, &mut |_: &prose_machine::trace::Event| {})
                .await
        }
    };
    let code = match &driven {
        Ok(Err(e)) => Some(e.code.to_string()),
        _ => None,
    };
    let ended = match driven {
        Ok(Ok(_)) => Ended::Finished,
        Ok(Err(e)) if e.code == bytecode_spec::Code::E216 => Ended::Requeued,
        Ok(Err(e)) if e.code == bytecode_spec::Code::E217 => Ended::Paused,
        Ok(Err(e)) if e.code == bytecode_spec::Code::E220 => Ended::Waiting,
        Ok(Err(e)) => Ended::Failed(e.to_string()),
        Err(e) => Ended::Lost(e.to_string()),
    };
    if let Some(f) = following {
        use prose_runtime::record::RunStatus;
        let (status, error) = match &ended {
            Ended::Finished => (RunStatus::Finished, None),
            Ended::Requeued => (RunStatus::Interrupted, None),
            Ended::Paused => (RunStatus::Paused, None),
            Ended::Waiting => (RunStatus::Waiting, None),
            Ended::Failed(e) => (RunStatus::Failed, Some(e.as_str())),
            Ended::Lost(e) => (RunStatus::Running, Some(e.as_str())),
        };
        f.ended(status, error, code.as_deref().filter(|_| error.is_some()));
    }
    ended
}

/// Records that the run `held` holds, whose record was `record`, cannot be run here and why
/// (it failed before its first request), so that no worker claims it again and again.
async fn give_up(held: &dyn HeldRun, mut record: RunRecord, message: String) -> Ended {
    record.status = RunStatus::Failed;
    record.error = Some(RunFailure {
        code: "E215".into(),
        message: message.clone(),
        request: None,
    });
    match held.write_record(&record).await {
        Ok(()) => Ended::Failed(message),
        Err(e) => Ended::Lost(format!("{message}; and {e}")),
    }
}

/// [`give_up`] for a run taken up whose driver cannot serve it.
async fn give_up_run(run: Run, message: String) -> Ended {
    let (held, record) = run.into_held();
    give_up(&*held, record, message).await
}

/// Connects to the store at `url` for a worker running `concurrency` runs at once: a
/// connection for each, one for claims and one for the heartbeat.
pub async fn connect(url: &str, concurrency: usize) -> Result<PgStore, PgError> {
    PgStore::connect(url, concurrency + 2).await
}
