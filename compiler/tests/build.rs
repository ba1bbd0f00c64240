//! Code generation end to end: every program the checker accepts compiles to an artifact the
//! verifier accepts, encoding round-trips, and the bytecode has the expected structure.

use bytecode_spec::{artifact, Artifact, FuncKind, Op, Strategy};
use prosec::compile::{Compilation, Options};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn build_file(path: &Path) -> Vec<u8> {
    let mut c = Compilation::new(Options {
        require_imports: true,
        ..Options::default()
    });
    let root = c.add_file(path).expect("readable");
    assert_eq!(c.error_count(), 0, "{} has errors", path.display());
    prosec::codegen::build_bytes(&c, root).expect("writable").0
}

fn build_src(src: &str) -> Artifact {
    let mut c = Compilation::new(Options::default());
    let root = c.add_source(Path::new("t.prose"), src);
    assert_eq!(c.error_count(), 0, "errors: {:?}", c.diagnostics);
    let bytes = prosec::codegen::build_bytes(&c, root).expect("writable").0;
    artifact::load(&bytes).expect("verifies").1.into_inner()
}

fn prose_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for e in entries {
        if e.is_dir() {
            prose_files(&e, out);
        } else if e.extension().is_some_and(|x| x == "prose") {
            out.push(e);
        }
    }
}

