//! The VM's tests, one binary: each module is a suite that runs `prosevm` as a process, or
//! the runtime's libraries through their public API (`agent`), against scratch directories,
//! fake providers, a real PostgreSQL and a real browser where they need one. One binary
//! rather than one per suite: each would link the whole VM again.

mod support;

mod agent_loop;
mod attack_sweep;
mod budgets;
mod caching;
mod chat_drivers;
mod command_driver;
mod durable;
mod hostile_runs;
mod indexing;
mod inputs;
mod limits;
mod memo;
mod otel;
mod pg;
mod protocol_doc;
mod real_model;
mod report;
mod resume_edit;
mod runs;
mod settings;
mod signals;
mod stdio_driver;
mod streaming;
mod suite;
mod sweep;
mod watch;
