//! The adversarial sweep, deterministic and small enough for every CI run (a fixed seed and
//! budget; cargo-fuzz targets in `fuzz/` explore further):
//!
//! - mutated artifacts (edits to the encoded program of every example, then framed with a
//!   valid checksum) go through load and verify; whatever verifies runs with the mock
//!   driver under tight limits, in memory and as a durable run, and must end (finished or a
//!   clean error) without panicking or writing outside its state directory;
//! - mutated journals (bytes flipped, lines cut, repeated, swapped, removed, garbage
//!   appended) of a failed run go through resume: refused cleanly, or accepted and then
//!   reaching exactly the outputs of an untouched run.

use prose_machine::value::{Bounds, Value};
use prose_machine::{Limits, Machine};
use prose_runtime::driver::mock::{MockOptions, Rule};
use prose_runtime::driver::settings::DriverSettings;
use prose_runtime::program::Program;
use prose_runtime::record::ExecOptions;
use prose_store::file::{FileStore, RunDir};
use prosevm::run::{Place, Resumed, Resuming, Run};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::support;

/// The sweep's seed: change it to explore, keep it fixed in the repository.
const SEED: u64 = 0x5EED_0017_0000_0001;
/// Mutated artifacts tried per example.
const ARTIFACT_MUTANTS: usize = 400;
/// Names that must never become paths.
const HOSTILE_NAMES: [&str; 7] = [
    "../x",
    "/tmp/prose-sweep",
    "a/b",
    "..",
    "",
    "x\0y",
    "ok-name",
];
/// Mutated journals tried.
const JOURNAL_MUTANTS: usize = 2_400;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn examples() -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "prose"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let mut c = prosec::compile::Compilation::new(prosec::compile::Options::default());
            let root = c.add_file(&p).expect("readable");
            let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("builds");
            (p, bytes)
        })
        .collect()
}

fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<{ 1 << 22 }>()
}

/// One to four edits to `bytes`: a bit flipped, a byte set to a boundary value, a byte
/// removed or inserted, a run of bytes repeated.
fn mutate(bytes: &mut Vec<u8>, rng: &mut Rng) {
    for _ in 0..1 + rng.below(4) {
        if bytes.is_empty() {
            return;
        }
        let at = rng.below(bytes.len());
        match rng.below(5) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = [0, 1, 0x7f, 0x80, 0xfe, 0xff][rng.below(6)],
            2 => {
                bytes.remove(at);
            }
            3 => bytes.insert(at, rng.next() as u8),
            _ => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                let run = bytes[at..end].to_vec();
                bytes.splice(at..at, run);
            }
        }
    }
}

fn tight_limits() -> Limits {
    Limits {
        iterations: 2_000,
        depth: 32,
        fibers: 2_000,
        frame_bytes: 64 << 20,
        values: Bounds {
            bytes: 1 << 20,
            depth: 64,
        },
    }
}

