//! The runs a server drives. A run's machine lives on one thread, so every run is started,
//! taken up and driven on the conductor's thread (a local task set on the server's runtime,
//! as the worker drives its runs); its requests and everything else go to the runtime's
//! other threads. Handlers give the conductor orders and find the runs it drives, with their
//! stops and event logs, in a shared table.
//!
//! Runs are started and resumed with the library's run lifecycle ([`Run::start`],
//! [`Run::resume`], [`Run::drive`]) over the server's store: the conductor only decides
//! when, and keeps the logs the streams follow.

use super::events::{EventLog, Writer};
use crate::run::{self, Place, Resumed, Resuming, Run, RunError};
use prose_machine::value::Value;
use prose_runtime::driver::settings::{AnyDriver, DriverSettings};
use prose_runtime::memo::Memoised;
use prose_runtime::program::Program;
use prose_runtime::record::{ExecOptions, RunStatus};
use prose_runtime::runner::StopSignal;
use prose_store::webhooks::Hook;
use prose_store::Store;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinSet;

/// What every run of the server shares: where runs are kept, the driver and options they
/// run with, and how many may be driven at once.
pub struct Setup {
    /// The store keeping the runs.
    pub store: Arc<dyn Store>,
    /// The driver of every run the server starts (its credentials are the server's).
    pub driver: DriverSettings,
    /// How runs execute.
    pub options: ExecOptions,
    /// The state directory, the runner's configuration, people and MCP servers.
    pub place: Place,
    /// Runs driven at once; the others wait their turn, held and durable.
    pub runs: Arc<Semaphore>,
    /// The file naming the runs a shutdown interrupted, to be resumed at the next start.
    pub resume_file: PathBuf,
    /// Told the id of each run whose drive ended, however it stands (the webhooks'
    /// courier), if anyone is.
    pub ended: Option<mpsc::UnboundedSender<String>>,
}

/// A run being driven (or waiting its turn).
#[derive(Clone)]
pub struct Live {
    /// Stops it (it ends interrupted, resumable).
    pub stop: StopSignal,
    /// Its event log.
    pub log: Arc<EventLog>,
    /// It was claimed from the Postgres store's queue by the server's worker: stopped, it
    /// would be queued again for any worker, so it is not cancelled here.
    pub queued: bool,
}

/// The runs driven now, by id, and word of each that leaves.
///
/// A drive records how its run ended (finished, waiting, interrupted…) and only then closes
/// its event log and leaves this table: for that moment the table still holds a run whose
/// record says it ended. [`Conductor::driving`] and [`Conductor::let_go`] tell such a run
/// apart from one being driven.
#[derive(Clone, Default)]
pub struct LiveRuns {
    runs: Arc<Mutex<HashMap<String, Live>>>,
    left: Arc<tokio::sync::Notify>,
}

impl LiveRuns {
    /// Run `id`, if it is in the table.
    fn get(&self, id: &str) -> Option<Live> {
        lock(&self.runs).get(id).cloned()
    }

    /// Whether run `id` is in the table.
    fn holds(&self, id: &str) -> bool {
        lock(&self.runs).contains_key(id)
    }

    /// Puts run `id` in the table.
    fn insert(&self, id: String, live: Live) {
        lock(&self.runs).insert(id, live);
    }

    /// Takes run `id` out of the table, and says so to those waiting for it to leave.
    fn remove(&self, id: &str) {
        lock(&self.runs).remove(id);
        self.left.notify_waiters();
    }

    /// Every run in the table.
    fn all(&self) -> Vec<(String, Live)> {
        lock(&self.runs)
            .iter()
            .map(|(id, l)| (id.clone(), l.clone()))
            .collect()
    }
}

/// Why the server keeps an eye on one of its runs it does not drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watch {
    /// It waits for inputs or approvals: once answered (or its approvals' time ran out),
    /// it is taken up.
    Waiting,
    /// It was left running, and something still holds it (a lease not yet run out, a
    /// process): once let go, it is taken up.
    Held,
}

