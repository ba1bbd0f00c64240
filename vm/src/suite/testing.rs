//! `prosevm test`: the test files beside programs (`NAME.test.toml`), found as `cargo test`
//! finds tests, checked as `prosec check` checks them, and each case run in a working
//! directory of its own, in parallel, with the answers it names: the mock, a mock script, or
//! a tape recorded from a real model (nothing is asked of a model, nothing costs). With a
//! recording driver, cases answered by tapes are run against it and their tapes written
//! anew.

use super::case::{inputs_from_toml, run_case, CaseRun, CaseSpec};
use crate::run::Place;
use prose_runtime::driver::mock::{Conditions, MockOptions, Rule};
use prose_runtime::driver::settings::{DriverChoice, DriverKind, DriverSettings};
use prose_runtime::program::Program;
use prose_runtime::record::ExecOptions;
use prose_store::Store;
use prosec::suite::checks::{verdict, Failure};
use prosec::suite::spec::{self, Case, Check, Ignore, TestFile};
use prosec::suite::TEST_SUFFIX;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A test file ready to run: read, checked, its program compiled.
pub struct Loaded {
    /// The file.
    pub path: PathBuf,
    /// What it says.
    pub spec: TestFile,
    /// The program it tests.
    pub program: Arc<Program>,
}

/// The test files `paths` name (a file, or the test files found under a directory by the
/// rules `prosec check` walks with), in path order.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    for p in paths {
        prosec::walk::suite_files(p, &mut found).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    found.retain(|f| f.to_string_lossy().ends_with(TEST_SUFFIX));
    found.sort();
    found.dedup();
    Ok(found)
}

/// Why a test file does not run: its diagnostics, rendered as `prosec check` renders them
/// (`color` for a terminal), or another reason.
pub struct NotLoaded {
    /// The file.
    pub path: PathBuf,
    /// What is wrong, ready to print.
    pub why: String,
}

/// Reads and checks the test file at `path` and compiles its program (offline: tests ask
/// no network). A file `prosec check` would refuse does not run (but a tape `recording`
/// will make need not be there yet).
pub fn load(path: &Path, color: bool, recording: bool) -> Result<Loaded, NotLoaded> {
    let not = |why: String| NotLoaded {
        path: path.to_path_buf(),
        why,
    };
    let mut c = prosec::compile::Compilation::new(Default::default());
    prosec::suite::static_check::check_file_recording(&mut c, path, recording)
        .map_err(|e| not(e.to_string()))?;
    if c.error_count() > 0 {
        let mut out = termcolor::Buffer::no_color();
        if color {
            out = termcolor::Buffer::ansi();
        }
        let _ = prosec::diagnostics::render_text(&mut out, &c.sources, &c.diagnostics);
        return Err(not(String::from_utf8_lossy(out.as_slice()).into_owned()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| not(e.to_string()))?;
    let spec = spec::parse(&text).map_err(|(e, _)| not(e))?;
    let program_path = prosec::suite::static_check::program_path(
        path,
        spec.program.as_ref().map(|p| p.get_ref().as_str()),
    );
    let program = if program_path.extension().is_some_and(|x| x == "pbc") {
        std::fs::read(&program_path)
            .map_err(|e| e.to_string())
            .and_then(|b| Program::from_bytes(b, program_path.clone()).map_err(|e| e.to_string()))
            .map_err(|e| not(format!("{}: {e}", program_path.display())))?
    } else {
        match crate::source::compile(&program_path, &[], true, |_| true) {
            Ok(c) => c.program,
            Err(crate::source::NotCompiled::Refused(c)) => {
                let mut out = termcolor::Buffer::no_color();
                let _ = prosec::diagnostics::render_text(&mut out, &c.sources, &c.diagnostics);
                return Err(not(String::from_utf8_lossy(out.as_slice()).into_owned()));
            }
            Err(
                crate::source::NotCompiled::Unusable(e) | crate::source::NotCompiled::Failed(e),
            ) => return Err(not(e)),
        }
    };
    Ok(Loaded {
        path: path.to_path_buf(),
        spec,
        program: Arc::new(program),
    })
}

/// How tests run.
pub struct TestOptions {
    /// Only cases whose `FILE: NAME` contains this.
    pub filter: Option<String>,
    /// Cases run at once.
    pub jobs: usize,
    /// Record: cases answered by tapes are run against this driver instead, and their tapes
    /// written anew.
    pub record: Option<DriverChoice>,
    /// Where the runs are kept.
    pub store: Arc<dyn Store>,
    /// Where runs live (the state directory) and how requests are served.
    pub place: Place,
    /// Where each case's working directory is made (`DIR/N`).
    pub scratch: PathBuf,
}

/// How a case came out.
#[derive(Debug)]
pub enum Verdict {
    /// Every check held.
    Passed,
    /// These checks did not.
    Failed(Vec<Failure>),
    /// Left out, and why.
    Ignored(Option<String>),
}

/// A case and how it came out.
#[derive(Debug)]
pub struct Outcome {
    /// The test file.
    pub file: PathBuf,
    /// The case's name.
    pub name: String,
    /// How it came out.
    pub verdict: Verdict,
    /// Its run (none when ignored).
    pub run: Option<CaseRun>,
}

impl Outcome {
    /// The case as the summary names it: `FILE: NAME`.
    pub fn title(&self) -> String {
        format!("{}: {}", self.file.display(), self.name)
    }
}

/// The model the first request of the tape at `path` names, to replay it with.
fn tape_model(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().skip(1).find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        v["request"]["model"].as_str().map(str::to_string)
    })
}