#[test]
fn every_example_builds_verifies_and_round_trips() {
    let mut files = Vec::new();
    prose_files(&workspace().join("examples"), &mut files);
    assert!(files.len() >= 10);
    for f in files {
        let bytes = build_file(&f);
        let (header, a) = artifact::load(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(
            artifact::write(&a, &header).ok(),
            Some(bytes),
            "{} does not round-trip",
            f.display()
        );
        assert_eq!(header.compiler_version, prosec::COMPILER_VERSION);
    }
}

#[test]
fn every_valid_spec_example_builds_and_verifies() {
    let dir = workspace().join("compiler/tests/spec-examples");
    let manifest = std::fs::read_to_string(dir.join("MANIFEST.txt")).expect("manifest");
    let mut n = 0;
    for line in manifest.lines() {
        let mut words = line.split_whitespace();
        let (Some(id), Some("valid")) = (words.next(), words.next()) else {
            continue;
        };
        let path = dir.join(format!("{id}.prose"));
        // Registry imports (`use "@handle/slug"`) cannot be linked without a library.
        if std::fs::read_to_string(&path)
            .expect("read")
            .contains("use \"@")
        {
            continue;
        }
        let bytes = build_file(&path);
        artifact::load(&bytes).unwrap_or_else(|e| panic!("spec example {id}: {e}"));
        n += 1;
    }
    assert!(n > 90, "only {n} examples built");
}

#[test]
fn the_benchmark_corpus_builds_and_verifies() {
    for i in 0..8 {
        let p = prose_benches_program(i);
        build_src(&p);
    }
}

/// A program using every construct (the same shape as the benchmark corpus).
fn prose_benches_program(i: usize) -> String {
    format!(
        "input topic: \"t\"\nagent a{i}:\n  model: sonnet\n  persist: true\n  prompt: \"You study {{topic}}\"\nlet plan = session: a{i}\n  prompt: \"Plan {{topic}}\"\n  retry: 2\nparallel (\"any\", count: 1):\n  x = session \"X\"\n  y = try:\n    session \"Y\"\n  catch as err:\n    throw\nlet items = [\"a\", \"b\"] | map:\n  session \"M {{item}}\"\nloop until **done** (max: 3) as k:\n  resume: a{i}\n    prompt: \"again {{k}}\"\noutput r = plan\n"
    )
}

fn ops(a: &Artifact) -> Vec<&Op> {
    a.modules[0]
        .funcs
        .values()
        .flat_map(|f| f.code.iter())
        .collect()
}

#[test]
fn a_session_compiles_to_one_session_instruction() {
    let a = build_src("session \"Hello\"\n");
    let sessions = ops(&a)
        .into_iter()
        .filter(|o| matches!(o, Op::Session { .. }))
        .count();
    assert_eq!(sessions, 1);
    let m = &a.modules[0];
    let desc = m.sessions.values().next().expect("descriptor");
    let tpl = &m.templates[desc.prompt.expect("prompt")];
    assert!(
        matches!(&tpl.parts[..], [bytecode_spec::TplPart::Text(s)] if m.strings[*s] == "Hello")
    );
}

#[test]
fn parallel_blocks_fork_one_branch_function_per_statement() {
    let a = build_src("parallel (\"first\"):\n  a = session \"A\"\n  b = session \"B\"\nsession \"C\"\n  context: { a, b }\n");
    let m = &a.modules[0];
    let fork = m.forks.values().next().expect("fork");
    assert_eq!(fork.branches.len(), 2);
    assert_eq!(fork.strategy, Strategy::First);
    for &b in &fork.branches {
        assert_eq!(m.funcs[b].kind, FuncKind::Branch);
        // Each branch writes its named result into the forking frame.
        assert!(m.funcs[b]
            .code
            .iter()
            .any(|o| matches!(o, Op::SetUp { depth: 1, .. })));
    }
    let main = &m.funcs[m.entry].code;
    let fork_at = main
        .iter()
        .position(|o| matches!(o, Op::Fork { .. }))
        .expect("fork op");
    assert!(matches!(main[fork_at + 1], Op::Join { .. }));
}

#[test]
fn parallel_for_and_pmap_fork_each_element() {
    let a = build_src("let xs = [1, 2]\nparallel for x, i in xs:\n  session \"{x} {i}\"\nlet ys = xs | pmap:\n  session \"{item}\"\n");
    let m = &a.modules[0];
    let each = ops(&a)
        .into_iter()
        .filter(|o| matches!(o, Op::ForkEach { .. }))
        .count();
    assert_eq!(each, 2);
    for f in m.forks.values() {
        assert_eq!(m.funcs[f.branches[0]].params, 2);
    }
}

#[test]
fn try_catch_finally_uses_both_targets() {
    let a = build_src("try:\n  session \"a\"\ncatch as e:\n  session \"b\"\n    context: e\nfinally:\n  session \"c\"\n");
    let code = &a.modules[0].funcs[a.modules[0].entry].code;
    let enter = code.iter().find_map(|o| match o {
        Op::TryEnter { catch, finally, .. } => Some((*catch, *finally)),
        _ => None,
    });
    assert!(matches!(enter, Some((Some(_), Some(_)))));
    assert_eq!(code.iter().filter(|o| matches!(o, Op::TryExit)).count(), 2);
    assert_eq!(
        code.iter()
            .filter(|o| matches!(o, Op::EndFinally { .. }))
            .count(),
        1
    );
}

#[test]
fn blocks_are_functions_called_with_their_arity() {
    let a = build_src("block f(a, b):\n  output session \"{a} {b}\"\ndo f(1, 2)\n");
    let m = &a.modules[0];
    let block = m
        .funcs
        .values()
        .find(|f| f.kind == FuncKind::Block)
        .expect("block");
    assert_eq!(block.params, 2);
    assert!(ops(&a)
        .iter()
        .any(|o| matches!(o, Op::Call { argc: 2, .. })));
}

#[test]
fn imported_programs_are_linked_into_the_artifact() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("build-import");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("lib.prose"),
        "input q: \"query\"\noutput answer = session \"Answer {q}\"\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("main.prose"),
        "use \"./lib.prose\" as lib\nlet r = lib(q: \"x\")\nsession \"use\"\n  context: r.answer\n",
    )
    .expect("write");
    let bytes = build_file(&dir.join("main.prose"));
    let (_, a) = artifact::load(&bytes).expect("verifies");
    assert_eq!(a.modules.len(), 2);
    assert_eq!(a.modules[1].import_path, "./lib.prose");
    assert!(ops(&a).iter().any(|o| matches!(o, Op::Invoke { .. })));
}

#[test]
fn a_missing_registry_import_is_a_build_error() {
    let mut c = Compilation::new(Options {
        require_imports: true,
        ..Options::default()
    });
    c.add_source(
        Path::new("t.prose"),
        "use \"@someone/missing\"\nsession \"x\"\n",
    );
    assert!(c
        .diagnostics
        .iter()
        .any(|d| d.code.as_str() == "E138" && d.is_error()));
}

