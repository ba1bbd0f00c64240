//! `Compilation::add_files` checks files on all cores, yet reports exactly what adding them
//! one at a time does: the same modules and diagnostics, in the same order.

use prosec::compile::{Compilation, Options};
use std::path::{Path, PathBuf};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
    std::fs::write(&path, text).expect("write");
    path
}

/// Everything observable: module paths in order, and every diagnostic with its file path.
fn observed(c: &Compilation) -> (Vec<PathBuf>, Vec<String>) {
    let modules = c.modules.iter().map(|m| m.path.clone()).collect();
    let diags = c
        .diagnostics
        .iter()
        .map(|d| {
            let secondary: Vec<String> = d
                .secondary
                .iter()
                .map(|l| format!("{}@{}", c.sources.get(l.file).path, l.span.start))
                .collect();
            format!(
                "{} {:?} {}@{}..{} {} {:?} {secondary:?}",
                d.code,
                d.severity,
                c.sources.get(d.file).path,
                d.span.start,
                d.span.end,
                d.message,
                d.help
            )
        })
        .collect();
    (modules, diags)
}

#[test]
fn files_side_by_side_report_as_files_in_turn() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("many-files");
    let _ = std::fs::remove_dir_all(&dir);
    let mut files = Vec::new();
    // An importer listed before what it imports, which has problems of its own.
    files.push(write(
        &dir,
        "a.prose",
        "use \"./lib/b.prose\"\nlet s = b(topic: \"x\")\nsession \"{s.summary} {nope}\"\n",
    ));
    files.push(write(
        &dir,
        "lib/b.prose",
        "input topic: \"What\"\noutput summary = session \"On {topic}\"\nsession: nobody\n",
    ));
    // Standalone files with warnings and errors, some in a project with a broken prose.toml.
    write(
        &dir,
        "proj/prose.toml",
        "[lints]\nW108 = \"deny\"\nE999 = \"allow\"\n",
    );
    for i in 0..40 {
        let name = if i % 3 == 0 {
            format!("proj/p{i:02}.prose")
        } else {
            format!("p{i:02}.prose")
        };
        let text = format!(
            "let x{i} = session \"Work {i}\"\nloop until **the work is done**:\n  session \"More\"\nlet y = = {i}\nsession: agent{i}\n"
        );
        files.push(write(&dir, &name, &text));
    }
    // The same file twice (once through a link, once through a linked directory), and an
    // import cycle.
    files.push(files[2].clone());
    let link = dir.join("link.prose");
    std::os::unix::fs::symlink(&files[3], &link).expect("link");
    files.push(link);
    std::os::unix::fs::symlink(&dir, dir.join("again")).expect("link");
    files.push(dir.join("again/p05.prose"));
    files.push(write(
        &dir,
        "cycle1.prose",
        "use \"./cycle2.prose\"\nsession \"1\"\n",
    ));
    write(
        &dir,
        "cycle2.prose",
        "use \"./cycle1.prose\"\nsession \"2\"\n",
    );

    let mut one_by_one = Compilation::new(Options::default());
    let mut indices = Vec::new();
    for f in &files {
        indices.push(one_by_one.add_file(f).expect("readable"));
    }
    let mut together = Compilation::new(Options::default());
    let got = together.add_files(&files).expect("readable");
    assert_eq!(got, indices);
    let (expected, seen) = (observed(&one_by_one), observed(&together));
    assert_eq!(seen.0, expected.0);
    if let Some(i) =
        (0..seen.1.len().max(expected.1.len())).find(|&i| seen.1.get(i) != expected.1.get(i))
    {
        panic!(
            "diagnostic {i} differs:\n  side by side: {:?}\n  in turn:      {:?}",
            seen.1.get(i),
            expected.1.get(i)
        );
    }
    assert!(expected.1.len() > 80, "{}", expected.1.len());
    assert!(expected.1.iter().any(|d| d.starts_with("E147")));
    assert!(expected.1.iter().any(|d| d.starts_with("E139")));
}

#[test]
fn an_unreadable_file_fails_the_whole_call() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("many-files-missing");
    let _ = std::fs::remove_dir_all(&dir);
    let ok = write(&dir, "ok.prose", "session \"x\"\n");
    let mut c = Compilation::new(Options::default());
    let err = c
        .add_files(&[ok, dir.join("missing.prose")])
        .expect_err("missing file");
    assert!(err.to_string().contains("missing.prose"), "{err}");
}
