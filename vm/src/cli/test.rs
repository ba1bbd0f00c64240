//! `prosevm test [PATHS]`: runs the test files found under `PATHS` ([`prosevm::suite::testing`])
//! and prints what came out in cargo's style: a line per case as it ends, then each failure
//! with its first difference, then the count. Exit status 1 when a case fails or a test file
//! does not check.

use super::args::parse_driver;
use super::{fail, open_store, runtime};
use clap::Args;
use prose_runtime::driver::settings::{DriverChoice, DriverKind};
use prosec::console::{Console, Exit, Format};
use prosevm::suite::testing::{self, Outcome, TestOptions, Verdict};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The flags of `prosevm test`.
#[derive(Args)]
pub struct TestArgs {
    /// Test files (`NAME.test.toml`), or directories to find them under (default: `.`).
    paths: Vec<PathBuf>,
    /// Run only the cases whose `FILE: NAME` contains this text.
    #[arg(long, value_name = "TEXT")]
    filter: Option<String>,
    /// Cases run at once (default: 4).
    #[arg(long, value_name = "N", default_value_t = 4)]
    jobs: usize,
    /// Also write the outcomes as JUnit XML to this file, for CI.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Run the cases answered by tapes against the driver the flags name instead, and write
    /// their tapes anew (the other cases run as always).
    #[arg(long)]
    record: bool,
    /// With --record: the driver that answers (openai or anthropic).
    #[arg(long, value_parser = parse_driver)]
    driver: Option<DriverKind>,
    /// With --record: the provider's base URL.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// With --record: the model for sessions naming none (and what aliases map to).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Where the cases' runs are kept: a directory (or file:DIR), sqlite:PATH, or a
    /// postgres:// URL (default: a file store in a temporary directory, removed when every
    /// case passes).
    #[arg(
        long,
        value_name = "STORE",
        env = "PROSE_STORE",
        hide_env_values = true
    )]
    store: Option<String>,
}

