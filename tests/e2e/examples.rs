//! Every program in `examples/` runs to completion under the mock driver, making a number
//! of sessions and judgments within the static bounds `prosec cost` gives for it.

use prose_machine::trace::Event;
use prose_machine::value::Value;
use prose_machine::{Limits, Machine};
use prose_runtime::driver::mock::{Conditions, Mock, MockOptions};
use prose_runtime::runner::{run, RunConfig};
use prosec::compile::Compilation;
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

/// How discretion conditions are judged for `example`: by default each condition site is
/// false once and then true, so every loop ends and both arms of an `if` can run.
fn conditions(example: &str) -> Conditions {
    match example {
        // `assert **the preflight answer is ok**` must hold for the deploy to go on.
        "deploy-guard" => Conditions::True,
        _ => Conditions::After(1),
    }
}

#[tokio::test]
async fn every_example_runs_to_completion_under_the_mock() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files = Vec::new();
    prose_files(&dir, &mut files);
    files.sort();
    assert!(files.len() >= 13, "examples found: {files:?}");
    for file in files {
        let name = file.file_stem().and_then(|s| s.to_str()).expect("a name");
        let mut c = Compilation::new(Default::default());
        let root = c.add_file(&file).expect("read the example");
        let bounds = prosec::cost::bounds(&c, root, &Default::default());
        let artifact = crate::harness::compiled(c, root);
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
        let declared: Vec<String> = main
            .outputs
            .values()
            .map(|o| main.strings[o.name].clone())
            .collect();
        let machine =
            Machine::new(artifact.clone(), &inputs, Limits::default()).expect("inputs given");
        let driver = Arc::new(Mock::new(MockOptions {
            conditions: Some(conditions(name)),
            inputs: true,
            ..MockOptions::default()
        }));
        let (mut sessions, mut judged) = (0.0, 0.0);
        let outputs = run(machine, driver, &RunConfig::default(), |e| match e {
            Event::Session { .. } => sessions += 1.0,
            Event::Evaluate { .. } => judged += 1.0,
            _ => {}
        })
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let names: Vec<&String> = outputs.iter().map(|(n, _)| n).collect();
        assert_eq!(names, declared.iter().collect::<Vec<_>>(), "{name}");
        for (n, v) in &outputs {
            assert_ne!(*v, Value::Null, "{name}: output {n} was never bound");
        }
        // The least with every symbol at zero is below any run's count; the most, when it
        // is a constant, above it (choices have no event: judgments are only bounded above).
        let least = bounds.sessions.min.eval(|_| 0.0);
        assert!(
            least <= sessions,
            "{name}: {sessions} sessions, least {least}"
        );
        for (what, count, range) in [
            ("sessions", sessions, &bounds.sessions),
            ("judgments", judged, &bounds.judgments),
        ] {
            if let prosec::cost::Count::Finite(max) = &range.max {
                if let Some(most) = max.as_constant() {
                    assert!(count <= most, "{name}: {count} {what}, most {most}");
                }
            }
        }
    }
}
