//! `build` throughput (check, lower, encode, compress) over the generated corpus, and the
//! time to load and verify a typical artifact.
//! Targets: at least 25 MB/s of source; at most 50 µs to load a 50-statement program.
//! Run: `cargo bench -p prose-benches --bench build`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use prosec::compile::{Compilation, Options};
use std::path::Path;

// The same allocator as the `prosec` binary, so the figures match the CLI.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn build_corpus(c: &mut Criterion) {
    let corpus = prose_benches::corpus(4 << 20);
    let bytes: usize = corpus.iter().map(|p| p.text.len()).sum();
    let mut group = c.benchmark_group("build");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.sample_size(10);
    group.bench_function(format!("{} programs, {} bytes", corpus.len(), bytes), |b| {
        b.iter(|| {
            // Like `prosec build`: one compilation per program.
            let mut out = 0;
            for p in &corpus {
                let mut comp = Compilation::new(Options::default());
                let root = comp.add_source(Path::new(&p.name), &p.text);
                assert_eq!(comp.error_count(), 0);
                out += prosec::codegen::build_bytes(&comp, root)
                    .expect("writable")
                    .0
                    .len();
            }
            out
        })
    });
    group.finish();
}

fn load_typical(c: &mut Criterion) {
    let src = prose_benches::fifty_statements();
    let mut comp = Compilation::new(Options::default());
    let root = comp.add_source(Path::new("typical.prose"), &src);
    assert_eq!(comp.error_count(), 0, "{:?}", comp.diagnostics);
    let bytes = prosec::codegen::build_bytes(&comp, root)
        .expect("writable")
        .0;
    c.bench_function(
        &format!("load+verify 50-statement artifact ({} bytes)", bytes.len()),
        |b| b.iter(|| bytecode_spec::artifact::load(&bytes).expect("valid")),
    );
}

criterion_group!(benches, build_corpus, load_typical);
criterion_main!(benches);
