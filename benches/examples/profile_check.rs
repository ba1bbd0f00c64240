//! Runs `check` over the benchmark corpus repeatedly, for profilers (`perf record`).
use prosec::compile::{Compilation, Options};
use std::path::Path;

// The same allocator as the `prosec` binary, so the figures match the CLI.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let corpus = prose_benches::corpus(4 << 20);
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        let mut c = Compilation::new(Options::default());
        for p in &corpus {
            c.add_source(Path::new(&p.name), &p.text);
        }
        assert_eq!(c.error_count(), 0);
    }
    let bytes: usize = corpus.iter().map(|p| p.text.len()).sum::<usize>() * rounds;
    let secs = start.elapsed().as_secs_f64();
    println!("{:.1} MB/s", bytes as f64 / secs / 1e6);
}
