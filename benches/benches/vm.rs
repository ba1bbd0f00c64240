//! VM throughput with the mock driver at zero latency, in memory and on the user's path.
//!
//! In memory (`vm/in memory/...`): the machine and runner alone, trace off. Targets: 20,000
//! chained sessions in at most 50 ms; a 20,000-session `pmap` fan-out (over a list built by
//! appending) plus one joining session in at most 100 ms.
//!
//! Durable (`vm/durable/...`): the same programs run the way `prosevm run` runs them, through
//! `Run::start` and `drive` (a new run directory, every answer journaled, the views kept,
//! `run.json` written at start and end). Targets: the 20,000-element fan-out in under
//! 0.5 s whole process, and growth from 2,000 to 20,000 at most 12x.
//!
//! Real-shaped (`vm/real-shaped/...`): [`prose_benches::patrol`], persistent agents' sessions
//! in loops and blocks, against a chain asking as many sessions, both durable. Target: the
//! patrol costs at most 3x the chain per request.
//!
//! Scale (`vm/scale/...`): both programs at 200,000 and 1,000,000 sessions in memory, with
//! the branch limit raised. Targets: growth from 2,000 to 20,000 at most 12x; a million-session
//! fan-out in under 5 s and 1 GB (`profile_vm` prints the memory).
//!
//! `vm/load and verify/...`: reading and verifying each example's artifact (target 50 µs).
//!
//! Run: `cargo bench -p prose-benches --bench vm`.

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion};
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SIZES: [usize; 3] = [2_000, 5_000, 20_000];

/// The chain and the fan-out of each size in `sizes`, in memory, in `g`.
fn both_in_memory(g: &mut BenchmarkGroup<'_, WallTime>, sizes: &[usize]) {
    for &n in sizes {
        for (what, src) in [
            ("chain", prose_benches::session_chain(n)),
            ("pmap fan-out", prose_benches::fan_out(n)),
        ] {
            let a = prose_benches::compile(&src);
            g.bench_function(format!("{what} of {n} sessions"), |b| {
                b.iter(|| prose_benches::run_mock(&a))
            });
        }
    }
}

fn in_memory(c: &mut Criterion) {
    let mut g = c.benchmark_group("vm/in memory");
    g.sample_size(10);
    both_in_memory(&mut g, &SIZES);
    g.finish();
}

/// Sizes past the durable benches: the machine and runner alone, to a million sessions (the
/// branch limit raised, as `--max-branches` does). `profile_vm` prints the memory per
/// session at the same sizes.
const SCALE: [usize; 2] = [200_000, 1_000_000];

fn scale(c: &mut Criterion) {
    let mut g = c.benchmark_group("vm/scale");
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(100));
    both_in_memory(&mut g, &SCALE);
    g.finish();
}

/// `program` run durably in a new run directory under `dir` each iteration, the ones
/// before removed outside the timing.
fn durable_run(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    program: &prose_runtime::program::Program,
    dir: &std::path::Path,
) {
    g.bench_function(name, |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_dir_all(dir);
            },
            |()| prose_benches::run_mock_durable(program, dir),
            BatchSize::PerIteration,
        )
    });
}

fn durable(c: &mut Criterion) {
    let mut g = c.benchmark_group("vm/durable");
    g.sample_size(10);
    let dir = std::env::temp_dir().join(format!("prose-bench-run-{}", std::process::id()));
    for n in SIZES {
        for (what, src) in [
            ("chain", prose_benches::session_chain(n)),
            ("pmap fan-out", prose_benches::fan_out(n)),
        ] {
            let a = prose_benches::compile(&src);
            durable_run(&mut g, &format!("{what} of {n} sessions"), &a, &dir);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    g.finish();
}

fn real_shaped(c: &mut Criterion) {
    let mut g = c.benchmark_group("vm/real-shaped");
    g.sample_size(10);
    let dir = std::env::temp_dir().join(format!("prose-bench-real-{}", std::process::id()));
    // Project-scoped memory lives in the state directory too: each run starts without any.
    // 2,002 sessions: the mock's memory keeps a line per session and every answer carries
    // all of it, so the journal grows with the square of a loop's length (at the published
    // program's 20,000 sessions, over 100 MB), which a real model's notes do not.
    for rounds in [400] {
        let sessions = 5 * rounds + 2;
        for (what, src) in [
            ("patrol", prose_benches::patrol(rounds)),
            ("chain", prose_benches::session_chain(sessions - 1)),
        ] {
            let a = prose_benches::compile(&src);
            durable_run(&mut g, &format!("{what} of {sessions} sessions"), &a, &dir);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    g.finish();
}

fn load(c: &mut Criterion) {
    let mut g = c.benchmark_group("vm/load and verify");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(1));
    for (name, bytes) in prose_benches::example_artifacts() {
        g.bench_function(name, |b| {
            b.iter(|| bytecode_spec::artifact::load(&bytes).expect("verifies"))
        });
    }
    g.finish();
}

criterion_group!(benches, in_memory, scale, durable, real_shaped, load);
criterion_main!(benches);