/// `prosevm test`.
pub fn test(args: TestArgs) -> ExitCode {
    let started = Instant::now();
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let files = match testing::discover(&paths) {
        Ok(f) => f,
        Err(e) => return fail(e, Exit::Unusable),
    };
    if files.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return fail(
            format!("no test files (NAME.test.toml) under {}", shown.join(", ")),
            Exit::Unusable,
        );
    }
    let record = match (args.record, args.driver) {
        (false, _) => None,
        (true, Some(kind @ DriverKind::Chat(_))) => Some(DriverChoice {
            driver: Some(kind),
            base_url: args.base_url.clone(),
            model: args.model.clone(),
            ..DriverChoice::default()
        }),
        (true, _) => {
            return fail(
                "--record needs a model to record from: --driver openai or --driver anthropic",
                Exit::Unusable,
            )
        }
    };
    let color = Console::get().color && std::io::stderr().is_terminal();
    let (mut loaded, mut broken) = (Vec::new(), Vec::new());
    for f in &files {
        match testing::load(f, color, record.is_some()) {
            Ok(l) => loaded.push(l),
            Err(n) => broken.push(n),
        }
    }
    let scratch = std::env::temp_dir().join(format!(
        "prosevm-test-{}-{}",
        std::process::id(),
        prose_store::ids::random6()
    ));
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let state_dir = scratch.join("state");
    let store = match open_store(&rt, args.store.as_deref(), Some(&state_dir), 4) {
        Ok(s) => std::sync::Arc::<dyn prose_store::Store>::from(s),
        Err(code) => return code,
    };
    let opts = TestOptions {
        filter: args.filter.clone(),
        jobs: args.jobs,
        record,
        store,
        place: prosevm::run::Place {
            state_dir: Some(state_dir),
            ..Default::default()
        },
        scratch: scratch.join("cases"),
    };
    let json = Console::json();
    let cases: usize = loaded.iter().map(|l| l.spec.tests.len()).sum();
    if !json {
        println!(
            "\nrunning {cases} test(s) from {} file(s)",
            loaded.len() + broken.len()
        );
        for b in &broken {
            println!(
                "test {} ... FAILED (the file does not check)",
                b.path.display()
            );
        }
    }
    let outcomes = rt.block_on(testing::run_all(loaded, &opts, |o| {
        if !json {
            println!("test {} ... {}", o.title(), word(o));
        }
    }));
    let elapsed = started.elapsed();
    let count = |f: fn(&Verdict) -> bool| outcomes.iter().filter(|o| f(&o.verdict)).count();
    let passed = count(|v| matches!(v, Verdict::Passed));
    let failed = count(|v| matches!(v, Verdict::Failed(_))) + broken.len();
    let ignored = count(|v| matches!(v, Verdict::Ignored(_)));
    if let Some(path) = &args.junit {
        if let Err(e) = std::fs::write(path, testing::junit(&outcomes, elapsed)) {
            return fail(
                format!("cannot write {}: {e}", path.display()),
                Exit::Unusable,
            );
        }
    }
    if failed == 0 {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    match Console::get().format {
        Format::Json => {
            let tests: Vec<serde_json::Value> = outcomes.iter().map(outcome_json).collect();
            let broken: Vec<serde_json::Value> = broken
                .iter()
                .map(|b| serde_json::json!({"file": b.path, "error": b.why}))
                .collect();
            println!(
                "{}",
                serde_json::json!({
                    "passed": passed,
                    "failed": failed,
                    "ignored": ignored,
                    "seconds": elapsed.as_secs_f64(),
                    "tests": tests,
                    "unchecked": broken,
                    "kept": (failed > 0).then_some(&scratch),
                })
            );
        }
        Format::Text => {
            let failures: Vec<&Outcome> = outcomes
                .iter()
                .filter(|o| matches!(o.verdict, Verdict::Failed(_)))
                .collect();
            if failed > 0 {
                println!("\nfailures:\n");
                for b in &broken {
                    println!("---- {} ----\n{}", b.path.display(), b.why.trim_end());
                    println!();
                }
                for o in &failures {
                    println!("---- {} ----", o.title());
                    if let Verdict::Failed(fs) = &o.verdict {
                        for f in fs {
                            println!("{f}");
                        }
                    }
                    if let Some(run) = &o.run {
                        if let Some(id) = &run.id {
                            println!(
                                "run {id} ({}), working directory {}",
                                run.status,
                                run.workdir.display()
                            );
                        }
                    }
                    println!();
                }
                println!("failures:");
                for b in &broken {
                    println!("    {}", b.path.display());
                }
                for o in &failures {
                    println!("    {}", o.title());
                }
                println!(
                    "\nthe failed cases' runs and working directories are kept under {}",
                    scratch.display()
                );
            }
            println!(
                "\ntest result: {}. {passed} passed; {failed} failed; {ignored} ignored; finished in {:.2}s\n",
                if failed == 0 { "ok" } else { "FAILED" },
                elapsed.as_secs_f64()
            );
        }
    }
    if failed > 0 {
        Exit::Failed.into()
    } else {
        ExitCode::SUCCESS
    }
}

/// How a case came out, in a word or two.
fn word(o: &Outcome) -> String {
    match &o.verdict {
        Verdict::Passed => "ok".into(),
        Verdict::Failed(_) => "FAILED".into(),
        Verdict::Ignored(None) => "ignored".into(),
        Verdict::Ignored(Some(why)) => format!("ignored, {why}"),
    }
}

/// A case's outcome as `--format json` gives it.
fn outcome_json(o: &Outcome) -> serde_json::Value {
    let (verdict, failures) = match &o.verdict {
        Verdict::Passed => ("passed", Vec::new()),
        Verdict::Ignored(_) => ("ignored", Vec::new()),
        Verdict::Failed(fs) => (
            "failed",
            fs.iter()
                .map(|f| serde_json::json!({"what": f.what, "expected": f.expected, "found": f.found}))
                .collect(),
        ),
    };
    let run = o.run.as_ref();
    serde_json::json!({
        "file": o.file,
        "name": o.name,
        "verdict": verdict,
        "failures": failures,
        "run": run.and_then(|r| r.id.clone()),
        "status": run.map(|r| r.status.clone()),
        "seconds": run.map(|r| r.elapsed.as_secs_f64()),
    })
}
