//! VM throughput with the mock driver at zero latency.
//! Targets: 20,000 chained sessions in at most 50 ms; a 20,000-session `pmap` fan-out (over
//! a list built by appending) plus one joining session in at most 100 ms; cost linear in N.
//! Run: `cargo bench -p prose-benches --bench vm`.

use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::Arc;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn chain(c: &mut Criterion) {
    let mut g = c.benchmark_group("vm");
    g.sample_size(10);
    for n in [2_000, 20_000] {
        let a = Arc::new(prose_benches::compile(&prose_benches::session_chain(n)));
        g.bench_function(format!("chain of {n} sessions"), |b| {
            b.iter(|| prose_benches::run_mock(&a))
        });
        let a = Arc::new(prose_benches::compile(&prose_benches::fan_out(n)));
        g.bench_function(format!("pmap fan-out of {n} sessions"), |b| {
            b.iter(|| prose_benches::run_mock(&a))
        });
    }
    g.finish();
}

criterion_group!(benches, chain);
criterion_main!(benches);
