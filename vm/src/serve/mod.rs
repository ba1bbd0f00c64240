//! `prosevm serve`: shipped workflows as a service. An HTTP API under `/v1` ([`api`]) takes
//! artifacts, starts runs of them with the server's driver, streams their events and answers
//! for them; a token guards it ([`auth`]). Runs live in the server's store like any other
//! run, started and resumed through the library's run lifecycle ([`crate::run`]) on the
//! conductor's thread ([`conductor`]); each run's events are logged beside its views
//! ([`events`]). Nothing is kept only in memory: after a stop (SIGTERM) or a crash, the next
//! start takes up every run of this server that had not ended, from its journal.
//!
//! ```text
//! PUT  /v1/artifacts            .pbc → {"sha256"}          (library)
//! POST /v1/runs                 {"artifact","inputs"} → {"id"}
//! GET  /v1/runs[/{id}]          records from the store
//! GET  /v1/runs/{id}/events     the run's event log, then live (server-sent events)
//! POST /v1/runs/{id}/cancel     stop → interrupted;   /resume: from its journal
//! POST /v1/runs/{id}/input      answers an input the run waits for; then it goes on
//! POST /v1/runs/{id}/approvals/{approval}   approves or denies a tool call it waits for
//! POST /v1/schedules            {"cron","artifact","inputs"}: runs on time ([`schedules`])
//! ```
//!
//! With a Postgres store and a [`QueueWork`], the server also works the store's queue with
//! the library's worker ([`crate::worker`]), which tells the conductor's table of the runs it
//! claims, so their events and status are served like the server's own.
//!
//! A mid-program input no one can give (a server asks no terminal), or a tool call its agent's
//! permissions say `prompt` for, makes the run wait: status `waiting`, durable like any
//! other. An answer through the API or the page, or `prosevm answer` on the store, lets it go
//! on; the server takes up its waiting runs once answered, or once an approval's time limit
//! ran out (the call is then refused).

pub mod api;
pub mod auth;
pub mod catalog;
pub mod conductor;
pub mod doc;
pub mod evals;
pub mod events;
pub mod guards;
pub mod library;
pub mod limits;
pub mod mcp;
pub mod page;
pub mod schedules;
pub mod webhooks;

use crate::run::{Place, Resuming, RunError};
use api::{App, Shared};
use axum::routing::get;
use conductor::{Conductor, Resumption, Setup, Watch};
use prose_runtime::driver::settings::DriverSettings;
use prose_runtime::record::{ExecOptions, RunStatus};
use prose_runtime::runner::StopSignal;
use prose_store::{Store, StoreError};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use webhooks::courier::{Courier, Payload};

/// How a server serves.
pub struct Options {
    /// Where runs are kept.
    pub store: Arc<dyn Store>,
    /// The server's own directory: its artifacts, its schedules, and the runs to resume at
    /// start.
    pub dir: PathBuf,
    /// The driver every run is answered by, with the server's credentials.
    pub driver: DriverSettings,
    /// How runs execute.
    pub options: ExecOptions,
    /// The state directory, the runner's configuration, people (no one: a server asks no
    /// terminal) and MCP servers. Its `max_concurrency` holds for the whole server: that
    /// many requests in flight at once over all the runs it drives.
    pub place: Place,
    /// The token every `/v1` request needs, if any.
    pub token: Option<auth::Token>,
    /// Keys an artifact must be signed by to be accepted (none: any verified artifact).
    pub trust: Vec<bytecode_spec::signature::TrustKey>,
    /// Runs driven at once.
    pub max_runs: usize,
    /// HTTP requests handled at once (a request counts once its body has come).
    pub max_requests: usize,
    /// The longest wait for the next piece of a request's body.
    pub body_timeout: std::time::Duration,
    /// Connections one client address may hold at once.
    pub max_client_connections: usize,
    /// The Postgres store's queue, when the server also works it like `prosevm worker`.
    pub queue: Option<QueueWork>,
    /// Where runs may post their ends, and how deliveries are signed; none: no webhooks.
    pub webhooks: Option<webhooks::Settings>,
    /// Whether the library is also served as MCP tools at `/mcp`, described as this
    /// pricing prices their cost bounds.
    pub mcp: Option<prosec::cost::Pricing>,
}

