//! `prosevm eval FILE.eval.toml`: runs an eval ([`prosevm::suite::eval`]) with the driver
//! the flags name, once per `--model`, prints a line per try as it is scored and the figures
//! at the end, keeps the eval in the store, writes its page with `-o`, and compares it with
//! a baseline eval (exit status 1 when a score dropped by more than the threshold).
//! `prosevm evals [ID]` lists the evals a store keeps, or shows one.

use super::args::{parse_driver, parse_structured};
use super::{fail, open_store, runtime, store_error};
use clap::Args;
use prose_runtime::driver::settings::{DriverChoice, DriverKind};
use prose_runtime::runner::StopSignal;
use prose_settings::turns::StructuredTurns;
use prosec::console::{Console, Exit, Format};
use prosevm::suite::eval::record::{drops, EvalRecord, RowResult};
use prosevm::suite::eval::{self, EvalOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// The flags of `prosevm eval`.
#[derive(Args)]
pub struct EvalArgs {
    /// The eval file (`NAME.eval.toml`).
    file: PathBuf,
    /// The driver that answers: openai or anthropic (default: `prose.toml`'s); the mock
    /// and the other drivers also run an eval, to try it.
    #[arg(long, value_parser = parse_driver)]
    driver: Option<DriverKind>,
    /// The provider's base URL.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// A model to run the dataset on (repeatable: each model is run, side by side).
    #[arg(long = "model", value_name = "MODEL")]
    models: Vec<String>,
    /// What a model alias maps to, ALIAS=ID (repeatable).
    #[arg(long = "model-map", value_name = "ALIAS=ID")]
    model_map: Vec<String>,
    /// Requests in flight at once, over every row (default: the driver's).
    #[arg(long, value_name = "N")]
    max_concurrency: Option<usize>,
    /// Ask agent-loop turns as one JSON step under a schema: `auto` (where the server is
    /// known to decode under one, llama.cpp's), `on` or `off` (default: `structured_turns`
    /// in prose.toml, else `off`).
    #[arg(long, value_name = "auto|on|off", value_parser = parse_structured)]
    structured_turns: Option<StructuredTurns>,
    /// Rows (and tries) run at once (default 4).
    #[arg(long, value_name = "N", default_value_t = 4)]
    jobs: usize,
    /// Keep the provider's answers in the memo and reuse them: after an edit, only the
    /// requests the edit changed are asked (refused with `tries` above 1, which must ask
    /// each time).
    #[arg(long)]
    memo: bool,
    /// Go on with an eval an interrupt stopped (its id): what it scored is kept.
    #[arg(long, value_name = "EVAL")]
    resume: Option<String>,
    /// Compare with an earlier eval (its id, in the same store): exit status 1 when a
    /// score's mean or the pass rate dropped by more than --threshold.
    #[arg(long, value_name = "EVAL")]
    baseline: Option<String>,
    /// How far a score (from 0 to 1) may drop from the baseline's (default 0.05).
    #[arg(long, value_name = "X", default_value_t = 0.05)]
    threshold: f64,
    /// Also write the eval's page (HTML) to this file.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Keep every try's exchanges with the model (and its judges') on a tape in this
    /// directory (`ROW-TRY.tape`), to run the eval again offline with --replay-tapes.
    #[arg(long, value_name = "DIR", conflicts_with = "replay_tapes")]
    record_tapes: Option<PathBuf>,
    /// Answer every try from its tape in this directory (recorded with --record-tapes), with
    /// no provider: the same eval again, at no cost. Give the --driver and --model the tapes
    /// were recorded with.
    #[arg(long, value_name = "DIR")]
    replay_tapes: Option<PathBuf>,
    /// Where runs and evals are kept: a directory (or file:DIR), sqlite:PATH, or a
    /// postgres:// URL (default: the file store under --state-dir).
    #[arg(
        long,
        value_name = "STORE",
        env = "PROSE_STORE",
        hide_env_values = true
    )]
    store: Option<String>,
    /// Where runs live (default: `.prose` in the working directory).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

