//! The commands of the `prosevm` binary. Arguments are parsed and results rendered here; the
//! work is the library's ([`prosevm::run`], [`prosevm::report`], [`prosevm::worker`]) and the
//! stores' ([`prose_store`]). Every command that reads or runs a run is written once against
//! the `Store` trait: `--store` picks the file store, SQLite or PostgreSQL.

pub mod args;
pub mod build;
pub mod exec;
pub mod memo;
pub mod pipe;
pub mod runs;
pub mod serve;
pub mod worker;

use prose_store::{Locator, Store, StoreError};
use prosevm::run::RunError;
use std::path::Path;
use std::process::ExitCode;
use tokio::runtime::Runtime;

/// Says `msg` on stderr, and gives `code` as the exit status.
pub fn fail(msg: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("prosevm: {msg}");
    ExitCode::from(code)
}

/// The exit status for a store's error: 2 when the store or run could not be reached at
/// all, else 1.
pub fn store_error(e: StoreError) -> ExitCode {
    let code = if e.is_unreachable() { 2 } else { 1 };
    fail(e, code)
}

/// The exit status for an error that stops a run from starting or resuming.
pub fn run_error(e: RunError) -> ExitCode {
    match e {
        RunError::Store(e) => store_error(e),
        RunError::Program(e) => fail(e, 1),
        RunError::Setup(e) => fail(e, 1),
        e @ RunError::Unequipped(_) => fail(e, 1),
        e @ RunError::Untrusted(_) => fail(e, 2),
    }
}

/// The runtime the stores' connections and the drivers live on.
pub fn runtime() -> Result<Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| fail(format!("cannot start the runtime: {e}"), 2))
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
        Some(spec) => Locator::parse(spec).map_err(|e| fail(e, 2))?,
        None => Locator::File(state_dir.map(Path::to_path_buf)),
    };
    runtime
        .block_on(locator.open(state_dir, connections))
        .map_err(|e| fail(e, 2))
}