/// The driver a case is answered by, for the test file in `dir`.
fn driver_of(
    case: &Case,
    dir: &Path,
    record: Option<&DriverChoice>,
) -> Result<DriverSettings, String> {
    let settings = prose_settings::Settings::load(None, dir).map_err(|e| e.to_string())?;
    let answers = &case.answers;
    if let Some(tape) = &answers.tape {
        let tape = dir.join(tape.get_ref());
        let choice = match record {
            Some(real) => {
                // Recorded anew: the old tape goes first.
                let _ = std::fs::remove_file(&tape);
                DriverChoice {
                    record: Some(tape),
                    ..real.clone()
                }
            }
            None => DriverChoice {
                model: tape_model(&tape),
                replay: Some(tape),
                ..DriverChoice::default()
            },
        };
        return choice.settings(&settings);
    }
    let script: Vec<Rule> = match &answers.script {
        None => Vec::new(),
        Some(s) => {
            let path = dir.join(s.get_ref());
            std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                .map_err(|e| format!("{}: {e}", path.display()))?
        }
    };
    let conditions = match &answers.conditions {
        None => Conditions::After(1),
        Some(c) => c.get_ref().parse().map_err(|e: String| e)?,
    };
    DriverChoice {
        driver: Some(DriverKind::Mock),
        mock: MockOptions {
            conditions: Some(conditions),
            script,
            ..MockOptions::default()
        },
        ..DriverChoice::default()
    }
    .settings(&settings)
}

/// One case of a loaded file, to run.
struct Pending {
    file: Arc<Loaded>,
    index: usize,
}

