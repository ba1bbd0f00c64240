//! A suspended fiber costs at most 2 KiB: measured with a counting allocator while 20,000
//! `pmap` branches wait for their sessions.

use prose_benches::counting::{live, Counting};
use prose_machine::{Limits, Machine, Reached};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_suspended_fiber_costs_at_most_two_kib() {
    let n = 20_000;
    let program = prose_benches::compile(&prose_benches::fan_out(n));
    let mut machine =
        Machine::new(program.artifact, &Default::default(), Limits::default()).expect("inputs");
    let before = live();
    let step = machine.run();
    let after = live();
    let Reached::Waiting { requests, .. } = &step else {
        panic!("expected waiting fibers, got {step:?}");
    };
    assert_eq!(requests.len(), n);
    // Everything the run allocated (fibers, frames, requests, the item list) per fiber.
    let per_fiber = (after - before) as f64 / n as f64;
    println!("{per_fiber:.0} bytes per suspended fiber (including its pending request)");
    assert!(per_fiber <= 2048.0, "{per_fiber} bytes per fiber");
}