#[test]
fn every_corruption_of_a_compiled_artifact_is_rejected() {
    let bytes = build_file(&workspace().join("examples/hello.prose"));
    assert!(artifact::load(&bytes).is_ok());
    for i in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[i] ^= mask;
            assert!(
                artifact::load(&bad).is_err(),
                "flipping byte {i} with {mask:#x} was accepted"
            );
        }
    }
    for len in 0..bytes.len() {
        assert!(
            artifact::load(&bytes[..len]).is_err(),
            "truncation to {len} bytes was accepted"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(artifact::load(&longer).is_err());
}

#[test]
fn random_mutations_of_compiled_artifacts_never_panic() {
    use proptest::prelude::*;
    let corpus: Vec<Vec<u8>> = ["hello", "divide-and-conquer", "code-review"]
        .iter()
        .map(|n| build_file(&workspace().join(format!("examples/{n}.prose"))))
        .collect();
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 300,
        ..Default::default()
    });
    let strategy = (
        0..corpus.len(),
        prop::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    );
    runner
        .run(&strategy, |(which, edits)| {
            let mut bytes = corpus[which].clone();
            for (at, v) in edits {
                let i = at % bytes.len();
                bytes[i] = v;
            }
            // Loading may succeed only if the edits left the bytes unchanged.
            if artifact::load(&bytes).is_ok() {
                prop_assert_eq!(&bytes, &corpus[which]);
            }
            Ok(())
        })
        .expect("no mutation is accepted or panics");
}

/// Builds `src` through `build_bytes`, which verifies what it writes.
fn try_build(src: &str) -> Result<Vec<u8>, prosec::codegen::BuildError> {
    let mut c = Compilation::new(Options::default());
    let root = c.add_source(Path::new("big.prose"), src);
    assert_eq!(c.error_count(), 0, "errors: {:?}", c.diagnostics);
    prosec::codegen::build_bytes(&c, root).map(|(bytes, _)| bytes)
}

#[test]
fn a_list_literal_of_any_size_builds_to_an_artifact_that_loads() {
    // More elements than a function has registers: built in chunks.
    let items: Vec<String> = (0..100_000).map(|i| i.to_string()).collect();
    let src = format!("let xs = [{}]\noutput n = xs\n", items.join(", "));
    let bytes = try_build(&src).expect("builds");
    let (_, a) = artifact::load(&bytes).expect("the artifact build wrote loads and verifies");
    let main = &a.modules[0].funcs[a.modules[0].entry];
    assert!(main.nregs <= bytecode_spec::verify::MAX_REGS);
    let makes = main
        .code
        .iter()
        .filter(|op| matches!(op, Op::MakeList { .. }))
        .count();
    assert!(makes > 1, "expected the list to be built in chunks");
}

#[test]
fn a_record_too_large_for_a_function_is_a_located_error() {
    let entries: Vec<String> = (0..70_000).map(|i| format!("k{i}: 1")).collect();
    let src = format!("let a = 1\nlet r = {{{}}}\n", entries.join(", "));
    let err = try_build(&src).expect_err("too many registers");
    let found = err.diagnostics();
    assert_eq!(found.len(), 1, "{err}");
    assert_eq!(found[0].code, prosec::diagnostics::Code::E148);
    assert_eq!(found[0].span.start as usize, src.find('{').expect("record"));
}

#[test]
fn a_prompt_given_as_a_field_of_a_variable_reads_that_field() {
    let a = build_src("let brief = { task: \"Write the summary\", notes: [\"n\"] }\nsession \"Summary\"\n  prompt: brief.task\nsession \"First note\"\n  prompt: brief.notes[0]\n");
    let m = &a.modules[0];
    let paths: Vec<Vec<bytecode_spec::PathStep>> = m
        .sessions
        .values()
        .map(|s| {
            let tpl = &m.templates[s.prompt.expect("a prompt")];
            match &tpl.parts[..] {
                [bytecode_spec::TplPart::Var { path, .. }] => path.clone(),
                other => panic!("not a variable: {other:?}"),
            }
        })
        .collect();
    let task = m
        .strings
        .iter()
        .find(|(_, s)| *s == "task")
        .map(|(id, _)| id);
    let notes = m
        .strings
        .iter()
        .find(|(_, s)| *s == "notes")
        .map(|(id, _)| id);
    assert_eq!(
        paths,
        [
            vec![bytecode_spec::PathStep::Field(task.expect("interned"))],
            vec![
                bytecode_spec::PathStep::Field(notes.expect("interned")),
                bytecode_spec::PathStep::Index(0)
            ],
        ]
    );
}
