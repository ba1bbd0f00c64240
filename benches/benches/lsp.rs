//! The language server's requests on a program of about 1,500 lines using every construct.
//! Target: every request under 50 ms, re-analysis on each edit included.
//! Run: `cargo bench -p prose-benches --bench lsp`.

use criterion::{criterion_group, criterion_main, Criterion};
use lsp_types::{Position, Range, Uri};
use prosec::lsp::workspace::Workspace;
use prosec::lsp::{complete, document::Document, hints, hover, navigate, outline};
use std::path::PathBuf;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn requests(c: &mut Criterion) {
    let text = prose_benches::large_program(1500);
    let lines = text.lines().count();
    let uri: Uri = "file:///bench/large.prose".parse().expect("uri");
    let path = PathBuf::from("/bench/large.prose");
    let doc = Document::new(uri.clone(), path.clone(), text.clone());
    // No folder: the names renamed here are the program's own.
    let ws = Workspace::new(None);
    assert_eq!(doc.comp.error_count(), 0);
    // A name used many times (the last copy's plan), an agent, and the end of the file.
    let plan = text.rfind("context: plan").expect("plan") + "context: ".len();
    let agent = text.rfind("session: researcher").expect("agent") + "session: ".len();
    let interp = text.rfind("{item}").expect("interpolation") + 2;
    let mut group = c.benchmark_group(format!("lsp ({lines} lines)"));
    group.sample_size(20);
    group.bench_function("analyse after an edit", |b| {
        b.iter(|| Document::new(uri.clone(), path.clone(), text.clone()))
    });
    group.bench_function("definition", |b| {
        b.iter(|| navigate::definition(&doc, plan))
    });
    group.bench_function("references", |b| {
        b.iter(|| navigate::references(&ws, &doc, plan, true))
    });
    group.bench_function("rename", |b| {
        b.iter(|| navigate::rename(&ws, &doc, plan, "scheme"))
    });
    group.bench_function("hover on an agent", |b| {
        b.iter(|| hover::hover(&doc, agent))
    });
    group.bench_function("completion in an interpolation", |b| {
        b.iter(|| complete::complete(&doc, interp))
    });
    group.bench_function("semantic tokens", |b| {
        b.iter(|| outline::semantic_tokens(&doc))
    });
    group.bench_function("document symbols", |b| {
        b.iter(|| outline::document_symbols(&doc))
    });
    group.bench_function("folding ranges", |b| {
        b.iter(|| outline::folding_ranges(&doc))
    });
    let all = Range::new(Position::new(0, 0), Position::new(lines as u32, 0));
    group.bench_function("inlay hints", |b| b.iter(|| hints::inlay_hints(&doc, all)));
    group.bench_function("formatting", |b| {
        b.iter(|| prosec::fmt::format(&text, &Default::default()).expect("formats"))
    });
    group.finish();
}

criterion_group!(benches, requests);
criterion_main!(benches);
