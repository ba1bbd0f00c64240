//! Costs that must grow in proportion to the input, however it is laid out: building a
//! program whose list literal has hundreds of thousands of elements, and rendering text
//! diagnostics on a line megabytes long. Criterion reports time per element and per byte;
//! equal figures across sizes mean linear cost.
//! Run: `cargo bench -p prose-benches --bench long_inputs`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use prosec::compile::{Compilation, Options};
use prosec::diagnostics::{termcolor::NoColor, Code};
use prosec::lints::Level;
use std::path::Path;

// The same allocator as the `prosec` binary, so the figures match the CLI.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn build_long_list(c: &mut Criterion) {
    let mut group = c.benchmark_group("build list literal");
    group.sample_size(10);
    // 200,000 elements is about the most an artifact can hold (the loader caps a decoded
    // program at 16 MiB).
    for n in [25_000u64, 50_000, 100_000, 200_000] {
        let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        let src = format!("let xs = [{}]\noutput n = xs\n", items.join(", "));
        group.throughput(Throughput::Elements(n));
        group.bench_with_input(BenchmarkId::from_parameter(n), &src, |b, src| {
            b.iter(|| {
                let mut comp = Compilation::new(Options::default());
                let root = comp.add_source(Path::new("list.prose"), src);
                prosec::codegen::build_bytes(&comp, root)
                    .expect("builds")
                    .0
                    .len()
            })
        });
    }
    group.finish();
}

fn render_long_line(c: &mut Criterion) {
    let mut group = c.benchmark_group("render text diagnostics on one line");
    group.sample_size(10);
    for kib in [128usize, 1024, 4096] {
        // One line of `kib` KiB with an unknown `{placeholder}` every 64 bytes (E140 each).
        let unit = format!("{:<50}{{missing}} ", "words words words");
        let line = unit.repeat(kib * 1024 / unit.len());
        let src = format!("session \"{line}\"\n");
        let mut comp = Compilation::new(Options {
            lints: vec![(Code::E140, Level::Warn)],
            ..Options::default()
        });
        comp.add_source(Path::new("long.prose"), &src);
        assert!(comp.diagnostics.len() > kib * 10);
        group.throughput(Throughput::Bytes(src.len() as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{kib} KiB")),
            &comp,
            |b, comp| {
                b.iter(|| {
                    let mut out = NoColor::new(std::io::sink());
                    prosec::diagnostics::render_text(&mut out, &comp.sources, &comp.diagnostics)
                        .expect("render")
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, build_long_list, render_long_line);
criterion_main!(benches);
