//! Golden disassembly: one program per construct family, compiled and disassembled, compared
//! with the listing kept beside it. Run with `PROSEC_BLESS=1` to rewrite the listings after
//! an intended change, then review the diff.

use prosec::compile::{Compilation, Options};
use std::path::Path;

fn golden(name: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let src = dir.join(format!("{name}.prose"));
    let mut c = Compilation::new(Options {
        require_imports: true,
        ..Options::default()
    });
    let root = c.add_file(&src).expect("readable");
    assert_eq!(c.error_count(), 0, "{name}: {:?}", c.diagnostics);
    let bytes = prosec::codegen::build_bytes(&c, root).expect("writable").0;
    let (header, artifact) = bytecode_spec::artifact::load(&bytes).expect("verifies");
    let listing = bytecode_spec::dis::disassemble(&header, &artifact);
    let expected_path = dir.join(format!("{name}.dis"));
    if std::env::var_os("PROSEC_BLESS").is_some() {
        std::fs::write(&expected_path, &listing).expect("bless");
        return;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|_| {
        panic!(
            "missing {}; run with PROSEC_BLESS=1",
            expected_path.display()
        )
    });
    if listing != expected {
        let diff: Vec<String> = listing
            .lines()
            .zip(expected.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(5)
            .map(|(i, (a, b))| format!("line {}:\n  got:      {a}\n  expected: {b}", i + 1))
            .collect();
        panic!(
            "{name}: listing differs (PROSEC_BLESS=1 rewrites it)\n{}",
            diff.join("\n")
        );
    }
}

#[test]
fn sessions_and_agents() {
    golden("sessions");
}

#[test]
fn variables_and_context() {
    golden("variables");
}

#[test]
fn blocks_and_recursion() {
    golden("blocks");
}

#[test]
fn parallel_blocks_and_fan_out() {
    golden("parallel");
}

#[test]
fn fixed_and_unbounded_loops() {
    golden("loops");
}

#[test]
fn pipelines() {
    golden("pipelines");
}

#[test]
fn error_handling() {
    golden("errors");
}

#[test]
fn choices_and_conditionals() {
    golden("choices");
}

#[test]
fn inputs_and_outputs() {
    golden("io");
}

#[test]
fn imported_programs() {
    golden("imports");
}
