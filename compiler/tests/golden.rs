//! Golden disassembly: one program per construct family (and one carrying a skill),
//! compiled and disassembled, compared with the listing kept beside it. Each program's artifact is saved too (`{name}.pbc`): it
//! must still decode to the same listing, so a change of the encoding (opcodes and tables
//! are encoded by enum order) fails here unless `FORMAT_VERSION` changed with it, in which
//! case the loader must refuse the old file. Run with `PROSEC_BLESS=1` to rewrite the
//! listings and artifacts after an intended change, then review the diff.

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
    // Skills come from directories beside the programs: no network, no lock written.
    let mut fetcher = prosec::ship::Fetcher::new(
        &src,
        prosec::ship::FetchOptions {
            offline: true,
            cache_dir: Some(Path::new(env!("CARGO_TARGET_TMPDIR")).join("golden-cache")),
            ..Default::default()
        },
    );
    let (bundle, problems) = c.bundle(root, &mut fetcher);
    assert!(problems.is_empty(), "{name}: {problems:?}");
    let bytes = prosec::codegen::build_bytes_bundled(&c, root, &bundle)
        .expect("writable")
        .0;
    let (header, artifact) = bytecode_spec::artifact::load(&bytes).expect("verifies");
    let listing = bytecode_spec::dis::disassemble(&header, &artifact);
    let expected_path = dir.join(format!("{name}.dis"));
    let saved_path = dir.join(format!("{name}.pbc"));
    if std::env::var_os("PROSEC_BLESS").is_some() {
        std::fs::write(&expected_path, &listing).expect("bless");
        std::fs::write(&saved_path, &bytes).expect("bless");
        return;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|_| {
        panic!(
            "missing {}; run with PROSEC_BLESS=1",
            expected_path.display()
        )
    });
    saved_artifact_decodes_to(&saved_path, &expected);
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

/// Checks that the artifact saved at `path` decodes to the listing `expected`, or, if it was
/// written in an older format version, that the loader refuses it saying so.
fn saved_artifact_decodes_to(path: &Path, expected: &str) {
    let saved = std::fs::read(path)
        .unwrap_or_else(|_| panic!("missing {}; run with PROSEC_BLESS=1", path.display()));
    match bytecode_spec::artifact::load(&saved) {
        Ok((header, artifact)) => {
            let decoded = bytecode_spec::dis::disassemble(&header, &artifact);
            assert!(
                decoded == expected,
                "{} decodes to a different listing: the encoding changed without \
                 FORMAT_VERSION changing (bump it, then PROSEC_BLESS=1)",
                path.display()
            );
        }
        Err(e) => assert!(
            e.to_string()
                .contains("unsupported artifact format version"),
            "{}: refused for another reason than its version: {e}",
            path.display()
        ),
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

#[test]
fn bundled_skills() {
    golden("skills");
}