/// `prosevm eval`.
pub fn eval(args: EvalArgs) -> ExitCode {
    let json = Console::json();
    if !args.file.is_file() {
        return fail(
            format!("cannot read {}: no such file", args.file.display()),
            Exit::Unusable,
        );
    }
    let plan = match eval::load(&args.file, Console::get().color) {
        Ok(p) => Arc::new(p),
        Err(n) => {
            if !json {
                eprint!("{}", n.why);
            }
            return fail(
                format!(
                    "{} does not check: {}",
                    n.path.display(),
                    n.why.lines().next().unwrap_or("")
                ),
                Exit::Failed,
            );
        }
    };
    if args.memo && plan.spec.tries > 1 {
        return fail(
            "--memo answers a request asked before the same way, and the eval asks each row several times (tries): give one or the other",
            Exit::Unusable,
        );
    }
    let dir = args.file.parent().unwrap_or(Path::new("")).to_path_buf();
    let settings = match prose_settings::Settings::load(None, &dir) {
        Ok(s) => s,
        Err(e) => return fail(e, Exit::Unusable),
    };
    let models: Vec<Option<String>> = if args.models.is_empty() {
        vec![None]
    } else {
        args.models.iter().cloned().map(Some).collect()
    };
    let mut variants = Vec::new();
    for model in models {
        let choice = DriverChoice {
            driver: args.driver,
            base_url: args.base_url.clone(),
            model: model.clone(),
            model_map: args.model_map.clone(),
            max_concurrency: args.max_concurrency,
            structured_turns: args.structured_turns,
            ..DriverChoice::default()
        };
        match choice.settings(&settings) {
            Ok(d) => variants.push((model, d)),
            Err(e) => return fail(e, Exit::Unusable),
        }
    }
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let store = match open_store(&rt, args.store.as_deref(), args.state_dir.as_deref(), 8) {
        Ok(s) => Arc::<dyn prose_store::Store>::from(s),
        Err(code) => return code,
    };
    let read = |id: &str| -> Result<EvalRecord, ExitCode> {
        let v = rt.block_on(store.eval(id)).map_err(store_error)?;
        serde_json::from_value(v).map_err(|e| fail(format!("eval {id}: {e}"), Exit::Failed))
    };
    let baseline = match &args.baseline {
        Some(id) => match read(id) {
            Ok(r) => Some(r),
            Err(code) => return code,
        },
        None => None,
    };
    let resume = match &args.resume {
        Some(id) => match read(id) {
            Ok(r) => Some(r),
            Err(code) => return code,
        },
        None => None,
    };
    let stop = StopSignal::default();
    super::exec::stop_on_signals(
        &rt,
        stop.clone(),
        "prosevm eval",
        "stopping: the rows running are interrupted, to be taken up with --resume",
    );
    let concurrency = variants
        .first()
        .and_then(|(_, d)| d.max_concurrency())
        .or(args.max_concurrency)
        .unwrap_or(8);
    let mut place = prosevm::run::Place {
        state_dir: args.state_dir.clone(),
        mcp: settings.mcp.clone(),
        ..Default::default()
    };
    place.config.stop = stop.clone();
    // Requests in flight are counted over every row, under the driver's limit.
    place.config.shared = Some(Arc::new(tokio::sync::Semaphore::new(concurrency.max(1))));
    // Outside the state directory: tools may not write there.
    let scratch = std::env::temp_dir().join("prosevm-evals");
    let opts = EvalOptions {
        variants,
        store: store.clone(),
        place,
        scratch,
        jobs: args.jobs,
        memo: args.memo,
        resume,
        tapes: match (&args.record_tapes, &args.replay_tapes) {
            (Some(dir), _) => {
                if let Err(e) = std::fs::create_dir_all(dir) {
                    return fail(
                        format!("cannot make {}: {e}", dir.display()),
                        Exit::Unusable,
                    );
                }
                Some(eval::Tapes {
                    dir: dir.clone(),
                    record: true,
                })
            }
            (None, Some(dir)) => Some(eval::Tapes {
                dir: dir.clone(),
                record: false,
            }),
            (None, None) => None,
        },
    };
    if !json {
        eprintln!(
            "eval of {} over {}: {} row(s) × {} tr{}, {} model(s)",
            plan.program.artifact.modules[0].name,
            plan.dataset.display(),
            plan.rows.len(),
            plan.spec.tries,
            if plan.spec.tries == 1 { "y" } else { "ies" },
            opts.variants.len()
        );
    }
    let record = rt.block_on(eval::run(plan.clone(), &opts, |r, v, row| {
        if !json {
            eprintln!("{}", row_line(r, v, row));
        }
    }));
    let record = match record {
        Ok(r) => r,
        Err(e) => return store_error(e),
    };
    if let Some(path) = &args.output {
        if let Err(e) = std::fs::write(path, eval::page::render(&record)) {
            return fail(
                format!("cannot write {}: {e}", path.display()),
                Exit::Unusable,
            );
        }
    }
    let dropped = baseline
        .as_ref()
        .map(|b| drops(b, &record, args.threshold))
        .unwrap_or_default();
    show(&record, json, &dropped);
    if stop.asked() || record.finished.is_none() {
        if !json {
            eprintln!(
                "prosevm eval: eval {} stopped before its end; go on with: prosevm eval {} --resume {}",
                record.id,
                args.file.display(),
                record.id
            );
        }
        return Exit::Interrupted.into();
    }
    if !dropped.is_empty() {
        return Exit::Failed.into();
    }
    ExitCode::SUCCESS
}

