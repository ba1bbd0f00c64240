//! Writes the benchmark workflows as `.prose` files, for whole-process measurements and the
//! side-by-side comparison with LangGraph (`benches/langgraph/side_by_side.sh`):
//! `one.prose` (a single session), `chain-N.prose` ([`prose_benches::session_chain`]) and
//! `fan-N.prose` ([`prose_benches::fan_out`]) for N = 2,000, 5,000 and 20,000.
//!
//! `cargo run --release -p prose-benches --example write_programs -- DIR`

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    std::fs::create_dir_all(&dir).expect("the output directory can be created");
    let mut files = vec![("one.prose".to_string(), prose_benches::session_chain(0))];
    for n in [2_000, 5_000, 20_000] {
        files.push((format!("chain-{n}.prose"), prose_benches::session_chain(n)));
        files.push((format!("fan-{n}.prose"), prose_benches::fan_out(n)));
    }
    for (name, text) in files {
        std::fs::write(dir.join(&name), text).expect("the program can be written");
        println!("{}", dir.join(name).display());
    }
}