/// The runs the server watches, by id.
pub type WatchedRuns = Arc<Mutex<BTreeMap<String, Watch>>>;

fn lock<T>(shared: &Mutex<T>) -> MutexGuard<'_, T> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a resume order went.
pub enum Resumption {
    /// The run goes on.
    Going,
    /// It had finished: there is nothing to do.
    Finished,
}

enum Order {
    Start {
        program: Box<Program>,
        inputs: BTreeMap<String, Value>,
        hook: Option<Hook>,
        done: oneshot::Sender<Result<String, RunError>>,
    },
    Resume {
        id: String,
        how: Box<Resuming>,
        done: oneshot::Sender<Result<Resumption, RunError>>,
    },
    Shutdown {
        done: oneshot::Sender<()>,
    },
}

/// The handle on the conductor's thread.
#[derive(Clone)]
pub struct Conductor {
    orders: mpsc::UnboundedSender<Order>,
    live: LiveRuns,
    watched: WatchedRuns,
    ended: Option<mpsc::UnboundedSender<String>>,
}

/// Why an order could not be given.
fn gone() -> RunError {
    RunError::Setup("the server is stopping".into())
}

impl Conductor {
    /// Starts the conductor's thread, driving runs on `runtime` as `setup` says.
    pub fn start(setup: Setup, runtime: tokio::runtime::Handle) -> std::io::Result<Conductor> {
        let (orders, received) = mpsc::unbounded_channel();
        let live = LiveRuns::default();
        let watched = WatchedRuns::default();
        let shared = (live.clone(), watched.clone());
        let ended = setup.ended.clone();
        std::thread::Builder::new()
            .name("prosevm-runs".into())
            .spawn(move || {
                let local = tokio::task::LocalSet::new();
                runtime.block_on(local.run_until(conduct(Arc::new(setup), received, shared)));
            })?;
        Ok(Conductor {
            orders,
            live,
            watched,
            ended,
        })
    }

