//! Runs the VM fan-out benchmark workload for profilers: `profile_vm N ROUNDS`.
use std::sync::Arc;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let rounds: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let a = Arc::new(prose_benches::compile(&prose_benches::fan_out(n)));
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(prose_benches::run_mock(&a));
    }
    println!(
        "{:.2} ms per run",
        start.elapsed().as_secs_f64() * 1e3 / rounds as f64
    );
}
