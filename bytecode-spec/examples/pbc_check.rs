//! Loads and verifies `.pbc` files given on the command line (a development aid).
fn main() {
    let mut failed = false;
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).unwrap_or_default();
        match bytecode_spec::artifact::load(&bytes) {
            Ok((_, a)) => println!("{path}: ok, {} module(s)", a.modules.len()),
            Err(e) => {
                failed = true;
                println!("{path}: {e}");
            }
        }
    }
    std::process::exit(i32::from(failed));
}
