//! VM throughput with the mock driver at zero latency.
//! Targets: 20,000 chained sessions in at most 50 ms; a 20,000-session `pmap` fan-out (over
//! a list built by appending) plus one joining session in at most 100 ms; cost linear in N;
//! the 20,000-session chain run durably (journal, binding files, `state.md`, as `prosevm run`
//! does) within 3x of the in-memory run.
//! Run: `cargo bench -p prose-benches --bench vm`.

use criterion::{criterion_group, criterion_main, Criterion};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn chain(c: &mut Criterion) {
    let mut g = c.benchmark_group("vm");
    g.sample_size(10);
    for n in [2_000, 20_000] {
        let a = prose_benches::compile(&prose_benches::session_chain(n));
        g.bench_function(format!("chain of {n} sessions"), |b| {
            b.iter(|| prose_benches::run_mock(&a))
        });
        let a = prose_benches::compile(&prose_benches::fan_out(n));
        g.bench_function(format!("pmap fan-out of {n} sessions"), |b| {
            b.iter(|| prose_benches::run_mock(&a))
        });
    }
    let a = prose_benches::compile(&prose_benches::session_chain(20_000));
    let dir = std::env::temp_dir().join(format!("prose-bench-run-{}", std::process::id()));
    g.bench_function("chain of 20000 sessions, durable", |b| {
        b.iter(|| prose_benches::run_mock_durable(&a, &dir))
    });
    let _ = std::fs::remove_dir_all(&dir);
    g.finish();
}

criterion_group!(benches, chain);
criterion_main!(benches);
