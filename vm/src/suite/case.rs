//! One run of a program for a test or an eval: a working directory made with the case's
//! files, the program run there to its end in a store, answered as the case says, and the
//! facts its checks read.

use crate::run::{connect, Place, Run};
use prose_machine::trace::Event;
use prose_machine::value::Value;
use prose_runtime::driver::settings::DriverSettings;
use prose_runtime::memo::MemoStore;
use prose_runtime::program::Program;
use prose_runtime::record::{ExecOptions, RunStatus};
use prose_store::Store;
use prosec::suite::checks::RunFacts;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most of a file the checks read: a larger one is read cut short.
const MAX_FILE_READ: u64 = 16 << 20;

/// What a case runs.
pub struct CaseSpec<'a> {
    /// The program.
    pub program: &'a Program,
    /// Its inputs.
    pub inputs: BTreeMap<String, Value>,
    /// The files its working directory starts with, by relative path.
    pub files: &'a BTreeMap<String, String>,
    /// Its working directory: made now, with the files (it must not hold anything yet).
    pub workdir: PathBuf,
    /// What answers it.
    pub driver: DriverSettings,
    /// How it executes.
    pub options: ExecOptions,
    /// Where it is kept and how requests are served (its `workdir` is set here).
    pub place: Place,
    /// The memo, for a run that keeps and reuses a provider's answers.
    pub memo: Option<Arc<dyn MemoStore>>,
}

/// What a case's run did.
#[derive(Debug, Clone, Default)]
pub struct CaseRun {
    /// The run's id, once it started.
    pub id: Option<String>,
    /// How it ended (`finished`, `failed`, ...), or `unstarted`.
    pub status: String,
    /// Its error, when it did not finish (or could not start).
    pub error: Option<String>,
    /// Its outputs.
    pub outputs: serde_json::Map<String, serde_json::Value>,
    /// The sessions it asked.
    pub sessions: usize,
    /// The tools its sessions called, in order.
    pub tools: Vec<String>,
    /// What it cost, where prices are known.
    pub cost: Option<f64>,
    /// Tokens in and out, where the driver reports them.
    pub tokens: (u64, u64),
    /// Model requests answered from the memo, and those sent to the provider.
    pub memo: (u64, u64),
    /// Each request's time, in milliseconds.
    pub latencies: Vec<u64>,
    /// Milliseconds to the first token of its first streamed answer.
    pub first_token_ms: Option<u64>,
    /// How long it took.
    pub elapsed: Duration,
    /// Its working directory.
    pub workdir: PathBuf,
}

impl CaseRun {
    /// A run that could not start, and why.
    fn unstarted(workdir: PathBuf, why: String, started: Instant) -> CaseRun {
        CaseRun {
            status: "unstarted".into(),
            error: Some(why),
            elapsed: started.elapsed(),
            workdir,
            ..CaseRun::default()
        }
    }

    /// The facts its checks read, files read from its working directory.
    pub fn facts<'a>(&'a self, file: &'a dyn Fn(&str) -> Option<String>) -> RunFacts<'a> {
        RunFacts {
            status: &self.status,
            error: self.error.as_deref(),
            sessions: self.sessions,
            cost: self.cost,
            tools: &self.tools,
            outputs: &self.outputs,
            file,
        }
    }

    /// The text of `rel` in its working directory, if it is a file there (never a path
    /// outside it, nor a link).
    pub fn file(&self, rel: &str) -> Option<String> {
        read_inside(&self.workdir, rel)
    }
}

/// The text of `rel` under `dir`, when `rel` stays inside it and names a regular file that
/// is not a link (cut at `MAX_FILE_READ`).
pub fn read_inside(dir: &Path, rel: &str) -> Option<String> {
    use std::io::Read;
    let rel = Path::new(rel);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return None;
    }
    let path = dir.join(rel);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut text = Vec::new();
    std::fs::File::open(&path)
        .ok()?
        .take(MAX_FILE_READ)
        .read_to_end(&mut text)
        .ok()?;
    Some(String::from_utf8_lossy(&text).into_owned())
}

/// Makes `workdir` with `files` in it.
fn lay_out(workdir: &Path, files: &BTreeMap<String, String>) -> Result<(), String> {
    std::fs::create_dir_all(workdir)
        .map_err(|e| format!("cannot make {}: {e}", workdir.display()))?;
    for (rel, text) in files {
        let p = Path::new(rel);
        if p.is_absolute()
            || p.components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(format!(
                "`{rel}` is not a path inside the working directory"
            ));
        }
        let path = workdir.join(p);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot make {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("cannot write {rel}: {e}"))?;
    }
    Ok(())
}

/// Counts what a run does as it goes.
#[derive(Default)]
struct Tally {
    sessions: usize,
    tools: Vec<String>,
    cost: Option<f64>,
    tokens: (u64, u64),
    memo: (u64, u64),
    latencies: Vec<u64>,
    first_token_ms: Option<u64>,
}