/// Runs every case of `files` (those `opts.filter` selects), `opts.jobs` at once, calling
/// `done` with each outcome as it comes; returns them all, in the files' order.
pub async fn run_all(
    files: Vec<Loaded>,
    opts: &TestOptions,
    mut done: impl FnMut(&Outcome),
) -> Vec<Outcome> {
    let mut pending = Vec::new();
    let mut outcomes: Vec<Option<Outcome>> = Vec::new();
    for f in files.into_iter().map(Arc::new) {
        for index in 0..f.spec.tests.len() {
            let case = &f.spec.tests[index];
            let title = format!("{}: {}", f.path.display(), case.name.get_ref());
            if opts
                .filter
                .as_ref()
                .is_some_and(|t| !title.contains(t.as_str()))
            {
                continue;
            }
            pending.push(Pending {
                file: f.clone(),
                index,
            });
            outcomes.push(None);
        }
    }
    // A run's machine stays on its thread: the cases share one, taking turns at every wait.
    let local = tokio::task::LocalSet::new();
    let limit = Arc::new(tokio::sync::Semaphore::new(opts.jobs.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (slot, p) in pending.into_iter().enumerate() {
        let limit = limit.clone();
        let store = opts.store.clone();
        let mut place = opts.place.clone();
        place.config.stop = Default::default();
        let workdir = opts.scratch.join(slot.to_string());
        let record = opts.record.clone();
        tasks.spawn_local_on(
            async move {
                let _turn = limit.acquire_owned().await;
                (
                    slot,
                    run_one(&p.file, p.index, &*store, place, workdir, record.as_ref()).await,
                )
            },
            &local,
        );
    }
    local
        .run_until(async {
            while let Some(joined) = tasks.join_next().await {
                match joined {
                    Ok((slot, outcome)) => {
                        done(&outcome);
                        outcomes[slot] = Some(outcome);
                    }
                    Err(e) => eprintln!("prosevm test: a case's task failed: {e}"),
                }
            }
        })
        .await;
    outcomes.into_iter().flatten().collect()
}

/// Runs case `index` of `file`.
async fn run_one(
    file: &Loaded,
    index: usize,
    store: &dyn Store,
    place: Place,
    workdir: PathBuf,
    record: Option<&DriverChoice>,
) -> Outcome {
    let case = &file.spec.tests[index];
    let outcome = |verdict, run| Outcome {
        file: file.path.clone(),
        name: case.name.get_ref().clone(),
        verdict,
        run,
    };
    match &case.ignore {
        Ignore::No => {}
        Ignore::Yes => return outcome(Verdict::Ignored(None), None),
        Ignore::Because(why) => return outcome(Verdict::Ignored(Some(why.clone())), None),
    }
    let dir = file.path.parent().unwrap_or(Path::new("")).to_path_buf();
    let driver = match driver_of(case, &dir, record) {
        Ok(d) => d,
        Err(e) => {
            return outcome(
                Verdict::Failed(vec![Failure {
                    what: "answers".into(),
                    expected: "a driver to answer the case".into(),
                    found: e,
                }]),
                None,
            )
        }
    };
    let files = case
        .files
        .iter()
        .map(|(k, v)| (k.get_ref().clone(), v.clone()))
        .collect();
    let inputs = inputs_from_toml(case.inputs.iter().map(|(k, v)| (k.get_ref().as_str(), v)));
    let run = run_case(
        store,
        CaseSpec {
            program: &file.program,
            inputs,
            files: &files,
            workdir,
            driver,
            options: ExecOptions::default(),
            place,
            memo: None,
        },
    )
    .await;
    let read = |rel: &str| run.file(rel);
    let failures = verdict(&case.expect, &run.facts(&read), &|v| Check::read(v));
    let verdict = if failures.is_empty() {
        Verdict::Passed
    } else {
        Verdict::Failed(failures)
    };
    outcome(verdict, Some(run))
}

/// The outcomes as JUnit XML (one `testsuite` per test file), for CI.
pub fn junit(outcomes: &[Outcome], elapsed: Duration) -> String {
    use std::fmt::Write;
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let mut files: Vec<&Path> = outcomes.iter().map(|o| o.file.as_path()).collect();
    files.dedup();
    let failures = outcomes
        .iter()
        .filter(|o| matches!(o.verdict, Verdict::Failed(_)))
        .count();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"prosevm test\" tests=\"{}\" failures=\"{failures}\" time=\"{:.3}\">",
        outcomes.len(),
        elapsed.as_secs_f64()
    );
    for f in files {
        let of: Vec<&Outcome> = outcomes.iter().filter(|o| o.file == f).collect();
        let failed = of
            .iter()
            .filter(|o| matches!(o.verdict, Verdict::Failed(_)))
            .count();
        let skipped = of
            .iter()
            .filter(|o| matches!(o.verdict, Verdict::Ignored(_)))
            .count();
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\" skipped=\"{skipped}\">",
            esc(&f.display().to_string()),
            of.len()
        );
        for o in of {
            let time = o.run.as_ref().map_or(0.0, |r| r.elapsed.as_secs_f64());
            let _ = write!(
                xml,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{time:.3}\"",
                esc(&f.display().to_string()),
                esc(&o.name)
            );
            match &o.verdict {
                Verdict::Passed => xml.push_str("/>\n"),
                Verdict::Ignored(why) => {
                    let _ = writeln!(
                        xml,
                        "><skipped message=\"{}\"/></testcase>",
                        esc(why.as_deref().unwrap_or("ignored"))
                    );
                }
                Verdict::Failed(fs) => {
                    let first = fs.first().map(|f| f.to_string()).unwrap_or_default();
                    let all: Vec<String> = fs.iter().map(|f| f.to_string()).collect();
                    let _ = writeln!(
                        xml,
                        "><failure message=\"{}\">{}</failure></testcase>",
                        esc(&first),
                        esc(&all.join("\n"))
                    );
                }
            }
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}
