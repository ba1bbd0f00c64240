//! The language reference's examples as a test corpus.
//!
//! `tests/spec-examples/NNN.prose` holds the NNN-th fenced ```` ```prose ```` block of
//! `language-reference-full.md`, in order of appearance. `tests/spec-examples/MANIFEST.txt`
//! has one line per block: `NNN valid`, or `NNN skip KIND: why`, where KIND is
//!
//! - `template`: a syntax template with placeholders (`statements...`, `agentName`);
//! - `error`: the block shows an error on purpose;
//! - `fragment`: the block uses names it does not define (the reason says where they come
//!   from, usually an earlier block).
//!
//! Valid blocks must check without errors. Every block must parse without panicking, and
//! every block except templates must parse without syntax errors. A skipped block must
//! still fail to check; once it checks cleanly, it belongs in the `valid` list.
//!
//! When the reference is present (at `../shared/spec/` beside the workspace), the corpus
//! must match a fresh extraction. To rewrite the `.prose` files from the reference, run
//! `PROSEC_BLESS_SPEC_EXAMPLES=1 cargo test -p prosec --test spec_examples corpus_matches`;
//! the manifest is kept by hand.

use prosec::compile::{Compilation, Options};
use prosec::diagnostics::termcolor::NoColor;
use std::path::{Path, PathBuf};

/// How a manifest line classifies its block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Checks without errors.
    Valid,
    /// A syntax template with placeholders; it need not even parse.
    Template,
    /// Shows an error on purpose.
    Error,
    /// Uses names defined elsewhere.
    Fragment,
}

/// One manifest line.
struct Entry {
    /// The block number, as written (`001`).
    number: String,
    class: Class,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spec-examples")
}

fn spec_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the compiler crate sits inside the workspace")
        .join("../shared/spec/language-reference-full.md")
}

/// The contents of every ```` ```prose ```` block of a Markdown document, in order. A fence
/// may be indented (inside a list item); that much indentation is removed from its lines.
fn extract_prose_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start_matches(' ');
        if trimmed.trim_end() != "```prose" {
            continue;
        }
        let indent = line.len() - trimmed.len();
        let mut block = String::new();
        for body in lines.by_ref() {
            if body.trim() == "```" {
                break;
            }
            let strip = body.len() - body.trim_start_matches(' ').len();
            block.push_str(&body[strip.min(indent)..]);
            block.push('\n');
        }
        blocks.push(block);
    }
    blocks
}

fn file_name(index: usize) -> String {
    format!("{:03}.prose", index + 1)
}

fn read_manifest() -> Vec<Entry> {
    let path = corpus_dir().join("MANIFEST.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let mut words = line.splitn(3, ' ');
            let number = words.next().unwrap_or_default().to_string();
            assert_eq!(
                number,
                format!("{:03}", i + 1),
                "MANIFEST.txt line {} must describe block {:03}: {line:?}",
                i + 1,
                i + 1
            );
            let class = match (words.next(), words.next()) {
                (Some("valid"), None) => Class::Valid,
                (Some("skip"), Some(reason)) => {
                    let (kind, why) = reason.split_once(": ").unwrap_or((reason, ""));
                    assert!(
                        !why.trim().is_empty(),
                        "MANIFEST.txt line {}: a skip needs `KIND: reason`: {line:?}",
                        i + 1
                    );
                    match kind {
                        "template" => Class::Template,
                        "error" => Class::Error,
                        "fragment" => Class::Fragment,
                        other => panic!(
                            "MANIFEST.txt line {}: unknown skip kind {other:?} (template, error or fragment)",
                            i + 1
                        ),
                    }
                }
                _ => panic!(
                    "MANIFEST.txt line {}: expected `NNN valid` or `NNN skip KIND: reason`, got {line:?}",
                    i + 1
                ),
            };
            Entry { number, class }
        })
        .collect()
}

fn corpus_file(entry: &Entry) -> PathBuf {
    corpus_dir().join(format!("{}.prose", entry.number))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Checks one corpus file: its error count and its diagnostics rendered as text.
fn check(path: &Path) -> (usize, String) {
    let mut c = Compilation::new(Options::default());
    c.add_file(path)
        .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()));
    let mut out = NoColor::new(Vec::new());
    prosec::diagnostics::render_text(&mut out, &c.sources, &c.diagnostics)
        .expect("rendering to memory cannot fail");
    (
        c.error_count(),
        String::from_utf8_lossy(&out.into_inner()).into_owned(),
    )
}

