//! The commands of the `prosevm` binary. Arguments are parsed and results rendered here; the
//! work is the library's ([`prosevm::run`], [`prosevm::report`], [`prosevm::worker`]) and the
//! stores' ([`prose_store`]). Every command that reads or runs a run is written once against
//! the `Store` trait: `--store` picks the file store, SQLite or PostgreSQL.

pub mod args;
pub mod build;
pub mod eval;
pub mod exec;
pub mod memo;
pub mod pipe;
pub mod runs;
pub mod serve;
pub mod test;
pub mod worker;

use bytecode_spec::Code;
use prose_store::{Locator, Store, StoreError};
use prosec::console::{self, Console, Exit};
use prosevm::observe::envelope::Envelope;
use prosevm::run::RunError;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::runtime::Runtime;

/// Whether `--trace json` was asked for: a failure before the run's events begin is then an
/// `error` line of the trace, so stderr stays JSON.
static TRACE_JSON: AtomicBool = AtomicBool::new(false);

/// Makes failures `error` lines of the JSON trace (`--trace json`).
pub fn trace_json() {
    TRACE_JSON.store(true, Ordering::Relaxed);
}

/// Whether failures are `error` lines of the JSON trace.
pub fn tracing_json() -> bool {
    TRACE_JSON.load(Ordering::Relaxed)
}

/// Says `msg` as `--format` and `--trace` ask (see [`prosec::console`]), and gives `exit`
/// as the exit status.
pub fn fail(msg: impl std::fmt::Display, exit: Exit) -> ExitCode {
    fail_coded(msg, None, exit)
}

/// [`fail`], with the failure's stable code (`E219`).
pub fn fail_coded(msg: impl std::fmt::Display, code: Option<Code>, exit: Exit) -> ExitCode {
    let code = code.map(|c| c.to_string());
    if tracing_json() {
        let msg = msg.to_string();
        eprintln!("{}", Envelope::unstarted().error(&msg, code.as_deref()));
        if Console::json() {
            println!("{}", console::error_json(&msg, code.as_deref(), exit));
        }
        return exit.into();
    }
    console::fail_coded("prosevm", msg, code.as_deref(), exit)
}

/// The exit status for a store's error: 2 when the store or run could not be reached at
/// all, else 1 (the run's files are damaged).
pub fn store_error(e: StoreError) -> ExitCode {
    let exit = if e.is_unreachable() {
        Exit::Unusable
    } else {
        Exit::Failed
    };
    fail(e, exit)
}

/// The exit status for an error that stops a run from starting or resuming: the store's
/// own, else 2 (nothing ran: the inputs, the machine's skills or servers, or the trust
/// asked for did not allow it).
pub fn run_error(e: RunError) -> ExitCode {
    match e {
        RunError::Store(e) => store_error(e),
        RunError::Program(e) if e.code == Code::E200 => fail_coded(
            format!("{e}\n  help: pass --input NAME=VALUE (or --input-file FILE); under the mock, --mock-inputs gives placeholders"),
            Some(e.code),
            Exit::Unusable,
        ),
        e => {
            let code = e.code();
            fail_coded(e, code, Exit::Unusable)
        }
    }
}

/// The flags that name a store again (`--store`, else `--state-dir`), for a command printed
/// for the user to run; a Postgres URL, which may hold a password, is not repeated.
pub fn store_flags(store: Option<&str>, state_dir: Option<&Path>) -> Option<String> {
    match store {
        Some(s) if prose_store::pg::is_url(s) => Some("--store <the postgres:// URL>".into()),
        Some(s) => Some(format!("--store {s}")),
        None => state_dir.map(|d| format!("--state-dir {}", d.display())),
    }
}

/// The run `given` names in `store` (an id, a prefix of one, a directory, `latest`; none
/// names the latest: [`prose_store::naming`]).
pub fn resolve(rt: &Runtime, store: &dyn Store, given: Option<&str>) -> Result<String, ExitCode> {
    rt.block_on(prose_store::naming::resolve(store, given))
        .map_err(store_error)
}

/// The runtime the stores' connections and the drivers live on.
pub fn runtime() -> Result<Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| fail(format!("cannot start the runtime: {e}"), Exit::Unusable))
}

/// The store `--store` names (a directory or `file:DIR`, `sqlite:PATH`, a `postgres://`
/// URL), else the file store under `state_dir`; a database's with up to `connections`
/// connections. The views of runs kept in a database go under `state_dir`.
pub fn open_store(
    runtime: &Runtime,
    store: Option<&str>,
    state_dir: Option<&Path>,
    connections: usize,
) -> Result<Box<dyn Store>, ExitCode> {
    let locator = match store {
        Some(spec) => Locator::parse(spec).map_err(|e| fail(e, Exit::Unusable))?,
        None => Locator::File(state_dir.map(Path::to_path_buf)),
    };
    runtime
        .block_on(locator.open(state_dir, connections))
        .map_err(|e| fail(e, Exit::Unusable))
}
