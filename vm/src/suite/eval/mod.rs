//! `prosevm eval`: a program run over a dataset against a real model, each row's run scored
//! by the checks of the eval file (1 or 0 each) and by its judges (0 to 1 over their scale),
//! once per model asked for, `tries` times each. Rows run several at once, their requests
//! counted together under the driver's limit; each run is durable in the store, and so is
//! the eval's record, written as each try is scored, so an interrupted eval resumes where it
//! stopped. With the memo, an eval after an edit asks the model only what the edit changed.

pub mod judge;
pub mod page;
pub mod record;

use super::case::{resume_case, run_case, CaseRun, CaseSpec};
use super::testing::NotLoaded;
use crate::run::Place;
use prose_machine::value::Value;
use prose_runtime::driver::settings::{DriverSettings, Tape};
use prose_runtime::memo::MemoStore;
use prose_runtime::program::Program;
use prose_runtime::record::ExecOptions;
use prose_store::{Store, StoreError};
use prosec::suite::checks::{names, text_of, verdict, Failure};
use prosec::suite::dataset::{self, Row};
use prosec::suite::eval::{EvalFile, Judge};
use prosec::suite::spec::{Check, Expect};
use record::{EvalRecord, RowResult, Score, Variant};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// An eval ready to run: its file read and checked, its program and judges compiled, its
/// dataset read.
pub struct Plan {
    /// The eval file.
    pub path: PathBuf,
    /// What it says.
    pub spec: EvalFile,
    /// The dataset's path.
    pub dataset: PathBuf,
    /// Its rows.
    pub rows: Vec<Row>,
    /// The program.
    pub program: Arc<Program>,
    /// Each judge's program, in the file's order.
    pub judges: Vec<Arc<Program>>,
}

/// Diagnostics rendered as `prosec check` renders them.
fn rendered(c: &prosec::compile::Compilation, color: bool) -> String {
    let mut out = if color {
        termcolor::Buffer::ansi()
    } else {
        termcolor::Buffer::no_color()
    };
    let _ = prosec::diagnostics::render_text(&mut out, &c.sources, &c.diagnostics);
    String::from_utf8_lossy(out.as_slice()).into_owned()
}

/// Compiles `source` (a program written here, as a judge's) in memory.
fn compile_text(name: &str, source: &str) -> Result<Program, String> {
    let mut c = prosec::compile::Compilation::new(prosec::compile::Options {
        require_imports: true,
        ..Default::default()
    });
    let root = c.add_source(Path::new(name), source);
    if c.error_count() > 0 {
        return Err(rendered(&c, false));
    }
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).map_err(|e| e.to_string())?;
    Program::from_bytes(bytes, PathBuf::from(name)).map_err(|e| e.to_string())
}

/// Reads and checks the eval file at `path` (as `prosec check` does: one that does not
/// check does not run), compiles its program (fetching what it imports, as `prosevm run`
/// does for a real driver) and its judges, and reads its dataset.
pub fn load(path: &Path, color: bool) -> Result<Plan, NotLoaded> {
    let not = |why: String| NotLoaded {
        path: path.to_path_buf(),
        why,
    };
    let mut c = prosec::compile::Compilation::new(Default::default());
    prosec::suite::static_check::check_file(&mut c, path).map_err(|e| not(e.to_string()))?;
    if c.error_count() > 0 {
        return Err(not(rendered(&c, color)));
    }
    let text = std::fs::read_to_string(path).map_err(|e| not(e.to_string()))?;
    let spec = prosec::suite::eval::parse(&text).map_err(|(e, _)| not(e))?;
    let dir = path.parent().unwrap_or(Path::new(""));
    let dataset = dir.join(spec.dataset.get_ref());
    let csv = dataset.extension().is_some_and(|x| x == "csv");
    let rows = std::fs::read_to_string(&dataset)
        .map_err(|e| e.to_string())
        .and_then(|t| {
            dataset::parse(&t, csv).map_err(|e| format!("line {}: {}", e.line, e.message))
        })
        .map_err(|e| not(format!("{}: {e}", dataset.display())))?;
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
        match crate::source::compile(&program_path, &[], false, |_| true) {
            Ok(c) => c.program,
            Err(crate::source::NotCompiled::Refused(c)) => return Err(not(rendered(&c, color))),
            Err(
                crate::source::NotCompiled::Unusable(e) | crate::source::NotCompiled::Failed(e),
            ) => return Err(not(e)),
        }
    };
    Plan::new(path.to_path_buf(), spec, dataset, rows, program).map_err(not)
}

