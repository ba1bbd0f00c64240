//! Runs on PostgreSQL: runs per second (and requests per second: three per run) with 1, 2
//! and 4 workers draining a queue, with the mock driver answering at once (workers writing
//! each run's views, and workers keeping none: `--no-views`) and with the mock answering
//! after 100 ms (a stand-in for a model). Each worker runs 8 runs at once on its
//! own thread, runtime and connection pool, as separate `prosevm worker` processes would.
//!
//! The server: `PROSE_TEST_PG_URL`, else a throwaway cluster of Debian's PostgreSQL 15 with
//! its default durability (fsync and synchronous commit on), started for the bench; with
//! neither, the bench says so and measures nothing.
//!
//! Run: `cargo bench -p prose-benches --bench pg`.

#[path = "../../vm/tests/support/pg.rs"]
#[allow(dead_code)]
mod pg;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use prose_runtime::driver::mock::MockOptions;
use prose_runtime::driver::settings::DriverSettings;
use prose_runtime::runner::StopSignal;
use prose_store::pg::lease::WorkerId;
use prose_store::pg::PgStore;
use prosevm::worker::{WorkerOptions, WorkerReport};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs at once per worker.
const CONCURRENCY: usize = 8;

/// Enqueues `runs` runs of `program` answered by `driver`.
fn submit(
    rt: &tokio::runtime::Runtime,
    store: &PgStore,
    program: &prose_runtime::program::Program,
    driver: &DriverSettings,
    runs: usize,
) {
    rt.block_on(async {
        for _ in 0..runs {
            store
                .submit(
                    program,
                    Default::default(),
                    driver.clone(),
                    Default::default(),
                )
                .await
                .expect("submits");
        }
    });
}

/// `workers` workers, each on a thread of its own, drain the queue; returns how long that
/// took.
fn drain(url: &str, workers: usize, views: bool, state: &std::path::Path) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let url = url.to_string();
            let state = state.to_path_buf();
            std::thread::spawn(move || -> WorkerReport {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async {
                    let store = prosevm::worker::connect(&url, CONCURRENCY)
                        .await
                        .expect("connects");
                    let opts = WorkerOptions {
                        concurrency: CONCURRENCY,
                        poll: Duration::from_millis(20),
                        workdir: state.clone(),
                        place: prosevm::run::Place {
                            state_dir: Some(state),
                            ..Default::default()
                        },
                        exit_when_idle: true,
                        views,
                        ..WorkerOptions::default()
                    };
                    prosevm::worker::work(
                        &store,
                        &WorkerId::new(),
                        &opts,
                        &StopSignal::default(),
                        &|_| {},
                    )
                    .await
                })
            })
        })
        .collect();
    for h in handles {
        let report = h.join().expect("worker thread");
        assert_eq!(report.failed + report.lost, 0, "{report:?}");
    }
    start.elapsed()
}

fn pg(c: &mut Criterion) {
    let Some(url) = pg::durable_database("bench") else {
        eprintln!("pg bench: no PostgreSQL server; nothing measured");
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let store = rt.block_on(PgStore::connect(&url, 2)).expect("connects");
    let program = prose_benches::compile(&prose_benches::session_chain(2));
    let state = std::env::temp_dir().join(format!("prose-bench-pg-{}", std::process::id()));
    // (name, the mock's latency, runs per iteration, whether workers write views)
    let drivers = [
        ("mock", Duration::ZERO, 200, true),
        ("mock, no views", Duration::ZERO, 200, false),
        (
            "mock, 100 ms per request",
            Duration::from_millis(100),
            48,
            true,
        ),
    ];
    for (name, latency, runs, views) in drivers {
        let driver = DriverSettings::Mock(MockOptions {
            latency,
            ..MockOptions::default()
        });
        let mut g = c.benchmark_group(format!("pg/{name}"));
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(5))
            .throughput(Throughput::Elements(runs as u64));
        for workers in [1, 2, 4] {
            g.bench_function(
                BenchmarkId::new("runs", format!("{workers} workers")),
                |b| {
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            submit(&rt, &store, &program, &driver, runs);
                            total += drain(&url, workers, views, &state);
                            let left = pg::query(
                                &url,
                                "SELECT count(*) FROM prose_runs WHERE status <> 'finished'",
                            );
                            assert_eq!(left[0][0], "0", "every run finished");
                            pg::query(&url, "TRUNCATE prose_journal, prose_runs");
                            let _ = std::fs::remove_dir_all(&state);
                        }
                        total
                    })
                },
            );
        }
        g.finish();
    }
}

criterion_group!(benches, pg);
criterion_main!(benches);
