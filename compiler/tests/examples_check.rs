//! Every program under the workspace's `examples/` directory checks without errors, and
//! reports exactly the warnings listed in [`EXPECTED_WARNINGS`] (every lint reported) and
//! [`EXPECTED_BY_DEFAULT`] (the default lint levels), so a change to the checker that adds,
//! drops or renames a warning on a shipped example is noticed.

use prosec::compile::{Compilation, Options};
use prosec::diagnostics::termcolor::NoColor;
use prosec::diagnostics::Code;
use prosec::lints::Level;
use std::path::{Path, PathBuf};

/// The warning codes each example reports with every lint warned, one entry per
/// diagnostic, sorted. Files not listed must report none. Keys are paths relative to
/// `examples/`, with `/` separators.
const EXPECTED_WARNINGS: &[(&str, &[&str])] = &[
    // A loop without `(max: N)` is allowed with the reference's warning.
    ("bug-hunt.prose", &["W108"]),
    // `{N}` is a placeholder for the model to fill: literal text, with a relaxed warning.
    ("changelog-writer.prose", &["E140"]),
    // Two mid-program inputs (relaxed E022).
    ("trip-planner.prose", &["E022", "E022"]),
];

/// The same with the default lint levels (E140 and E022 are allowed by default).
const EXPECTED_BY_DEFAULT: &[(&str, &[&str])] = &[("bug-hunt.prose", &["W108"])];

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the compiler crate sits inside the workspace")
        .join("examples")
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|x| x == "prose") {
            out.push(path);
        }
    }
}

/// Each example's path relative to `examples/` (with `/` separators) and its full path.
fn examples() -> Vec<(String, PathBuf)> {
    let root = examples_dir();
    let mut files = Vec::new();
    collect(&root, &mut files);
    files
        .into_iter()
        .map(|path| {
            let rel = path
                .strip_prefix(&root)
                .expect("found under examples/")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            (rel, path)
        })
        .collect()
}

/// Compiles one example (and the programs it imports), with every lint warned or with the
/// default levels, and returns its rendered diagnostics and the warning codes reported in
/// the example itself, sorted.
fn check(path: &Path, every_lint: bool) -> (String, Vec<String>, usize) {
    let lints = Code::ALL
        .iter()
        .filter(|c| every_lint && c.is_lint())
        .map(|&c| (c, Level::Warn))
        .collect();
    let mut c = Compilation::new(Options {
        lints,
        ..Options::default()
    });
    let module = c
        .add_file(path)
        .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()));
    let file = c.modules[module].file;
    let mut rendered = NoColor::new(Vec::new());
    prosec::diagnostics::render_text(&mut rendered, &c.sources, &c.diagnostics)
        .expect("rendering to memory cannot fail");
    let mut warnings: Vec<String> = c
        .diagnostics
        .iter()
        .filter(|d| d.file == file && !d.is_error())
        .map(|d| d.code.to_string())
        .collect();
    warnings.sort();
    let text = String::from_utf8_lossy(&rendered.into_inner()).into_owned();
    (text, warnings, c.error_count())
}

#[test]
fn there_are_examples() {
    let names: Vec<String> = examples().into_iter().map(|(rel, _)| rel).collect();
    assert!(
        names.len() >= 10,
        "expected at least 10 examples, found {names:?}"
    );
    assert!(
        names.iter().any(|n| n == "hello.prose"),
        "hello.prose is missing"
    );
}

#[test]
fn examples_check_without_errors() {
    let mut failures = Vec::new();
    for (rel, path) in examples() {
        let (text, _, errors) = check(&path, false);
        if errors > 0 {
            failures.push(format!("{rel}: {errors} error(s)\n{text}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn examples_report_exactly_the_expected_warnings() {
    let found = examples();
    for (table, every_lint) in [(EXPECTED_WARNINGS, true), (EXPECTED_BY_DEFAULT, false)] {
        for (name, _) in table {
            assert!(
                found.iter().any(|(rel, _)| rel == name),
                "{name} is listed, but it is not in examples/"
            );
        }
        let mut failures = Vec::new();
        for (rel, path) in &found {
            let (text, warnings, _) = check(path, every_lint);
            let expected: Vec<String> = table
                .iter()
                .find(|(name, _)| name == rel)
                .map(|(_, codes)| codes.iter().map(|c| c.to_string()).collect())
                .unwrap_or_default();
            if warnings != expected {
                failures.push(format!(
                    "{rel} (every lint: {every_lint}): expected warnings {expected:?}, found {warnings:?}\n{text}"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
