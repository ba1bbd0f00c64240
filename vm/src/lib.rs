//! `prosevm`: runs `.pbc` artifacts produced by `prosec`.
//!
//! [`machine::Machine`] is the deterministic interpreter; [`runner`] serves its requests
//! with a [`driver::Driver`] (the [`driver::mock`] driver is built in) under tokio.

pub mod housekeeping;
pub mod report;
pub mod run;
pub mod store;
pub mod worker;
