//! Peak resident memory per suspended fiber, as the operating system counts it: the
//! process's high-water mark (`VmHWM` in `/proc/self/status`) grows by at most 2 KiB per
//! fiber while 20,000 `pmap` branches wait for their sessions. With the allocator `prosevm`
//! uses (mimalloc). Alone in its test binary, so nothing else moves the mark.

use prose_machine::{Limits, Machine, Reached};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A field of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> usize {
    prose_benches::status_bytes(field).unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

#[test]
fn peak_rss_per_suspended_fiber_is_at_most_two_kib() {
    let n = 20_000;
    let program = prose_benches::compile(&prose_benches::fan_out(n));
    let mut machine =
        Machine::new(program.artifact, &Default::default(), Limits::default()).expect("inputs");
    machine.set_trace(false);
    let before = status_bytes("VmHWM:").max(status_bytes("VmRSS:"));
    let step = machine.run();
    let Reached::Waiting { requests, .. } = &step else {
        panic!("expected waiting fibers, got {step:?}");
    };
    assert_eq!(requests.len(), n);
    let after = status_bytes("VmHWM:");
    let per_fiber = after.saturating_sub(before) as f64 / n as f64;
    println!("peak RSS {per_fiber:.0} bytes per suspended fiber (with its pending request)");
    assert!(per_fiber <= 2048.0, "{per_fiber} bytes per fiber");
    drop(step);
    drop(machine);
}