/// The server as a worker of the Postgres store's queue: it claims runs submitted there
/// (`prosevm submit`) and runs whose worker died, and follows them like its own.
pub struct QueueWork {
    /// The store, its views under the state directory's `pg/`.
    pub store: prose_store::pg::PgStore,
    /// Runs claimed at once.
    pub concurrency: usize,
}

/// The largest request body taken (an artifact with its bundled skills): 64 MiB.
const MAX_BODY: usize = 64 << 20;

/// The file in the server's directory naming the runs a shutdown interrupted.
const RESUME_FILE: &str = "resume-on-start";

/// Serves on `listener` until `shutdown` is asked; then stops every run it drives (each
/// ends interrupted, noted to be resumed at the next start) and returns. Runs of this server
/// left unfinished by an earlier one (stopped, or killed) are taken up first.
pub async fn serve(
    listener: tokio::net::TcpListener,
    opts: Options,
    shutdown: StopSignal,
) -> std::io::Result<()> {
    let Options {
        store,
        dir,
        driver,
        options,
        mut place,
        token,
        trust,
        max_runs,
        max_requests,
        body_timeout,
        max_client_connections,
        queue,
        webhooks,
        mcp,
    } = opts;
    std::fs::create_dir_all(&dir)?;
    // Absolute: runs record their artifact's path, by which the server knows its own.
    let dir = std::fs::canonicalize(&dir)?;
    // Requests in flight are counted over every run, as `exec` counts them within one.
    place.config.shared = Some(Arc::new(tokio::sync::Semaphore::new(
        place.config.max_concurrency.max(1),
    )));
    let mcp_servers: Vec<String> = place.mcp.servers.keys().cloned().collect();
    let evals = api::EvalsHome {
        driver: driver.clone(),
        place: place.clone(),
        scratch: dir.join("eval-work"),
    };
    let courier = match webhooks {
        Some(settings) => {
            let owner = dir.display().to_string();
            let payload: Payload = |id, event, created, record| {
                let body = api::WebhookPayload {
                    id,
                    r#type: event.to_string(),
                    created,
                    run: api::RunBody::of(record, false),
                };
                serde_json::to_value(body).unwrap_or_default()
            };
            let (courier, task) = Courier::start(store.clone(), settings, owner, payload)
                .map_err(std::io::Error::other)?;
            Some((courier, task))
        }
        None => None,
    };
    let conductor = Conductor::start(
        Setup {
            store: store.clone(),
            driver,
            options,
            place: place.clone(),
            runs: Arc::new(tokio::sync::Semaphore::new(max_runs.max(1))),
            resume_file: dir.join(RESUME_FILE),
            ended: courier.as_ref().map(|(c, _)| c.ended()),
        },
        tokio::runtime::Handle::current(),
    )?;
    let schedules = schedules::Schedules::load(dir.join("schedules.json"))
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let app: Shared = Arc::new(App {
        store,
        library: library::Library::new(dir.join("artifacts"), trust),
        conductor: conductor.clone(),
        schedules: tokio::sync::Mutex::new(schedules),
        evals,
        webhooks: courier.as_ref().map(|(c, _)| c.clone()),
    });
    take_up_unfinished(&app, &dir).await;
    let watching = tokio::spawn(watch_runs(app.clone()));
    let firing = tokio::spawn(fire_schedules(app.clone()));
    let token = token.map(Arc::new);
    let (v1, _) = doc::routes().split_for_parts();
    let v1 = v1.route_layer(axum::middleware::from_fn_with_state(
        token.clone(),
        auth::guard,
    ));
    let front = axum::Router::new()
        .route("/", get(page::show))
        .with_state(token.clone());
    // MCP's transport at `/mcp`, behind the token as `/v1` is; without `--mcp`, a request
    // there is told how to have it. Hosts are checked as for every route (the loopback
    // names only, without a token), not by rmcp's own list.
    let mcp_config = rmcp::transport::streamable_http_server::StreamableHttpServerConfig::default()
        .disable_allowed_hosts();
    let mcp_stop = mcp_config.cancellation_token.clone();
    let mcp_route = match mcp {
        Some(pricing) => {
            let catalog = Arc::new(catalog::Catalog::new(pricing, mcp_servers));
            let serving = app.clone();
            let service = rmcp::transport::streamable_http_server::StreamableHttpService::new(
                move || Ok(mcp::Workflows::new(serving.clone(), catalog.clone())),
                Arc::new(
                    rmcp::transport::streamable_http_server::session::local::LocalSessionManager::default(),
                ),
                mcp_config,
            );
            axum::Router::new()
                .route_service(mcp::PATH, service)
                .route_layer(axum::middleware::from_fn_with_state(
                    token.clone(),
                    auth::guard,
                ))
        }
        None => axum::Router::new().route(mcp::PATH, axum::routing::any(mcp::off)),
    };
    let open = token.is_none();
    let bodies = Arc::new(limits::BodyLimits {
        max_bytes: MAX_BODY,
        idle: body_timeout,
        reading: Arc::new(tokio::sync::Semaphore::new(max_requests.max(1))),
    });
    // One count over the API and the page: `Router::layer` gives each route its own copy of
    // a layer, so a plain `ConcurrencyLimitLayer` would limit each route apart. A request
    // counts once its body has come in (read, with its time limits, outside the count) and
    // until its answer starts: an event stream, once started, holds no place. `/healthz`
    // counts for nothing, so it answers whatever else is going on.
    let counted = v1
        .with_state(app)
        .merge(front)
        .merge(mcp_route)
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
            max_requests.max(1),
        ))
        .layer(axum::middleware::from_fn_with_state(
            bodies,
            limits::read_bodies,
        ));
    let mut router = axum::Router::new()
        .route("/healthz", get(api::healthz))
        .merge(counted)
        .fallback(api::no_such_route)
        .method_not_allowed_fallback(api::no_such_method)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(auth::same_origin));
    if open {
        router = router.layer(axum::middleware::from_fn(auth::loopback_names_only));
    }
    let queue = match queue {
        Some(q) => Some(work_queue(q, place, conductor.follower())?),
        None => None,
    };
    let listener = limits::CappedListener::new(listener, max_client_connections);
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.wait().await;
            if let Some((stop, _)) = &queue {
                stop.ask();
            }
            conductor.shutdown().await;
            // Calls answered (their runs stopped above), the MCP sessions end.
            mcp_stop.cancel();
            if let Some((_, stopped)) = queue {
                let _ = stopped.await;
            }
        })
        .await;
    watching.abort();
    firing.abort();
    if let Some((_, task)) = courier {
        task.abort();
    }
    served
}

