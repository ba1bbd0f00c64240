//! Formatting does not change what a program does: every program in `examples/`, formatted
//! with the library's formatter (`prosec fmt`), runs under the mock driver to the same
//! outputs, through the same sessions and judgments, as the program as written. A program
//! that imports another runs with the formatted text of that one too.

#[allow(dead_code, unused_imports)]
#[path = "e2e/harness.rs"]
mod harness;

use prose_machine::trace::Event;
use prose_machine::value::Value;
use prose_machine::{Limits, Machine};
use prose_runtime::driver::mock::{Conditions, Mock, MockOptions};
use prose_runtime::runner::{run, RunConfig};
use prosec::compile::{Compilation, Options};
use prosec::fmt::FmtOptions;
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn prose_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read examples") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            prose_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "prose") {
            out.push(path);
        }
    }
}

/// What one run did, apart from source lines: each session (prompt, agent, model) and each
/// judged condition in order, and the outputs.
#[derive(Debug, PartialEq)]
struct Run {
    steps: Vec<String>,
    outputs: Vec<(String, Value)>,
}

/// Runs the compiled program under the mock driver, as the examples' end-to-end test does:
/// each parameter gets `<name>`, a condition is false once per site and then true (always
/// true for `deploy-guard`, whose preflight assertion must hold).
async fn run_mock(name: &str, c: Compilation, root: usize) -> Run {
    let artifact = harness::compiled(c, root);
    let main = &artifact.modules[0];
    let inputs: FxHashMap<String, Value> = main
        .inputs
        .values()
        .filter(|i| i.parameter)
        .map(|i| {
            let n = &main.strings[i.name];
            (n.clone(), Value::text(format!("<{n}>")))
        })
        .collect();
    let machine = Machine::new(artifact.clone(), &inputs, Limits::default()).expect("inputs");
    let conditions = match name {
        "deploy-guard" => Conditions::True,
        _ => Conditions::After(1),
    };
    let driver = Arc::new(Mock::new(MockOptions {
        conditions: Some(conditions),
        inputs: true,
        ..MockOptions::default()
    }));
    let mut steps = Vec::new();
    let outputs = run(machine, driver, &RunConfig::default(), |e| match e {
        Event::Session {
            text, agent, model, ..
        } => steps.push(format!("session {agent:?} {model:?}: {text}")),
        Event::Evaluate { condition } => steps.push(format!("judge: {condition}")),
        _ => {}
    })
    .await
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    Run { steps, outputs }
}

/// Every example's text laid out by the formatter with `options`, by canonical path.
fn formatted(files: &[PathBuf], options: &FmtOptions) -> FxHashMap<PathBuf, String> {
    files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).expect("read an example");
            let out = prosec::fmt::format(&text, options)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            (file.clone(), out)
        })
        .collect()
}

#[tokio::test]
async fn formatted_examples_run_to_the_same_outputs_under_the_mock() {
    let dir = std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples"))
        .expect("examples");
    let mut files = Vec::new();
    prose_files(&dir, &mut files);
    files.sort();
    assert!(files.len() >= 14, "examples found: {files:?}");
    // The canonical layout (the examples' own settings), and one indented by 4 that is
    // laid out differently however the examples are written. Each variant's texts stand for
    // their files, so an example that imports another runs with that one's variant too.
    let canonical = formatted(&files, &FmtOptions::for_dir(&dir).expect("options"));
    let wide = formatted(&files, &FmtOptions { indent_width: 4 });
    // (Every example with an indented block is laid out differently there.)
    assert!(files
        .iter()
        .filter(|f| canonical[*f].contains("\n  "))
        .all(|f| wide[f] != canonical[f]));
    for file in &files {
        let name = file.file_stem().and_then(|s| s.to_str()).expect("a name");
        let mut original = Compilation::new(Options::default());
        let root = original.add_file(file).expect("compile the example");
        let before = run_mock(name, original, root).await;
        assert!(!before.steps.is_empty(), "{name}: no session ran");
        for (layout, texts) in [("canonical", &canonical), ("indent 4", &wide)] {
            let mut c = Compilation::with_overlay(Options::default(), texts.clone());
            let root = c.add_source(file, &texts[file]);
            let after = run_mock(name, c, root).await;
            assert_eq!(
                after, before,
                "{name}: formatted ({layout}), the program runs differently"
            );
        }
    }
}
