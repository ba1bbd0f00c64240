//! `prosevm`: runs `.pbc` artifacts produced by `prosec`.
//!
//! The VM is built in layers, each a crate whose dependencies point one way:
//! `prose_machine` (the interpreter, without I/O) ← `prose_runtime` (the runner, drivers,
//! agents and observers) ← `prose_store` (where runs are kept, behind the `Store` trait) ←
//! this crate: the run lifecycle ([`run`]), written once against the `Store` trait, the run
//! report ([`report`]), the Postgres store's worker ([`worker`]), the HTTP service
//! ([`serve`]), and the `prosevm` CLI.

pub mod observe;
pub mod report;
pub mod run;
pub mod serve;
pub mod source;
pub mod suite;
pub mod worker;
