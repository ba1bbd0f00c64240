//! `prosevm`: runs `.pbc` artifacts produced by `prosec`.
//!
//! [`machine::Machine`] is the deterministic interpreter; [`runner`] serves its requests
//! with a [`driver::Driver`] (the [`driver::mock`] driver is built in) under tokio.

pub mod agent;
pub mod config;
pub mod driver;
pub mod housekeeping;
pub mod observe;
pub mod people;
pub mod report;
pub mod run;
pub mod runner;
pub mod secrets;
pub mod store;
pub mod tls;
pub mod worker;
