//! Runs `build` over the benchmark corpus repeatedly, for profilers (`perf record`).
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
        .unwrap_or(3);
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        // Like `prosec build`: one compilation per program.
        for p in &corpus {
            let mut c = Compilation::new(Options::default());
            let root = c.add_source(Path::new(&p.name), &p.text);
            std::hint::black_box(prosec::codegen::build_bytes(&c, root).expect("writable"));
        }
    }
    let bytes: usize = corpus.iter().map(|p| p.text.len()).sum::<usize>() * rounds;
    println!(
        "{:.1} MB/s",
        bytes as f64 / start.elapsed().as_secs_f64() / 1e6
    );
}