    /// Starts a run of `program` with `inputs`, its ends posted to `hook` if given; returns
    /// its id once it is in the store (with its hook).
    pub async fn start_run(
        &self,
        program: Program,
        inputs: BTreeMap<String, Value>,
        hook: Option<Hook>,
    ) -> Result<String, RunError> {
        let (done, answer) = oneshot::channel();
        self.orders
            .send(Order::Start {
                program: Box::new(program),
                inputs,
                hook,
                done,
            })
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    /// Takes run `id` up again, changed as `how` says.
    pub async fn resume(&self, id: &str, how: Resuming) -> Result<Resumption, RunError> {
        let (done, answer) = oneshot::channel();
        self.orders
            .send(Order::Resume {
                id: id.to_string(),
                how: Box::new(how),
                done,
            })
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    /// The runs the server watches, and why.
    pub fn watched(&self) -> Vec<(String, Watch)> {
        lock(&self.watched)
            .iter()
            .map(|(id, w)| (id.clone(), *w))
            .collect()
    }

    /// Watches run `id` for `why`, or (with `None`) no longer.
    pub fn watch(&self, id: &str, why: Option<Watch>) {
        match why {
            Some(w) => {
                lock(&self.watched).insert(id.to_string(), w);
            }
            None => {
                lock(&self.watched).remove(id);
            }
        }
    }

    /// The follower of the runs the server's worker claims from the Postgres store's
    /// queue: they are live here, with event logs, like the runs the conductor drives.
    pub fn follower(&self) -> Arc<dyn crate::worker::Follower> {
        Arc::new(QueueFollower {
            live: self.live.clone(),
            ended: self.ended.clone(),
        })
    }

    /// The run `id` if it is driven now, or its drive is ending (see [`LiveRuns`]).
    pub fn live(&self, id: &str) -> Option<Live> {
        self.live.get(id)
    }

    /// The run `id` if it is driven now, as its record's `status` (read before) says: a run
    /// whose record says it ended is not driven, though its drive may not have left the
    /// table yet. A run waiting for its turn among the runs driven at once is driven.
    pub fn driving(&self, id: &str, status: RunStatus) -> Option<Live> {
        if status != RunStatus::Running {
            return None;
        }
        self.live(id)
    }

    /// Waits, up to `within`, until no drive of run `id` is in the table: a drive that has
    /// recorded how its run ended leaves it at once. Whether none is.
    pub async fn let_go(&self, id: &str, within: std::time::Duration) -> bool {
        let gone = async {
            loop {
                // Made before looking, so that a departure in between is not missed.
                let left = self.live.left.notified();
                if !self.live.holds(id) {
                    return;
                }
                left.await;
            }
        };
        tokio::time::timeout(within, gone).await.is_ok()
    }

    /// Stops every run (each ends interrupted), noting them to be resumed at the next start;
    /// returns once all have stopped.
    pub async fn shutdown(&self) {
        let (done, answer) = oneshot::channel();
        if self.orders.send(Order::Shutdown { done }).is_ok() {
            let _ = answer.await;
        }
    }
}

async fn conduct(
    setup: Arc<Setup>,
    mut orders: mpsc::UnboundedReceiver<Order>,
    (live, watched): (LiveRuns, WatchedRuns),
) {
    let mut drives: JoinSet<()> = JoinSet::new();
    loop {
        tokio::select! {
            order = orders.recv() => match order {
                None => break,
                Some(Order::Start { program, inputs, hook, done }) => {
                    let started = match start(&setup, &program, inputs, hook).await {
                        Ok((run, driver)) => launch(&setup, (&live, &watched), &mut drives, run, driver).await,
                        Err(e) => Err(e),
                    };
                    let _ = done.send(started);
                }
                Some(Order::Resume { id, how, done }) => {
                    if live.holds(&id) {
                        let held = prose_store::StoreError::Held(format!("run {id} is running"));
                        let _ = done.send(Err(RunError::Store(held)));
                        continue;
                    }
                    let resumed = match resume(&setup, &id, *how).await {
                        Ok(Some((run, driver))) => launch(&setup, (&live, &watched), &mut drives, run, driver)
                            .await
                            .map(|_| Resumption::Going),
                        Ok(None) => Ok(Resumption::Finished),
                        Err(e) => Err(e),
                    };
                    let _ = done.send(resumed);
                }
                Some(Order::Shutdown { done }) => {
                    let runs = live.all();
                    let ids: Vec<&str> = runs.iter().map(|(id, _)| id.as_str()).collect();
                    if !ids.is_empty() {
                        let mut text = ids.join("\n");
                        text.push('\n');
                        if let Err(e) = std::fs::write(&setup.resume_file, text) {
                            eprintln!(
                                "prosevm serve: cannot note the runs to resume in {}: {e}",
                                setup.resume_file.display()
                            );
                        }
                    }
                    for (_, l) in &runs {
                        l.stop.ask();
                    }
                    while drives.join_next().await.is_some() {}
                    let _ = done.send(());
                    break;
                }
            },
            Some(_) = drives.join_next(), if !drives.is_empty() => {}
        }
    }
}

/// A place for one run: the server's, with a stop of its own.
fn place(setup: &Setup) -> Place {
    let mut place = setup.place.clone();
    place.config.stop = StopSignal::default();
    place
}

/// Starts a run of `program` in the store with its `hook`, its driver connected first (a
/// driver that cannot serve the program creates no run).
async fn start(
    setup: &Setup,
    program: &Program,
    inputs: BTreeMap<String, Value>,
    hook: Option<Hook>,
) -> Result<(Run, Arc<Memoised<AnyDriver>>), RunError> {
    run::check_budget(
        &setup.driver,
        &program.artifact,
        setup.options.max_tokens,
        setup.options.max_cost,
    )
    .map_err(RunError::Setup)?;
    let memo = run::memo_for(&*setup.store, setup.options.memo);
    let driver = run::connect(&setup.driver, &program.artifact, memo)
        .await
        .map_err(RunError::Setup)?;
    let run = Run::start(
        &*setup.store,
        program,
        inputs,
        setup.driver.clone(),
        setup.options.clone(),
        &place(setup),
    )
    .await?;
    if let Some(hook) = hook {
        // Kept before the run is driven, so that no end of it goes unposted.
        if let Err(e) = setup.store.webhooks().put_hook(run.id(), &hook).await {
            let id = run.id().to_string();
            let _ = run.give_back().await;
            return Err(RunError::Setup(format!(
                "run {id} was made, but its webhook could not be kept ({e}); it was not started (resume it with POST /v1/runs/{id}/resume)"
            )));
        }
    }
    Ok((run, driver))
}

/// Takes run `id` up again with its driver connected; `None` when it had finished.
async fn resume(
    setup: &Setup,
    id: &str,
    how: Resuming,
) -> Result<Option<(Run, Arc<Memoised<AnyDriver>>)>, RunError> {
    let run = match Run::resume(&*setup.store, id, &place(setup), how).await? {
        Resumed::Finished(_) => return Ok(None),
        Resumed::Ready(run) => *run,
    };
    let memo = run::memo_for(&*setup.store, run.record().options.memo);
    match run::connect(&run.record().driver, run.artifact(), memo).await {
        Ok(driver) => Ok(Some((run, driver))),
        Err(e) => {
            // Given back as it was, for a later resume.
            let _ = run.give_back().await;
            Err(RunError::Setup(e))
        }
    }
}

/// Registers `run` as live and drives it in a task of `drives`; a run whose event log
/// cannot be opened is given back as it was.
async fn launch(
    setup: &Arc<Setup>,
    (live, watched): (&LiveRuns, &WatchedRuns),
    drives: &mut JoinSet<()>,
    run: Run,
    driver: Arc<Memoised<AnyDriver>>,
) -> Result<String, RunError> {
    let id = run.id().to_string();
    let log = match EventLog::open(run.path()) {
        Ok(l) => Arc::new(l),
        Err(e) => {
            let _ = run.give_back().await;
            return Err(RunError::Setup(format!("run {id}: its event log: {e}")));
        }
    };
    let entry = Live {
        stop: run.stop_handle(),
        log,
        queued: false,
    };
    live.insert(id.clone(), entry.clone());
    lock(watched).remove(&id);
    let (setup, live, watched) = (setup.clone(), live.clone(), watched.clone());
    let key = id.clone();
    drives.spawn_local(async move {
        let status = drive(&setup, run, driver, &entry).await;
        if status == RunStatus::Waiting {
            lock(&watched).insert(key.clone(), Watch::Waiting);
        }
        live.remove(&key);
        if let Some(ended) = &setup.ended {
            let _ = ended.send(key);
        }
    });
    Ok(id)
}

/// Drives `run` once a place among the runs driven at once is free, writing its events to
/// its log; returns how it stands after.
async fn drive(
    setup: &Setup,
    run: Run,
    driver: Arc<Memoised<AnyDriver>>,
    live: &Live,
) -> RunStatus {
    let _turn = setup.runs.clone().acquire_owned().await;
    let keeper = run.keeper().map(tokio::spawn);
    let mut writer = Writer::new(run.id(), live.log.clone());
    let id = run.id().to_string();
    let ended = run.drive(driver, &mut writer).await;
    if let Some(k) = keeper {
        k.abort();
    }
    let (status, error, code) = match ended {
        Ok(Ok(_)) => (RunStatus::Finished, None, None),
        Ok(Err(e)) => match RunStatus::ended_by(e.code) {
            RunStatus::Interrupted => (RunStatus::Interrupted, None, None),
            RunStatus::Failed => (
                RunStatus::Failed,
                Some(format!("runtime error: {e}")),
                Some(e.code.to_string()),
            ),
            stopped => (stopped, Some(e.message), Some(e.code.to_string())),
        },
        Err(e) => {
            eprintln!("prosevm serve: run {id}: {e}");
            (RunStatus::Running, Some(e.to_string()), None)
        }
    };
    writer.ended(status, error.as_deref(), code.as_deref());
    status
}

/// Follows the runs the server's worker drives.
struct QueueFollower {
    live: LiveRuns,
    ended: Option<mpsc::UnboundedSender<String>>,
}

impl crate::worker::Follower for QueueFollower {
    fn follow(&self, run: &Run) -> Box<dyn crate::worker::Following> {
        let id = run.id().to_string();
        let log = match EventLog::open(run.path()) {
            Ok(log) => Arc::new(log),
            Err(e) => {
                eprintln!("prosevm serve: run {id}: its event log: {e}; it is not followed");
                return Box::new(Unfollowed);
            }
        };
        self.live.insert(
            id.clone(),
            Live {
                stop: run.stop_handle(),
                log: log.clone(),
                queued: true,
            },
        );
        Box::new(Followed {
            writer: Writer::new(&id, log),
            live: self.live.clone(),
            ended: self.ended.clone(),
            id,
        })
    }
}

/// A run of the queue followed: its events go to its log.
struct Followed {
    writer: Writer,
    live: LiveRuns,
    ended: Option<mpsc::UnboundedSender<String>>,
    id: String,
}

impl prose_runtime::observe::Observer for Followed {
    fn event(&mut self, e: &prose_machine::trace::Event) {
        self.writer.event(e);
    }
}

impl crate::worker::Following for Followed {
    fn ended(self: Box<Self>, status: RunStatus, error: Option<&str>, code: Option<&str>) {
        let Followed {
            writer,
            live,
            ended,
            id,
        } = *self;
        writer.ended(status, error, code);
        live.remove(&id);
        if let Some(ended) = ended {
            let _ = ended.send(id);
        }
    }
}

/// A run of the queue whose log could not be opened.
struct Unfollowed;

impl prose_runtime::observe::Observer for Unfollowed {
    fn event(&mut self, _: &prose_machine::trace::Event) {}
}

impl crate::worker::Following for Unfollowed {
    fn ended(self: Box<Self>, _: RunStatus, _: Option<&str>, _: Option<&str>) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A conductor with no thread behind it, its table filled by the test.
    fn conductor() -> Conductor {
        let (orders, _) = mpsc::unbounded_channel();
        Conductor {
            orders,
            live: LiveRuns::default(),
            watched: WatchedRuns::default(),
            ended: None,
        }
    }

    #[test]
    fn a_run_whose_record_says_it_ended_is_not_driven_and_is_let_go_once_its_drive_leaves() {
        let dir = std::env::temp_dir().join(format!("prose-conductor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let c = conductor();
        let log = Arc::new(EventLog::open(&dir).expect("event log"));
        c.live.insert(
            "r1".into(),
            Live {
                stop: StopSignal::default(),
                log,
                queued: false,
            },
        );
        // Its drive has recorded that it waits, and has not left the table yet: in the table
        // (its stream is followed from its log), but not driven.
        assert!(c.live("r1").is_some());
        assert!(c.driving("r1", RunStatus::Running).is_some());
        for ended in [
            RunStatus::Waiting,
            RunStatus::Interrupted,
            RunStatus::Finished,
        ] {
            assert!(c.driving("r1", ended).is_none(), "{ended:?}");
        }
        runtime.block_on(async {
            // Not let go while the drive is there...
            assert!(!c.let_go("r1", Duration::from_millis(50)).await);
            // ...and let go as soon as it leaves, while a request waits for it.
            let waiting = {
                let c = c.clone();
                tokio::spawn(async move { c.let_go("r1", Duration::from_secs(60)).await })
            };
            tokio::task::yield_now().await;
            c.live.remove("r1");
            assert!(waiting.await.expect("joined"));
            // A run no drive holds is let go at once.
            assert!(c.let_go("r2", Duration::from_secs(1)).await);
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}
