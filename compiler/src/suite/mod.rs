//! Tests and evals of workflows: the files that say what a program must do, and the checks
//! they make.
//!
//! A **test file** (`NAME.test.toml`, beside the program it tests) holds cases: inputs, the
//! files a case starts with, where answers come from (the mock, a mock script, or a tape
//! recorded from a real model) and what must hold of the run ([`spec`]). `prosevm test`
//! runs them; `prosec check` checks them against the program, so a case naming an input or
//! an output the program does not declare is an error before anything runs ([`static_check`]).
//!
//! An **eval** (`NAME.eval.toml`) runs a program over a dataset of rows (JSON lines or CSV,
//! [`dataset`]) against a real model, and scores each row's run with the same checks and
//! with judges: sessions that grade an output against a rubric ([`eval`]).
//!
//! What a check says about a finished run is decided here too ([`checks`]), from facts the
//! VM gathers (the outputs, the run's record, its tool calls, the files in its working
//! directory), so a test, an eval and `prosec check` read every check the same way.

pub mod checks;
pub mod dataset;
pub mod eval;
pub mod spec;
pub mod static_check;

/// What a test file's name ends with.
pub const TEST_SUFFIX: &str = ".test.toml";

/// What an eval file's name ends with.
pub const EVAL_SUFFIX: &str = ".eval.toml";