/// A try, as the terminal shows it when it is scored.
fn row_line(r: &EvalRecord, v: usize, row: &RowResult) -> String {
    let model = r.variants[v]
        .model
        .as_deref()
        .map(|m| format!("[{m}] "))
        .unwrap_or_default();
    let scores: Vec<String> = row
        .scores
        .iter()
        .map(|s| format!("{} {:.2}", s.name, s.value))
        .collect();
    format!(
        "{model}{} try {}: {} {} ({:.1}s) {}",
        row.name,
        row.try_index + 1,
        row.status,
        if row.passed { "passed" } else { "not passed" },
        row.seconds,
        scores.join(", ")
    )
}

/// The eval's figures on stdout: text, or its record as JSON with each model's summary and
/// what dropped from the baseline.
fn show(record: &EvalRecord, json: bool, dropped: &[eval::record::Drop]) {
    if json {
        let mut doc = serde_json::to_value(record).unwrap_or_default();
        let summaries: Vec<serde_json::Value> = record
            .variants
            .iter()
            .map(|v| {
                let s = v.summary(&record.scores);
                serde_json::json!({
                    "model": v.model,
                    "pass_rate": s.pass_rate(),
                    "summary": s,
                })
            })
            .collect();
        doc["summaries"] = summaries.into();
        doc["dropped"] = dropped
            .iter()
            .map(|d| serde_json::json!({"model": d.model, "score": d.name, "before": d.before, "now": d.now}))
            .collect::<Vec<_>>()
            .into();
        println!("{doc}");
        return;
    }
    println!("eval {} of {}", record.id, record.program);
    for v in &record.variants {
        let s = v.summary(&record.scores);
        if let Some(m) = &v.model {
            println!("\nmodel {m}");
        }
        println!("  {:<32} {:>6} {:>7}", "score", "mean", "spread");
        for (name, mean, spread) in &s.scores {
            println!("  {name:<32} {mean:>6.3} {spread:>7.3}");
        }
        println!(
            "  pass rate {:.0}% ({}/{}) · cost ${:.4} (judges ${:.4}) · first token p50 {} · latency p50 {} p95 {} · {:.1}s of runs",
            s.pass_rate() * 100.0,
            s.passed,
            s.scored,
            s.cost,
            s.judge_cost,
            secs(s.first_token_p50),
            secs(s.latency_p50),
            secs(s.latency_p95),
            s.seconds
        );
    }
    for d in dropped {
        println!(
            "dropped from the baseline: {}{} {:.3} -> {:.3}",
            d.model
                .as_deref()
                .map(|m| format!("[{m}] "))
                .unwrap_or_default(),
            d.name,
            d.before,
            d.now
        );
    }
}