impl Plan {
    /// The plan of eval `spec` (from `path`) of `program` over `rows` (from `dataset`), its
    /// judges compiled.
    pub fn new(
        path: PathBuf,
        spec: EvalFile,
        dataset: PathBuf,
        rows: Vec<Row>,
        program: Program,
    ) -> Result<Plan, String> {
        let judges = spec
            .judges
            .iter()
            .map(|j| {
                compile_text(
                    &format!("judge-{}.prose", j.name.get_ref()),
                    &judge::program(j),
                )
                .map(Arc::new)
                .map_err(|e| format!("judge `{}`: {e}", j.name.get_ref()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Plan {
            path,
            spec,
            dataset,
            rows,
            program: Arc::new(program),
            judges,
        })
    }
}

/// How an eval runs.
pub struct EvalOptions {
    /// One driver per model asked for (`None`: the driver's own model), each a variant.
    pub variants: Vec<(Option<String>, DriverSettings)>,
    /// Where runs and the eval are kept.
    pub store: Arc<dyn Store>,
    /// Where runs live and how requests are served (its `config.shared` counts the requests
    /// in flight over every row).
    pub place: Place,
    /// Where each eval's tries get their working directories (`EVAL/SLOT`), kept until
    /// every try is scored (an interrupted eval's runs go on in them). Never under the
    /// state directory, which tools may not touch.
    pub scratch: PathBuf,
    /// Tries run at once.
    pub jobs: usize,
    /// Whether the memo keeps and reuses the provider's answers.
    pub memo: bool,
    /// The record of an eval stopped before it ended, to go on with.
    pub resume: Option<EvalRecord>,
    /// Tapes of every try's exchanges (and its judges'): recorded, or replayed in their
    /// stead, so an eval recorded once on a real model runs again offline at no cost.
    pub tapes: Option<Tapes>,
}

/// Where an eval's tapes are, one per try (`ROW-TRY.tape`, and `ROW-TRY-judge-NAME.tape`
/// for its judges; a model's name comes first when several are run).
#[derive(Clone, Debug)]
pub struct Tapes {
    /// The directory.
    pub dir: PathBuf,
    /// Recorded anew (true), or replayed.
    pub record: bool,
}

impl Tapes {
    /// The tape named `stem` (made a file name), and what the driver does with it.
    fn tape(&self, stem: &str) -> Tape {
        let name: String = stem
            .chars()
            .map(|c| {
                if c.is_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = self.dir.join(format!("{name}.tape"));
        if self.record {
            let _ = std::fs::remove_file(&path);
            Tape::Record(path)
        } else {
            Tape::Replay(path)
        }
    }
}

/// The score names `plan` gives: the eval's checks, then its judges (rows' own checks are
/// added as they come).
fn score_names(plan: &Plan) -> Vec<String> {
    let mut n = names(&plan.spec.expect);
    n.extend(plan.spec.judges.iter().map(|j| j.name.get_ref().clone()));
    n
}

/// A new eval's record for `plan`, run by `opts` (its id is known before it runs: pass it as
/// `opts.resume` to run it).
pub fn new_record(plan: &Plan, opts: &EvalOptions) -> EvalRecord {
    let (id, started) = prose_store::ids::new_run_id();
    EvalRecord {
        id,
        started,
        finished: None,
        file: plan.path.clone(),
        program: plan.program.artifact.modules[0].name.clone(),
        artifact_sha256: plan.program.sha256().to_string(),
        dataset: plan.dataset.clone(),
        rows: plan.rows.len(),
        tries: plan.spec.tries,
        driver: opts
            .variants
            .first()
            .map(|(_, d)| d.describe())
            .unwrap_or_default(),
        scores: score_names(plan),
        variants: opts
            .variants
            .iter()
            .map(|(model, _)| Variant {
                model: model.clone(),
                results: plan
                    .rows
                    .iter()
                    .enumerate()
                    .flat_map(|(i, row)| {
                        (0..plan.spec.tries).map(move |t| RowResult {
                            row: i,
                            name: row.name.clone(),
                            try_index: t,
                            status: "pending".into(),
                            inputs: row.inputs.clone(),
                            ..RowResult::default()
                        })
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Keeps `record` in `store`.
async fn keep(store: &dyn Store, record: &EvalRecord) -> Result<(), StoreError> {
    let json = serde_json::to_value(record)
        .map_err(|e| StoreError::Invalid(format!("eval {}: {e}", record.id)))?;
    store.put_eval(&record.id, &record.started, &json).await
}

/// Runs the eval `plan` (or goes on with `opts.resume`), calling `scored` with each try as
/// it is scored; returns its record, kept in the store.
pub async fn run(
    plan: Arc<Plan>,
    opts: &EvalOptions,
    mut scored: impl FnMut(&EvalRecord, usize, &RowResult),
) -> Result<EvalRecord, StoreError> {
    let record = opts
        .resume
        .clone()
        .unwrap_or_else(|| new_record(&plan, opts));
    keep(&*opts.store, &record).await?;
    let record = Rc::new(RefCell::new(record));
    let memo: Option<Arc<dyn MemoStore>> = opts.memo.then(|| opts.store.memo());
    let local = tokio::task::LocalSet::new();
    let limit = Arc::new(tokio::sync::Semaphore::new(opts.jobs.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let todo: Vec<(usize, usize)> = record
        .borrow()
        .variants
        .iter()
        .enumerate()
        .flat_map(|(v, variant)| {
            variant
                .results
                .iter()
                .enumerate()
                .filter(|(_, r)| !r.scored)
                .map(move |(i, _)| (v, i))
        })
        .collect();
    for (slot, (v, i)) in todo.into_iter().enumerate() {
        let (limit, memo, record) = (limit.clone(), memo.clone(), record.clone());
        let driver = opts.variants[v].1.clone();
        let tapes = opts.tapes.clone().map(|t| {
            let r = &record.borrow().variants[v].results[i];
            let model = match (&opts.variants[v].0, opts.variants.len()) {
                (Some(m), n) if n > 1 => format!("{m}-"),
                _ => String::new(),
            };
            (t, format!("{model}{}-{}", r.name, r.try_index + 1))
        });
        let store = opts.store.clone();
        // One stop for every try: Ctrl-C interrupts them all, to be taken up again.
        let place = opts.place.clone();
        let workdir = opts
            .scratch
            .join(&record.borrow().id)
            .join(slot.to_string());
        let plan = plan.clone();
        tasks.spawn_local_on(
            async move {
                let _turn = limit.acquire_owned().await;
                let previous = record.borrow().variants[v].results[i].clone();
                let result = try_row(
                    &plan, &*store, previous, driver, place, workdir, memo, tapes,
                )
                .await;
                (v, i, result)
            },
            &local,
        );
    }
    local
        .run_until(async {
            while let Some(joined) = tasks.join_next().await {
                let Ok((v, i, result)) = joined else { continue };
                let snapshot = {
                    let mut r = record.borrow_mut();
                    for s in &result.scores {
                        if !r.scores.contains(&s.name) {
                            r.scores.push(s.name.clone());
                        }
                    }
                    r.variants[v].results[i] = result;
                    r.clone()
                };
                scored(&snapshot, v, &snapshot.variants[v].results[i]);
                if let Err(e) = keep(&*opts.store, &snapshot).await {
                    eprintln!("prosevm eval: the eval's record could not be kept: {e}");
                }
            }
        })
        .await;
    let mut done = record.borrow().clone();
    if done
        .variants
        .iter()
        .all(|v| v.results.iter().all(|r| r.scored))
    {
        done.finished = Some(prose_runtime::clock::timestamp(prose_runtime::clock::now()).2);
        // Every try is scored: no run is left to take up in its working directory.
        let _ = std::fs::remove_dir_all(opts.scratch.join(&done.id));
    }
    keep(&*opts.store, &done).await?;
    Ok(done)
}

/// Runs (or goes on with) one try of a row and scores it; with `tapes`, its exchanges (and
/// its judges') are kept on, or answered from, the tapes named after `.1`.
#[allow(clippy::too_many_arguments)]
async fn try_row(
    plan: &Plan,
    store: &dyn Store,
    previous: RowResult,
    driver: DriverSettings,
    place: Place,
    workdir: PathBuf,
    memo: Option<Arc<dyn MemoStore>>,
    tapes: Option<(Tapes, String)>,
) -> RowResult {
    let row = &plan.rows[previous.row];
    let taped = |stem: &str| match &tapes {
        None => Ok(driver.clone()),
        Some((t, base)) => driver.with_tape(t.tape(&format!("{base}{stem}"))),
    };
    let (driver, judges_driver) = match (
        taped(""),
        plan.spec
            .judges
            .iter()
            .map(|j| taped(&format!("-judge-{}", j.name.get_ref())))
            .collect::<Result<Vec<_>, _>>(),
    ) {
        (Ok(d), Ok(j)) => (d, j),
        (Err(e), _) | (_, Err(e)) => {
            return RowResult {
                status: "unstarted".into(),
                error: Some(e),
                scored: true,
                ..previous
            }
        }
    };
    let run = match &previous.run {
        // Started before the eval was stopped: taken up from its journal.
        Some(id) => resume_case(store, id, driver.clone(), place.clone(), memo.clone()).await,
        None => {
            let inputs: BTreeMap<String, Value> = row
                .inputs
                .iter()
                .map(|(k, v)| (k.clone(), Value::from_json(v)))
                .collect();
            run_case(
                store,
                CaseSpec {
                    program: &plan.program,
                    inputs,
                    files: &row.files,
                    workdir: workdir.clone(),
                    driver: driver.clone(),
                    options: ExecOptions::default(),
                    place: place.clone(),
                    memo: memo.clone(),
                },
            )
            .await
        }
    };
    // A try stopped before its end (interrupted) is left to be taken up again.
    if run.status == "interrupted" {
        return RowResult {
            run: run.id.clone(),
            status: run.status.clone(),
            ..previous
        };
    }
    let mut scores = check_scores(&plan.spec.expect, row, &run);
    if let Some(own) = &row.expect {
        for s in check_scores(own, row, &run) {
            if !scores.iter().any(|x| x.name == s.name) {
                scores.push(s);
            }
        }
    }
    let mut judge_cost: Option<f64> = None;
    let mut passed = scores.iter().all(|s| s.value >= 1.0);
    for ((j, program), judge_driver) in plan
        .spec
        .judges
        .iter()
        .zip(&plan.judges)
        .zip(&judges_driver)
    {
        let Some((score, cost)) = judge_score(
            j,
            program,
            row,
            &run,
            store,
            judge_driver,
            &place,
            &workdir,
            memo.clone(),
        )
        .await
        else {
            // The judge was interrupted: the try is scored again when the eval goes on.
            return RowResult {
                run: run.id.clone(),
                status: "interrupted".into(),
                ..previous
            };
        };
        if let Some(c) = cost {
            *judge_cost.get_or_insert(0.0) += c;
        }
        passed &= score.raw.is_some_and(|raw| j.passes(raw));
        scores.push(score);
    }
    RowResult {
        run: run.id.clone(),
        status: run.status.clone(),
        error: run.error.clone(),
        outputs: run.outputs.clone(),
        scores,
        passed,
        cost: run.cost,
        judge_cost,
        tokens: run.tokens,
        memo: run.memo,
        seconds: run.elapsed.as_secs_f64(),
        first_token_ms: run.first_token_ms,
        latencies: run.latencies.clone(),
        scored: true,
        ..previous
    }
}

/// A score per check of `expect` (its texts filled with `row`'s values): 1 when it holds,
/// else 0 with the first difference as the reason.
fn check_scores(expect: &Expect, row: &Row, run: &CaseRun) -> Vec<Score> {
    let read = |rel: &str| run.file(rel);
    let failures: Vec<Failure> = verdict(expect, &run.facts(&read), &|v| {
        Check::read(&row.fill_value(v))
    });
    names(expect)
        .into_iter()
        .map(|name| {
            let failed = failures.iter().find(|f| f.what == name);
            Score {
                value: if failed.is_some() { 0.0 } else { 1.0 },
                reason: failed.map(|f| format!("expected {}, found {}", f.expected, f.found)),
                name,
                ..Score::default()
            }
        })
        .collect()
}

/// Judge `j`'s score of `run`'s output, and what asking it cost; none when the judge's run
/// was interrupted before it answered.
#[allow(clippy::too_many_arguments)]
async fn judge_score(
    j: &Judge,
    program: &Program,
    row: &Row,
    run: &CaseRun,
    store: &dyn Store,
    driver: &DriverSettings,
    place: &Place,
    workdir: &Path,
    memo: Option<Arc<dyn MemoStore>>,
) -> Option<(Score, Option<f64>)> {
    let name = j.name.get_ref().clone();
    let zero = |reason: String, judge_run: Option<String>| Score {
        name: name.clone(),
        value: 0.0,
        raw: None,
        reason: Some(reason),
        judge_run,
    };
    let Some(output) = run.outputs.get(j.output.get_ref()) else {
        let why = format!("the run has no output `{}` to grade", j.output.get_ref());
        return Some((zero(why, None), None));
    };
    let inputs = BTreeMap::from([
        ("rubric".to_string(), Value::text(row.fill(&j.rubric))),
        ("subject".to_string(), Value::text(text_of(output))),
    ]);
    let graded = run_case(
        store,
        CaseSpec {
            program,
            inputs,
            files: &BTreeMap::new(),
            workdir: workdir.with_extension(format!("judge-{name}")),
            driver: driver.clone(),
            options: ExecOptions::default(),
            place: place.clone(),
            memo,
        },
    )
    .await;
    if graded.status == "interrupted" {
        return None;
    }
    let answer = graded.outputs.get("verdict").map(text_of);
    let score = match (
        &answer,
        judge::verdict(answer.as_deref().unwrap_or(""), j.bounds()),
    ) {
        (_, Some((raw, reason))) => Score {
            name,
            value: j.normalized(raw),
            raw: Some(raw),
            reason: Some(reason),
            judge_run: graded.id.clone(),
        },
        (Some(a), None) => zero(format!("the judge gave no score: {a:?}"), graded.id.clone()),
        (None, None) => zero(
            format!(
                "the judge did not answer: {}",
                graded.error.as_deref().unwrap_or(&graded.status)
            ),
            graded.id.clone(),
        ),
    };
    Some((score, graded.cost))
}
