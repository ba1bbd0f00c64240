//! `prosevm serve`: the HTTP service ([`prosevm::serve`]) on an address, over a store, with
//! the driver the flags choose.

use super::args::RunArgs;
use super::{fail, open_store, runtime};
use prose_agent::people::People;
use prose_runtime::runner::StopSignal;
use prosec::console::Exit;
use prosevm::serve::{self, auth::Token};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// The flags of `prosevm serve` besides the driver's.
pub struct ServeArgs {
    /// `HOST:PORT` (`localhost` for the loopback address).
    pub listen: String,
    /// The store keeping the runs.
    pub store: Option<String>,
    /// The file holding the API's token.
    pub token_file: Option<PathBuf>,
    /// Runs driven at once.
    pub max_runs: usize,
    /// HTTP requests handled at once.
    pub max_requests: usize,
    /// Seconds to wait for the next piece of a request's body.
    pub body_timeout: f64,
    /// Connections one client address may hold at once.
    pub max_client_connections: usize,
    /// Also work the Postgres store's queue.
    pub worker: bool,
    /// Also serve the library as MCP tools at `/mcp`.
    pub mcp: bool,
    /// The URLs runs may name as webhooks.
    pub webhook_allow: Vec<String>,
    /// The file holding the webhooks' signing secret.
    pub webhook_secret_file: Option<PathBuf>,
    /// Seconds a delivery is tried for.
    pub webhook_retry_for: f64,
}

/// How the server posts webhooks, as its flags say (none without any webhook flag).
fn webhooks(args: &ServeArgs) -> Result<Option<serve::webhooks::Settings>, String> {
    use serve::webhooks::{allow::Allowed, sign::Secret, Settings};
    let retry_for = std::time::Duration::try_from_secs_f64(args.webhook_retry_for)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            format!(
                "--webhook-retry-for {}: not a number of seconds above 0",
                args.webhook_retry_for
            )
        })?;
    match (&args.webhook_secret_file, args.webhook_allow.is_empty()) {
        (None, true) => Ok(None),
        (None, false) => Err("--webhook-allow needs --webhook-secret-file: every delivery is signed with the server's secret".into()),
        (Some(_), true) => Err("--webhook-secret-file signs webhooks, and no --webhook-allow lets a run name one".into()),
        (Some(file), false) => {
            let text = serve::auth::read_secret("--webhook-secret-file", "secret", file)?;
            let secret = Secret::new(&text)
                .map_err(|e| format!("--webhook-secret-file {}: {e}", file.display()))?;
            let allow = args
                .webhook_allow
                .iter()
                .map(|a| Allowed::parse(a))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(Settings {
                allow,
                secret,
                retry_for,
            }))
        }
    }
}

/// The address `listen` names.
fn address(listen: &str) -> Result<SocketAddr, String> {
    if let Some(port) = listen.strip_prefix("localhost:") {
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("--listen {listen:?}: not a port"))?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    listen
        .parse()
        .map_err(|_| format!("--listen {listen:?}: expected HOST:PORT, e.g. 127.0.0.1:8080"))
}

/// `prosevm serve`: serves until SIGTERM or Ctrl-C (then the runs it drives are stopped,
/// to be taken up at its next start); a second signal exits at once.
pub fn serve(args: ServeArgs, opts: &RunArgs) -> ExitCode {
    let addr = match address(&args.listen) {
        Ok(a) => a,
        Err(e) => return fail(e, Exit::Unusable),
    };
    let Some(body_timeout) = std::time::Duration::try_from_secs_f64(args.body_timeout)
        .ok()
        .filter(|d| !d.is_zero())
    else {
        return fail(
            format!(
                "--body-timeout {}: not a number of seconds above 0",
                args.body_timeout
            ),
            Exit::Unusable,
        );
    };
    let webhooks = match webhooks(&args) {
        Ok(w) => w,
        Err(e) => return fail(e, Exit::Unusable),
    };
    let token = match &args.token_file {
        Some(f) => match Token::read(f) {
            Ok(t) => Some(t),
            Err(e) => return fail(e, Exit::Unusable),
        },
        None => None,
    };
    if token.is_none() && !addr.ip().is_loopback() {
        return fail(
            format!("refusing to serve on {addr} without a token: anyone who can reach it could run programs with this server's keys (give --token-file FILE, or listen on a loopback address)"),
            Exit::Unusable,
        );
    }
    let (driver, mut place, options) = match (opts.driver(), opts.place(), opts.options()) {
        (Ok(d), Ok(p), Ok(o)) => (d, p, o),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return fail(e, Exit::Unusable),
    };
    if matches!(
        driver,
        prose_runtime::driver::settings::DriverSettings::Stdio { .. }
    ) {
        return fail(
            "serve cannot use --driver stdio: a server has no host on its stdin (use a provider, the command driver or the mock)",
            Exit::Unusable,
        );
    }
    let mcp = match (args.mcp, opts.config()) {
        (false, _) => None,
        (true, Ok(settings)) => Some(prosec::cost::Pricing::from_settings(
            &settings,
            prosec::cost::DEFAULT_TOKENS_IN,
            prosec::cost::DEFAULT_TOKENS_OUT,
        )),
        (true, Err(e)) => return fail(e, Exit::Unusable),
    };
    // A server asks no terminal: questions for people wait for an answer through the API.
    place.people = People::Nobody;
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let store = match open_store(
        &rt,
        args.store.as_deref(),
        opts.state_dir.as_deref(),
        args.max_runs + 2,
    ) {
        Ok(s) => Arc::<dyn prose_store::Store>::from(s),
        Err(code) => return code,
    };
    let queue = match (&args.store, args.worker) {
        (_, false) => None,
        (Some(url), true) if prose_store::pg::is_url(url) => {
            let root = prose_store::state_root(opts.state_dir.as_deref());
            match rt.block_on(prosevm::worker::connect(url, args.max_runs)) {
                Ok(pg) => Some(serve::QueueWork {
                    store: pg.with_views(root.join("pg")),
                    concurrency: args.max_runs,
                }),
                Err(e) => return fail(e, Exit::Unusable),
            }
        }
        _ => {
            return fail(
                "--worker works the queue of a Postgres store: give --store postgres://…",
                Exit::Unusable,
            )
        }
    };
    let listener = match rt.block_on(tokio::net::TcpListener::bind(addr)) {
        Ok(l) => l,
        Err(e) => return fail(format!("cannot listen on {addr}: {e}"), Exit::Unusable),
    };
    let bound = listener.local_addr().unwrap_or(addr);
    let shutdown = StopSignal::default();
    super::exec::stop_on_signals(
        &rt,
        shutdown.clone(),
        "prosevm serve",
        "stopping: interrupting the runs, to be taken up at the next start",
    );
    // One write for the whole line: `eprintln!` writes it in pieces (the address a few
    // bytes at a time), and whoever waits for this line (a supervisor, a test) could read
    // an address without its port.
    {
        use std::io::Write as _;
        let line = format!("prosevm serve: listening on http://{bound}\n");
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
    let dir = prose_store::state_root(opts.state_dir.as_deref()).join("serve");
    let served = rt.block_on(serve::serve(
        listener,
        serve::Options {
            store,
            dir,
            driver,
            options,
            trust: place.trust.clone(),
            place,
            token,
            max_runs: args.max_runs,
            max_requests: args.max_requests,
            body_timeout,
            max_client_connections: args.max_client_connections,
            queue,
            webhooks,
            mcp,
        },
        shutdown,
    ));
    match served {
        Ok(()) => {
            eprintln!("prosevm serve: stopped");
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("serving on {bound}: {e}"), Exit::Unusable),
    }
}
