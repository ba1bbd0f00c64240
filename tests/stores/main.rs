//! One suite over the three stores: the file store, SQLite and PostgreSQL. Each test is
//! written once and run against each store: through the `Store` trait in this process
//! ([`contract`]), and through the `prosevm` CLI in real processes, killed with SIGKILL
//! part way and resumed ([`cli`]); and approvals of tool calls that wait, answered through
//! the CLI ([`approvals`]). Under `CI=true` the Postgres runs are required; elsewhere
//! they are skipped, saying so, where no PostgreSQL can be started.

#[path = "../support/mod.rs"]
mod support;

mod approvals;
mod cli;
mod contract;

pub use support::{expire_leases, kinds, Kind};