/// How often the server looks at the runs it watches.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Takes up the server's runs it watches once they can go on: a waiting run once it needs
/// no one any more (answered through the CLI, which writes only the store, or its
/// approvals' time ran out; an answer through the API takes its run up at once), and a run
/// left running once whatever held it (a lease not yet run out, another process) let it go.
async fn watch_runs(app: Shared) {
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        for (id, why) in app.conductor.watched() {
            if app.conductor.live(&id).is_some() {
                continue;
            }
            let ready = match (app.store.record(&id).await, why) {
                (Ok((_, r)), Watch::Waiting) if r.status == RunStatus::Waiting => {
                    !r.needs_someone(prose_runtime::clock::now())
                }
                (Ok((_, r)), Watch::Held) if r.status == RunStatus::Running => true,
                // Taken up or ended elsewhere, or gone: no longer this server's to watch.
                _ => {
                    app.conductor.watch(&id, None);
                    continue;
                }
            };
            if !ready {
                continue;
            }
            match app.conductor.resume(&id, Resuming::default()).await {
                Ok(_) => {
                    app.conductor.watch(&id, None);
                    eprintln!("prosevm serve: taking up run {id}");
                }
                // Still held: looked at again later.
                Err(RunError::Store(StoreError::Held(_))) if why == Watch::Held => {}
                Err(e) => {
                    app.conductor.watch(&id, None);
                    eprintln!("prosevm serve: cannot take up run {id}: {e}");
                }
            }
        }
    }
}

