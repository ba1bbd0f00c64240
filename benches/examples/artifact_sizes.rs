//! Prints the artifact size of every program in `examples/` against its source size
//! (the program plus the programs it imports). Run:
//! `cargo run --release -p prose-benches --example artifact_sizes`.
use prosec::compile::{Compilation, Options};
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    entries.sort();
    let (mut total_src, mut total_pbc) = (0usize, 0usize);
    for path in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "prose"))
    {
        let mut c = Compilation::new(Options {
            require_imports: true,
            ..Options::default()
        });
        let Ok(root) = c.add_file(path) else { continue };
        if c.error_count() > 0 {
            continue;
        }
        let bytes = prosec::codegen::build_bytes(&c, root).expect("writable").0;
        let src: usize = (0..c.sources.len())
            .map(|f| c.sources.get(f).text.len())
            .sum();
        total_src += src;
        total_pbc += bytes.len();
        println!(
            "{:28} source {:6}  artifact {:6}  ratio {:.2}",
            path.file_name()
                .map(|f| f.to_string_lossy())
                .unwrap_or_default(),
            src,
            bytes.len(),
            bytes.len() as f64 / src as f64
        );
    }
    println!(
        "{:28} source {:6}  artifact {:6}  ratio {:.2}",
        "all examples",
        total_src,
        total_pbc,
        total_pbc as f64 / total_src.max(1) as f64
    );
}
