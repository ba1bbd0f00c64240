//! The HTTP drivers against a fake OpenAI-compatible provider on 127.0.0.1
//! (`prose_benches::provider`), run the way `prosevm run --driver openai` runs them, with the
//! settings it takes by default.
//!
//! `provider/rate limited/...`: a `pmap` fan-out of 600 sessions against a provider that
//! answers in 25 ms (a hosted model's 0.25 s scaled down tenfold) and refuses with 429 and
//! `retry-after` beyond its limit: 48 requests in flight, or a bucket of 48 refilled at
//! 1,920 a second (the same throughput, as a per-minute limit is kept). The provider's limit
//! allows the fan-out in 600 / 48 × 25 ms = 312 ms; the target is 1.5 times that (469 ms),
//! with under 10% of the requests refused. Each iteration starts a new provider, so every
//! run learns its window from nothing; the share refused is printed.
//!
//! `provider/no latency/...`: requests per second through one connection pool against a
//! provider that answers at once (criterion's throughput, in elements per second, is
//! sessions per second).
//!
//! Run: `cargo bench -p prose-benches --bench provider`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use prose_benches::provider::{Limit, Provider};
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SESSIONS: usize = 600;
const LATENCY: Duration = Duration::from_millis(25);

fn rate_limited(c: &mut Criterion) {
    let mut g = c.benchmark_group("provider/rate limited");
    g.sample_size(10);
    let dir = std::env::temp_dir().join(format!("prose-bench-provider-{}", std::process::id()));
    let program = prose_benches::compile(&prose_benches::fan_out(SESSIONS));
    for (place, durable) in [("in memory", false), ("durable", true)] {
        for (what, limit) in [
            ("48 in flight", Limit::InFlight(48)),
            (
                "48 a bucket, 1,920 a second",
                Limit::Rate {
                    burst: 48,
                    per_second: 1920.0,
                },
            ),
        ] {
            let mut seen = (0, 0);
            g.bench_function(format!("{place}, fan-out of {SESSIONS}, {what}"), |b| {
                b.iter_batched(
                    || {
                        let _ = std::fs::remove_dir_all(&dir);
                        Provider::start(limit, LATENCY)
                    },
                    |provider| {
                        if durable {
                            prose_benches::run_openai_durable(&program, &dir, &provider.url);
                        } else {
                            prose_benches::run_openai(&program, &provider.url);
                        }
                        let (n, refused) = provider.counts();
                        seen = (seen.0 + n, seen.1 + refused);
                    },
                    BatchSize::PerIteration,
                )
            });
            if seen.0 == 0 {
                // Filtered out.
                continue;
            }
            let share = seen.1 as f64 / seen.0 as f64;
            println!(
            "provider/rate limited, {place}, {what}: {} of {} requests refused ({:.1}%); the limit allows {:.1} ms",
            seen.1,
            seen.0,
            share * 100.0,
            SESSIONS as f64 / 48.0 * LATENCY.as_secs_f64() * 1000.0
        );
            assert!(
                share < 0.10,
                "{:.1}% of the requests refused",
                share * 100.0
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    g.finish();
}

fn no_latency(c: &mut Criterion) {
    let mut g = c.benchmark_group("provider/no latency");
    g.sample_size(10);
    let n = 2_000;
    g.throughput(Throughput::Elements(n as u64));
    let provider = Provider::start(Limit::None, Duration::ZERO);
    let dir = std::env::temp_dir().join(format!("prose-bench-rps-{}", std::process::id()));
    let program = prose_benches::compile(&prose_benches::fan_out(n));
    g.bench_function(format!("in memory, fan-out of {n} sessions"), |b| {
        b.iter(|| prose_benches::run_openai(&program, &provider.url))
    });
    g.bench_function(format!("durable, fan-out of {n} sessions"), |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_dir_all(&dir);
            },
            |()| prose_benches::run_openai_durable(&program, &dir, &provider.url),
            BatchSize::PerIteration,
        )
    });
    let _ = std::fs::remove_dir_all(&dir);
    g.finish();
}

criterion_group!(benches, rate_limited, no_latency);
criterion_main!(benches);