#[test]
fn manifest_lists_every_corpus_file() {
    let manifest = read_manifest();
    assert!(!manifest.is_empty(), "MANIFEST.txt is empty");
    let mut on_disk: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("the corpus directory exists")
        .map(|e| {
            e.expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".prose"))
        .collect();
    on_disk.sort();
    let listed: Vec<String> = (0..manifest.len()).map(file_name).collect();
    assert_eq!(
        on_disk, listed,
        "corpus files and MANIFEST.txt lines differ"
    );
}

#[test]
fn valid_examples_check_without_errors() {
    let mut failures = Vec::new();
    for entry in read_manifest().iter().filter(|e| e.class == Class::Valid) {
        let path = corpus_file(entry);
        let (errors, text) = check(&path);
        if errors > 0 {
            failures.push(format!("{}: {errors} error(s)\n{text}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn skipped_examples_still_fail_to_check() {
    let mut now_valid = Vec::new();
    for entry in read_manifest().iter().filter(|e| e.class != Class::Valid) {
        let (errors, _) = check(&corpus_file(entry));
        if errors == 0 {
            now_valid.push(entry.number.clone());
        }
    }
    assert!(
        now_valid.is_empty(),
        "these skipped blocks check without errors; mark them `valid` in MANIFEST.txt: {now_valid:?}"
    );
}

#[test]
fn examples_parse_without_panicking_and_only_templates_have_syntax_errors() {
    let mut failures = Vec::new();
    for entry in read_manifest() {
        let path = corpus_file(&entry);
        let parsed = prosec::parser::parse(0, &read(&path));
        if entry.class != Class::Template && !parsed.diagnostics.is_empty() {
            let problems: Vec<String> = parsed
                .diagnostics
                .iter()
                .map(|d| format!("  {} at byte {}: {}", d.code, d.span.start, d.message))
                .collect();
            failures.push(format!("{}:\n{}", path.display(), problems.join("\n")));
        }
    }
    assert!(
        failures.is_empty(),
        "syntax errors in blocks that are not templates:\n{}",
        failures.join("\n")
    );
}

#[test]
fn corpus_matches_the_reference() {
    let spec = spec_path();
    let Ok(markdown) = std::fs::read_to_string(&spec) else {
        println!(
            "note: {} is absent; the corpus is not compared with the reference",
            spec.display()
        );
        return;
    };
    let blocks = extract_prose_blocks(&markdown);
    assert!(
        !blocks.is_empty(),
        "no ```prose blocks found in {}",
        spec.display()
    );
    let dir = corpus_dir();
    if std::env::var_os("PROSEC_BLESS_SPEC_EXAMPLES").is_some() {
        for (i, block) in blocks.iter().enumerate() {
            let path = dir.join(file_name(i));
            std::fs::write(&path, block)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        }
        let mut stale = blocks.len();
        while dir.join(file_name(stale)).exists() {
            let path = dir.join(file_name(stale));
            std::fs::remove_file(&path)
                .unwrap_or_else(|e| panic!("cannot remove {}: {e}", path.display()));
            stale += 1;
        }
    }
    let mut outdated = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let path = dir.join(file_name(i));
        if std::fs::read_to_string(&path).ok().as_deref() != Some(block.as_str()) {
            outdated.push(file_name(i));
        }
    }
    assert!(
        outdated.is_empty(),
        "the corpus differs from {} in {outdated:?}; rerun with PROSEC_BLESS_SPEC_EXAMPLES=1 and review MANIFEST.txt",
        spec.display()
    );
    let listed = read_manifest().len();
    assert_eq!(
        listed,
        blocks.len(),
        "the reference has {} ```prose blocks but MANIFEST.txt lists {listed}",
        blocks.len()
    );
}

#[test]
fn extraction_handles_indented_fences() {
    let md = "text\n```prose\nsession \"a\"\n  context: x\n```\n- item\n\n  ```prose\n  session \"b\"\n  ```\n```typescript\nx\n```\n";
    assert_eq!(
        extract_prose_blocks(md),
        vec![
            "session \"a\"\n  context: x\n".to_string(),
            "session \"b\"\n".to_string()
        ]
    );
}
