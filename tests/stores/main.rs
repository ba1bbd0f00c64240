//! One suite over the three stores: the file store, SQLite and PostgreSQL. Each test is
//! written once and run against each store: through the `Store` trait in this process
//! ([`contract`]), and through the `prosevm` CLI in real processes, killed with SIGKILL
//! part way and resumed ([`cli`]). Under `CI=true` the Postgres runs are required; elsewhere
//! they are skipped, saying so, where no PostgreSQL can be started.

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod contract;

use std::path::Path;

/// A store under test, as `--store` names it.
#[derive(Clone, Debug)]
pub struct Kind {
    /// `file`, `sqlite` or `postgres`.
    pub name: &'static str,
    /// The `--store` value.
    pub store: String,
    /// For PostgreSQL, the database's URL (to make time pass for a lease).
    pub url: Option<String>,
}

/// The three stores for test `test`, kept under `dir` (PostgreSQL: a new database, when a
/// server can be had).
pub fn kinds(test: &str, dir: &Path) -> Vec<Kind> {
    let mut kinds = vec![
        Kind {
            name: "file",
            store: format!("file:{}", dir.join("state").display()),
            url: None,
        },
        Kind {
            name: "sqlite",
            store: format!("sqlite:{}", dir.join("runs.db").display()),
            url: None,
        },
    ];
    if let Some(url) = support::pg::database(test) {
        kinds.push(Kind {
            name: "postgres",
            store: url.clone(),
            url: Some(url),
        });
    }
    kinds
}

/// The lease of a run held in the Postgres store ends now, as it does when its holder dies
/// and the lease runs out.
pub fn expire_leases(kind: &Kind) {
    if let Some(url) = &kind.url {
        support::pg::query(url, "UPDATE prose_runs SET lease_until = now()");
    }
}
