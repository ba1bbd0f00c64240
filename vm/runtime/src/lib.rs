//! The OpenProse runtime: everything that serves the interpreter's requests while a program
//! runs. The [`runner`] takes the machine's requests and answers them with a [`driver`]
//! (models behind HTTP, a command, a host on stdio, the built-in mock), runs sessions as
//! agent loops with the tools and permissions of [`prose_agent`], asks its
//! [`prose_agent::people`] what only a person can answer (or, with no one at hand, waits for
//! [`approvals`] given from outside), and journals every answer through a
//! [`runner::journal::JournalSink`] that a store implements. Whoever watches a run does so
//! as an [`observe::Observer`] the runner feeds. A run's description is its [`record`]. The
//! [`memo`] answers model requests asked before, across runs.

pub mod approvals;
pub mod clock;
pub mod config;
pub mod driver;
pub mod guards;
pub mod memo;
pub mod observe;
pub mod program;
pub mod record;
pub mod runner;
