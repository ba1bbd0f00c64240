//! Runs a VM benchmark workload for profilers: `profile_vm N ROUNDS [WORKLOAD]`, where
//! WORKLOAD is `fan-out` (the default), `chain`, `patrol` ([`prose_benches::patrol`] with
//! about N sessions), or any of them with `-durable` (journaled in a run directory, as
//! `prosevm run` does, each run from an empty state directory). Prints the time per run and the process's peak
//! resident memory (VmHWM), whole and per session.

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
    let workload = std::env::args().nth(3).unwrap_or_else(|| "fan-out".into());
    let src = match workload.as_str() {
        "fan-out" | "fan-out-durable" => prose_benches::fan_out(n),
        "chain" | "chain-durable" => prose_benches::session_chain(n),
        "patrol" | "patrol-durable" => prose_benches::patrol(n.saturating_sub(2).div_ceil(5)),
        other => {
            eprintln!(
                "unknown workload {other}: use fan-out, chain or patrol, each with -durable or not"
            );
            std::process::exit(2);
        }
    };
    let a = prose_benches::compile(&src);
    let dir = std::env::temp_dir().join(format!("prose-profile-run-{}", std::process::id()));
    let mut spent = std::time::Duration::ZERO;
    for _ in 0..rounds {
        // Each durable run starts from an empty state directory (as the criterion benches
        // do): no project memory left by the last, and its removal not timed.
        let _ = std::fs::remove_dir_all(&dir);
        let start = std::time::Instant::now();
        if workload.ends_with("-durable") {
            std::hint::black_box(prose_benches::run_mock_durable(&a, &dir));
        } else {
            std::hint::black_box(prose_benches::run_mock(&a));
        }
        spent += start.elapsed();
    }
    let peak = prose_benches::status_bytes("VmHWM:").unwrap_or(0) as u64;
    println!(
        "{:.2} ms per run; peak resident {:.1} MB, {} bytes per session",
        spent.as_secs_f64() * 1e3 / rounds as f64,
        peak as f64 / 1e6,
        peak / n.max(1) as u64
    );
    let _ = std::fs::remove_dir_all(&dir);
}