/// Every parameter input of the program, with a placeholder.
fn placeholder_inputs(program: &Program) -> BTreeMap<String, Value> {
    let m = &program.artifact.modules[0];
    m.inputs
        .values()
        .filter(|i| i.parameter)
        .map(|i| (m.strings[i.name].clone(), Value::text("x")))
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn mock(options: MockOptions) -> DriverSettings {
    DriverSettings::Mock(options)
}

/// Runs `program` in memory under tight limits; it must end, one way or another.
fn run_in_memory(program: &Program, rt: &tokio::runtime::Runtime) {
    let inputs = placeholder_inputs(program)
        .into_iter()
        .collect::<rustc_hash::FxHashMap<_, _>>();
    let Ok(mut machine) = Machine::new(program.artifact.clone(), &inputs, tight_limits()) else {
        return;
    };
    machine.set_trace(true);
    let driver = Arc::new(
        mock(MockOptions {
            inputs: true,
            ..MockOptions::default()
        })
        .connect()
        .expect("mock"),
    );
    let _ = rt.block_on(prose_runtime::runner::run(
        machine,
        driver,
        &Default::default(),
        |_| {},
    ));
}

/// Runs `program` durably in `state`; it must end, one way or another.
fn run_durably(program: &Program, state: &Path, rt: &tokio::runtime::Runtime) {
    let place = Place {
        state_dir: Some(state.to_path_buf()),
        ..Place::default()
    };
    let settings = mock(MockOptions {
        inputs: true,
        ..MockOptions::default()
    });
    let options = ExecOptions {
        max_iterations: 2_000,
        max_value_size: 1 << 20,
        max_frame_memory: 64 << 20,
        ..ExecOptions::default()
    };
    let store = FileStore::new(place.state_dir.clone());
    let Ok(run) = rt.block_on(Run::start(
        &store,
        program,
        placeholder_inputs(program),
        settings.clone(),
        options,
        &place,
    )) else {
        return;
    };
    let driver = Arc::new(settings.connect().expect("mock"));
    let _ = rt.block_on(run.drive(driver, &mut |_: &prose_machine::trace::Event| {}));
}

/// Everything under `dir`.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

#[test]
fn mutated_artifacts_load_verify_and_run_without_harm() {
    let mut rng = Rng(SEED);
    let rt = runtime();
    let root = support::scratch("sweep-artifacts");
    let state = root.join("state");
    let header = bytecode_spec::artifact::Header {
        compiler_version: "sweep".into(),
        source_hash: [0; 32],
    };
    let (mut decoded, mut verified, mut ran) = (0, 0, 0);
    for (path, bytes) in examples() {
        let (_, artifact) = bytecode_spec::artifact::read(&bytes).expect("reads");
        let payload = bincode::serde::encode_to_vec(&artifact, bincode_config()).expect("encodes");
        for i in 0..ARTIFACT_MUTANTS {
            let mutant = if i % 4 == 0 {
                // A name replaced by a path, or by something else no file name can be.
                let mut a = artifact.clone();
                let m = rng.below(a.modules.len());
                let strings = &mut a.modules[m].strings;
                let at = rng.below(strings.len());
                if let Some(s) = strings.values_mut().nth(at) {
                    *s = HOSTILE_NAMES[rng.below(HOSTILE_NAMES.len())].to_string();
                }
                a
            } else {
                let mut edited = payload.clone();
                mutate(&mut edited, &mut rng);
                match bincode::serde::decode_from_slice::<bytecode_spec::Artifact, _>(
                    &edited,
                    bincode_config(),
                ) {
                    Ok((a, _)) => a,
                    Err(_) => continue,
                }
            };
            decoded += 1;
            let Ok(framed) = bytecode_spec::artifact::write(&mutant, &header) else {
                continue;
            };
            let Ok(program) = Program::from_bytes(framed, path.clone()) else {
                continue;
            };
            verified += 1;
            run_in_memory(&program, &rt);
            // Every fifth verified mutant also runs durably, names becoming paths (not those
            // with a `persist: user` or `persist: "dir"` agent: their memory lives in the home
            // or the working directory by design, outside this test's directory).
            let elsewhere = program.artifact.modules[0].agents.values().any(|a| {
                matches!(
                    a.persist,
                    bytecode_spec::Persist::Path(_) | bytecode_spec::Persist::User
                )
            });
            if i % 5 == 0 && !elsewhere {
                run_durably(&program, &state, &rt);
                ran += 1;
            }
        }
    }
    println!("{decoded} mutants decoded, {verified} verified, {ran} run durably");
    assert!(
        decoded >= 200 && verified >= 50 && ran >= 10,
        "the sweep lost its reach"
    );
    // Nothing was written outside the state directory.
    let outside: Vec<PathBuf> = tree(&root)
        .into_iter()
        .filter(|p| !p.starts_with(&state))
        .collect();
    assert!(outside.is_empty(), "{outside:?}");
    for p in ["/tmp/prose-sweep", "/tmp/prose-sweep.md"] {
        assert!(!Path::new(p).exists(), "{p} written");
    }
}

/// The lines of `text`, each with its newline.
fn lines(text: &[u8]) -> Vec<Vec<u8>> {
    text.split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// One journal mutation.
fn mutate_journal(bytes: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut ls = lines(bytes);
    let n = ls.len();
    match rng.below(7) {
        0 => {
            let mut b = bytes.to_vec();
            mutate(&mut b, rng);
            return b;
        }
        1 => ls.truncate(rng.below(n)),
        2 => {
            let l = ls[rng.below(n)].clone();
            ls.insert(rng.below(n + 1), l);
        }
        3 => ls.swap(rng.below(n), rng.below(n)),
        4 => {
            ls.remove(rng.below(n));
        }
        5 => {
            let mut b = bytes.to_vec();
            b.truncate(bytes.len() - rng.below(bytes.len().min(200)));
            return b;
        }
        _ => ls.push(b"0badc0de {\"id\":\"0:1\",\"kind\":\"session\",\"answer\":\"x\"}".to_vec()),
    }
    ls.concat()
}

#[test]
fn mutated_journals_are_refused_or_replay_to_the_same_outputs() {
    let mut rng = Rng(SEED ^ 0x10);
    let rt = runtime();
    let root = support::scratch("sweep-journals");
    let src = "let plan = session \"Plan\"\nparallel:\n  a = session \"A\"\n  b = session \"B\"\nlet items = [\"x\", \"y\", \"z\"] | pmap:\n  session \"Item {item}\"\noutput out = session \"Finish\"\n  context: [plan, a, b, items]\n";
    let mut c = prosec::compile::Compilation::new(prosec::compile::Options::default());
    let path = root.join("journal.prose");
    let root_file = c.add_source(&path, src);
    let (bytes, _) = prosec::codegen::build_bytes(&c, root_file).expect("builds");
    let program = Program::from_bytes(bytes, path).expect("verifies");
    let connect = |s: &DriverSettings| Arc::new(s.connect().expect("mock"));
    // The reference outputs, then a run that fails at its last session.
    let plain = mock(MockOptions::default());
    let drive = |run: Run, s: &DriverSettings| {
        rt.block_on(run.drive(connect(s), &mut |_: &prose_machine::trace::Event| {}))
            .expect("the store works")
    };
    let reference_place = Place {
        state_dir: Some(root.join("reference")),
        ..Place::default()
    };
    let run = rt
        .block_on(Run::start(
            &FileStore::new(reference_place.state_dir.clone()),
            &program,
            BTreeMap::new(),
            plain.clone(),
            ExecOptions::default(),
            &reference_place,
        ))
        .expect("starts");
    let expected = drive(run, &plain).expect("finishes");
    let failing: Vec<Rule> =
        serde_json::from_str(r#"[{"prompt": "Finish", "fail": "down"}]"#).expect("script");
    let failing = mock(MockOptions {
        script: failing,
        ..MockOptions::default()
    });
    let (mut refused, mut accepted) = (0, 0);
    for i in 0..JOURNAL_MUTANTS {
        let place = Place {
            state_dir: Some(root.join(format!("state-{i}"))),
            ..Place::default()
        };
        let store = FileStore::new(place.state_dir.clone());
        let run = rt
            .block_on(Run::start(
                &store,
                &program,
                BTreeMap::new(),
                failing.clone(),
                ExecOptions::default(),
                &place,
            ))
            .expect("starts");
        let id = run.record().id.clone();
        assert!(drive(run, &failing).is_err(), "the run fails at Finish");
        let dir = RunDir::open(place.state_dir.as_deref(), &id).expect("run");
        let journal = dir.journal_path();
        let original = std::fs::read(&journal).expect("journal");
        std::fs::write(&journal, mutate_journal(&original, &mut rng)).expect("mutated");
        let how = Resuming {
            driver: Some(plain.clone()),
            ..Resuming::default()
        };
        match rt.block_on(Run::resume(&store, &id, &place, how)) {
            Err(_) => refused += 1,
            Ok(Resumed::Finished(_)) => panic!("a failed run cannot be finished"),
            Ok(Resumed::Ready(run)) => {
                accepted += 1;
                assert_eq!(
                    drive(*run, &plain).as_ref().ok(),
                    Some(&expected),
                    "mutant {i}: an accepted journal replays to other outputs"
                );
            }
        }
    }
    println!("{refused} mutated journals refused, {accepted} accepted");
    assert!(refused > 20 && accepted > 5, "the sweep lost its reach");
}

/// Found by the sweep (a mutant of newsletter.prose whose `jump_if_not` was sent back onto
/// itself spun the interpreter forever): a jump back to anything but a loop step counts
/// against the iteration limit, so no verified artifact runs unbounded.
#[test]
fn a_jump_back_onto_itself_ends_at_the_iteration_limit() {
    let source = "let xs = [\"a\", \"b\"]\nfor x in xs:\n  let y = x\noutput o = \"done\"\n";
    let mut c = prosec::compile::Compilation::new(prosec::compile::Options::default());
    let root = c.add_source(Path::new("spin.prose"), source);
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("builds");
    let (header, mut artifact) = bytecode_spec::artifact::read(&bytes).expect("reads");
    // The loop's back edge, sent onto itself.
    let is_jump = |op: &bytecode_spec::Op| matches!(op, bytecode_spec::Op::Jump { .. });
    let code = &mut artifact.modules[0]
        .funcs
        .values_mut()
        .find(|f| f.code.iter().any(is_jump))
        .expect("a function with a loop")
        .code;
    let at = code.iter().rposition(is_jump).expect("a back edge");
    code[at] = bytecode_spec::Op::Jump { target: at as u32 };
    let framed = bytecode_spec::artifact::write(&artifact, &header).expect("writes");
    let program = Program::from_bytes(framed, PathBuf::from("spin.prose")).expect("verifies");
    let machine = Machine::new(
        program.artifact.clone(),
        &Default::default(),
        tight_limits(),
    )
    .expect("starts");
    let driver = Arc::new(mock(MockOptions::default()).connect().expect("mock"));
    let ended = runtime().block_on(prose_runtime::runner::run(
        machine,
        driver,
        &Default::default(),
        |_| {},
    ));
    let e = ended.expect_err("a jump onto itself cannot finish");
    assert_eq!(e.code, bytecode_spec::Code::E207, "{}", e.message);
}
