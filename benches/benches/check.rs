//! `check` throughput over a generated multi-megabyte corpus covering every construct.
//! Target: at least 40 MB/s of source. Run: `cargo bench -p prose-benches --bench check`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use prosec::compile::{Compilation, Options};
use std::path::Path;

// The same allocator as the `prosec` binary, so the figures match the CLI.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn check_corpus(c: &mut Criterion) {
    let corpus = prose_benches::corpus(4 << 20);
    let bytes: usize = corpus.iter().map(|p| p.text.len()).sum();
    let mut group = c.benchmark_group("check");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.sample_size(10);
    group.bench_function(format!("{} programs, {} bytes", corpus.len(), bytes), |b| {
        b.iter(|| {
            let mut comp = Compilation::new(Options::default());
            for p in &corpus {
                comp.add_source(Path::new(&p.name), &p.text);
            }
            assert_eq!(comp.error_count(), 0);
            comp
        })
    });
    group.finish();
}

criterion_group!(benches, check_corpus);
criterion_main!(benches);