fn secs(ms: Option<u64>) -> String {
    ms.map_or("–".into(), |m| format!("{:.2}s", m as f64 / 1000.0))
}

/// The flags of `prosevm evals`.
#[derive(Args)]
pub struct EvalsArgs {
    /// An eval to show (its id); without it, every eval the store keeps is listed.
    id: Option<String>,
    /// With an id: also write the eval's page (HTML) to this file.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Where evals are kept: a directory (or file:DIR), sqlite:PATH, or a postgres:// URL
    /// (default: the file store under --state-dir).
    #[arg(
        long,
        value_name = "STORE",
        env = "PROSE_STORE",
        hide_env_values = true
    )]
    store: Option<String>,
    /// Where runs live (default: `.prose` in the working directory).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

/// `prosevm evals`.
pub fn evals(args: EvalsArgs) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let store = match open_store(&rt, args.store.as_deref(), args.state_dir.as_deref(), 2) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let json = Console::json();
    match &args.id {
        Some(id) => {
            let record: EvalRecord = match rt
                .block_on(store.eval(id))
                .map_err(store_error)
                .and_then(|v| {
                    serde_json::from_value(v)
                        .map_err(|e| fail(format!("eval {id}: {e}"), Exit::Failed))
                }) {
                Ok(r) => r,
                Err(code) => return code,
            };
            if let Some(path) = &args.output {
                if let Err(e) = std::fs::write(path, eval::page::render(&record)) {
                    return fail(
                        format!("cannot write {}: {e}", path.display()),
                        Exit::Unusable,
                    );
                }
            }
            show(&record, json, &[]);
            ExitCode::SUCCESS
        }
        None => {
            let all = match rt.block_on(store.evals()) {
                Ok(a) => a,
                Err(e) => return store_error(e),
            };
            let records: Vec<EvalRecord> = all
                .into_iter()
                .filter_map(|v| serde_json::from_value(v).ok())
                .collect();
            match Console::get().format {
                Format::Json => {
                    let list: Vec<serde_json::Value> = records
                        .iter()
                        .map(|r| {
                            serde_json::json!({
                                "id": r.id,
                                "program": r.program,
                                "started": r.started,
                                "finished": r.finished,
                                "rows": r.rows,
                                "tries": r.tries,
                                "pass_rates": r.variants.iter().map(|v| v.summary(&r.scores).pass_rate()).collect::<Vec<_>>(),
                            })
                        })
                        .collect();
                    println!("{}", serde_json::json!({ "evals": list }));
                }
                Format::Text => {
                    if records.is_empty() {
                        println!(
                            "no evals in the {} store at {}",
                            store.kind(),
                            store.location()
                        );
                    }
                    for r in &records {
                        let rates: Vec<String> = r
                            .variants
                            .iter()
                            .map(|v| {
                                let s = v.summary(&r.scores);
                                format!(
                                    "{}{:.0}%",
                                    v.model
                                        .as_deref()
                                        .map(|m| format!("{m} "))
                                        .unwrap_or_default(),
                                    s.pass_rate() * 100.0
                                )
                            })
                            .collect();
                        println!(
                            "{}  {:<20} {} row(s) × {}  {}  {}",
                            r.id,
                            r.program,
                            r.rows,
                            r.tries,
                            if r.finished.is_some() {
                                "ended"
                            } else {
                                "not ended"
                            },
                            rates.join(", ")
                        );
                    }
                }
            }
            ExitCode::SUCCESS
        }
    }
}
