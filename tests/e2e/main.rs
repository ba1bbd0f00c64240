//! End-to-end tests of the VM: programs compiled by `prosec`, run by the machine (or the
//! runner), with every request the driver sees and every output checked.

mod block_variables;
mod blocks;
mod codes;
mod errors;
mod examples;
mod flow;
mod harness;
mod imports;
mod iteration;
mod loops;
mod parallel;
mod runner;
mod sessions;