/// Takes up every run of this server (a run of one of its artifacts) that an earlier server
/// left unfinished: killed while running, or interrupted by its shutdown.
async fn take_up_unfinished(app: &Shared, dir: &std::path::Path) {
    let file = dir.join(RESUME_FILE);
    let noted: HashSet<String> = std::fs::read_to_string(&file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    let rows = match app.store.list().await {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("prosevm serve: cannot list the runs to take up: {e}");
            return;
        }
    };
    for row in rows {
        let left = match row.run_status() {
            Some(RunStatus::Running | RunStatus::Waiting) => true,
            Some(RunStatus::Interrupted) => noted.contains(&row.id),
            _ => false,
        };
        if !left {
            continue;
        }
        let Ok((_, record)) = app.store.record(&row.id).await else {
            continue;
        };
        if !app.library.holds(&record.origin) {
            continue;
        }
        if record.status == RunStatus::Waiting && record.needs_someone(prose_runtime::clock::now())
        {
            app.conductor.watch(&row.id, Some(Watch::Waiting));
            continue;
        }
        if record.status == RunStatus::Running && row.live {
            app.conductor.watch(&row.id, Some(Watch::Held));
            continue;
        }
        match app.conductor.resume(&row.id, Resuming::default()).await {
            Ok(Resumption::Going) => eprintln!("prosevm serve: taking up run {}", row.id),
            Ok(Resumption::Finished) => {}
            Err(e) => eprintln!("prosevm serve: cannot take up run {}: {e}", row.id),
        }
    }
    let _ = std::fs::remove_file(&file);
}

/// Starts the runs of schedules as they come due (looking at least every second, so a new
/// schedule is seen).
async fn fire_schedules(app: Shared) {
    loop {
        let now = chrono::Utc::now();
        let soonest = app.schedules.lock().await.soonest();
        let wait = soonest
            .and_then(|t| (t - now).to_std().ok())
            .unwrap_or_default()
            .min(std::time::Duration::from_secs(1));
        tokio::time::sleep(wait).await;
        let due = match app.schedules.lock().await.take_due(chrono::Utc::now()) {
            Ok(due) => due,
            Err(e) => {
                eprintln!("prosevm serve: the schedules: {e}");
                continue;
            }
        };
        for s in due {
            // A webhook no longer allowed starts no run, as a request naming it would not.
            let started = match (
                app.library.get(&s.artifact),
                api::hook(&app, s.webhook.as_deref()),
            ) {
                (None, _) => Err(format!("artifact {} is not in the library", s.artifact)),
                (_, Err(e)) => Err(e.to_string()),
                (Some(program), Ok(hook)) => app
                    .conductor
                    .start_run(program, api::values(&s.inputs), hook)
                    .await
                    .map_err(|e| e.to_string()),
            };
            match &started {
                Ok(run) => eprintln!("prosevm serve: schedule {} started run {run}", s.id),
                Err(e) => eprintln!(
                    "prosevm serve: schedule {} could not start a run: {e}",
                    s.id
                ),
            }
            if let Err(e) = app.schedules.lock().await.started(&s.id, started) {
                eprintln!("prosevm serve: the schedules: {e}");
            }
        }
    }
}

/// Works the Postgres store's queue on a thread of its own (a worker drives its runs on one
/// thread, as the conductor does), its runs followed by `follower`; returns what stops it
/// (its runs are then queued again) and what says it has stopped.
fn work_queue(
    q: QueueWork,
    place: Place,
    follower: Arc<dyn crate::worker::Follower>,
) -> std::io::Result<(StopSignal, tokio::sync::oneshot::Receiver<()>)> {
    use crate::worker::{self, Ended, WorkerEvent, WorkerOptions};
    let opts = WorkerOptions {
        concurrency: q.concurrency.max(1),
        workdir: std::env::current_dir()?,
        place,
        follower: Some(follower),
        ..WorkerOptions::default()
    };
    let stop = StopSignal::default();
    let stopping = stop.clone();
    let (done, stopped) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Handle::current();
    std::thread::Builder::new()
        .name("prosevm-queue".into())
        .spawn(move || {
            let id = prose_store::pg::lease::WorkerId::new();
            let log = |e: &WorkerEvent| match e {
                WorkerEvent::Claimed { run, .. } => {
                    eprintln!("prosevm serve: claimed run {run} from the queue")
                }
                WorkerEvent::Ended { run, how } => match how {
                    Ended::Requeued => eprintln!("prosevm serve: run {run} queued again"),
                    Ended::Lost(e) => eprintln!("prosevm serve: run {run} let go: {e}"),
                    _ => {}
                },
                WorkerEvent::Trouble(t) => eprintln!("prosevm serve: the queue: {t}"),
            };
            runtime.block_on(worker::work(&q.store, &id, &opts, &stopping, &log));
            let _ = done.send(());
        })?;
    Ok((stop, stopped))
}
