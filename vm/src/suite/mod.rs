//! Tests and evals of workflows, run: `prosevm test` replays cases at no cost and checks
//! them ([`testing`]); `prosevm eval` runs a program over a dataset against a real model and
//! scores each row with checks and judges ([`eval`]). Each case or row is one run in a
//! working directory of its own ([`case`]). The files they read, and what a check says of a
//! run, are the compiler's ([`prosec::suite`]), so `prosec check` and the VM read them alike.

pub mod case;
pub mod eval;
pub mod testing;