impl prose_runtime::observe::Observer for Tally {
    fn event(&mut self, e: &Event) {
        match e {
            Event::Session { .. } => self.sessions += 1,
            Event::ToolCall { tool, .. } => self.tools.push(tool.clone()),
            Event::Usage {
                ms,
                first_token_ms,
                used,
                ..
            } => {
                self.latencies.push(*ms);
                if self.first_token_ms.is_none() {
                    self.first_token_ms = *first_token_ms;
                }
                if let Some(u) = used {
                    self.tokens.0 += u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
                    self.tokens.1 += u.output_tokens;
                    self.memo.0 += u.from_memo;
                    self.memo.1 += u.asked;
                    if let Some(c) = u.cost {
                        *self.cost.get_or_insert(0.0) += c;
                    }
                }
            }
            _ => {}
        }
    }
}

/// Runs `spec` in `store` to its end (finished, failed, or stopped to wait or at a budget).
pub async fn run_case(store: &dyn Store, spec: CaseSpec<'_>) -> CaseRun {
    let started = Instant::now();
    let CaseSpec {
        program,
        inputs,
        files,
        workdir,
        driver,
        options,
        mut place,
        memo,
    } = spec;
    if let Err(e) = lay_out(&workdir, files) {
        return CaseRun::unstarted(workdir, e, started);
    }
    // The run acts in its directory, canonical as every run's is.
    let workdir = std::fs::canonicalize(&workdir).unwrap_or(workdir);
    place.workdir = Some(workdir.clone());
    let connected = match connect(&driver, &program.artifact, memo).await {
        Ok(d) => d,
        Err(e) => return CaseRun::unstarted(workdir, e, started),
    };
    let run = match Run::start(store, program, inputs, driver, options, &place).await {
        Ok(r) => r,
        Err(e) => return CaseRun::unstarted(workdir, e.to_string(), started),
    };
    finish(run, connected, workdir, started).await
}

/// Takes up run `id` of `store` again (an eval interrupted before it ended) with `driver`,
/// and runs it to its end as [`run_case`] does; its working directory is the one it
/// recorded.
pub async fn resume_case(
    store: &dyn Store,
    id: &str,
    driver: DriverSettings,
    place: Place,
    memo: Option<Arc<dyn MemoStore>>,
) -> CaseRun {
    use crate::run::{Resumed, Resuming};
    let started = Instant::now();
    let how = Resuming {
        driver: Some(driver.clone()),
        inputs: BTreeMap::new(),
        journal: prose_store::JournalCheck::Strict,
        max_value_size: None,
        max_frame_memory: None,
        max_branches: None,
        workdir: None,
    };
    let unstarted = |why: String| CaseRun {
        id: Some(id.to_string()),
        ..CaseRun::unstarted(PathBuf::new(), why, started)
    };
    let run = match Run::resume(store, id, &place, how).await {
        Ok(Resumed::Ready(run)) => run,
        Ok(Resumed::Finished(record)) => {
            return CaseRun {
                id: Some(id.to_string()),
                status: RunStatus::Finished.as_str().into(),
                outputs: record.outputs.clone().unwrap_or_default(),
                workdir: record.workdir.clone(),
                elapsed: started.elapsed(),
                ..CaseRun::default()
            }
        }
        Err(e) => return unstarted(e.to_string()),
    };
    let workdir = run.record().workdir.clone();
    let connected = match connect(&driver, &run.artifact().clone(), memo).await {
        Ok(d) => d,
        Err(e) => return unstarted(e),
    };
    finish(*run, connected, workdir, started).await
}

/// Drives `run` to its end with `driver`, tallying what it does.
async fn finish<D: prose_runtime::driver::Driver>(
    run: Run,
    driver: Arc<D>,
    workdir: PathBuf,
    started: Instant,
) -> CaseRun {
    let id = run.record().id.clone();
    let mut tally = Tally::default();
    let ended = run.drive(driver, &mut tally).await;
    let (status, outputs, error) = match ended {
        Ok(Ok(outputs)) => (
            RunStatus::Finished.as_str().to_string(),
            outputs
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect(),
            None,
        ),
        Ok(Err(e)) => (
            RunStatus::ended_by(e.code).as_str().to_string(),
            serde_json::Map::new(),
            Some(e.to_string()),
        ),
        Err(e) => (
            "failed".to_string(),
            serde_json::Map::new(),
            Some(e.to_string()),
        ),
    };
    CaseRun {
        id: Some(id),
        status,
        error,
        outputs,
        sessions: tally.sessions,
        tools: tally.tools,
        cost: tally.cost,
        tokens: tally.tokens,
        memo: tally.memo,
        latencies: tally.latencies,
        first_token_ms: tally.first_token_ms,
        elapsed: started.elapsed(),
        workdir,
    }
}

/// A case's inputs as the run takes them, from the TOML a test file writes them in.
pub fn inputs_from_toml<'a>(
    inputs: impl IntoIterator<Item = (&'a str, &'a toml::Value)>,
) -> BTreeMap<String, Value> {
    inputs
        .into_iter()
        .map(|(k, v)| {
            let json = prosec::suite::spec::to_json(v.clone());
            (k.to_string(), Value::from_json(&json))
        })
        .collect()
}
