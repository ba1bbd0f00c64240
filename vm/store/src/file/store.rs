//! The file store behind the [`Store`] trait: runs are directories, held by their lock.

use super::{listing, FileMemo, FileSink, FileWebhooks, Lock, RunDir};
use crate::journal::{self, Contents};
use crate::webhooks::Webhooks;
use crate::{
    fs, BoxFuture, HeldRun, JournalCheck, PruneRule, Pruned, RunRow, Store, StoreError, StoredRun,
    Taken, TakenRun,
};
use prose_machine::protocol::Reply;
use prose_runtime::memo::MemoStore;
use prose_runtime::program::Program;
use prose_runtime::record::{RunRecord, RunStatus, Seal};
use prose_runtime::runner::journal::JournalSink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file store: runs under `{state_dir}/runs/`.
#[derive(Clone, Debug, Default)]
pub struct FileStore {
    state_dir: Option<PathBuf>,
}

impl FileStore {
    /// The store under `state_dir` (default: `.prose` in the working directory).
    pub fn new(state_dir: Option<PathBuf>) -> FileStore {
        FileStore { state_dir }
    }

    fn open(&self, run: &str) -> Result<RunDir, StoreError> {
        RunDir::open(self.state_dir.as_deref(), run)
    }

    /// Where evals are kept: `evals/` of the state directory.
    fn evals_dir(&self) -> PathBuf {
        crate::state_root(self.state_dir.as_deref()).join("evals")
    }
}

/// A run directory this process holds by its lock.
pub struct FileHeld {
    dir: RunDir,
    _lock: Lock,
    /// What the journal holds, to open it for appending (a torn tail is cut then).
    contents: Contents,
    /// Files the journal's first sync makes durable (a new run's).
    first: Vec<PathBuf>,
}

impl FileHeld {
    fn invalid(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Invalid(format!("run {}: {e}", self.dir.id))
    }
}

impl Store for FileStore {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn location(&self) -> String {
        RunDir::runs_root(self.state_dir.as_deref())
            .display()
            .to_string()
    }

    fn memo(&self) -> Arc<dyn MemoStore> {
        Arc::new(FileMemo::new(
            crate::state_root(self.state_dir.as_deref()).join("memo"),
        ))
    }

    fn webhooks(&self) -> Arc<dyn Webhooks> {
        Arc::new(FileWebhooks {
            state_dir: self.state_dir.clone(),
        })
    }

    fn create<'a>(
        &'a self,
        record: &'a mut RunRecord,
        program: &'a Program,
        journal: &'a [Reply],
    ) -> BoxFuture<'a, Result<Box<dyn HeldRun>, StoreError>> {
        Box::pin(async move {
            let seeded: Vec<&Reply> = journal.iter().collect();
            let dir = RunDir::create(
                self.state_dir.as_deref(),
                record,
                &program.artifact.modules[0].source,
                &program.bytes,
                &seeded,
            )?;
            let lock = dir.lock()?;
            let contents = dir
                .read_journal(record)
                .map_err(|e| StoreError::Invalid(format!("run {}: {e}", dir.id)))?;
            let first = dir.start_files();
            Ok(Box::new(FileHeld {
                dir,
                _lock: lock,
                contents,
                first,
            }) as Box<dyn HeldRun>)
        })
    }

    fn take<'a>(
        &'a self,
        id: &'a str,
        check: JournalCheck,
    ) -> BoxFuture<'a, Result<Taken, StoreError>> {
        Box::pin(async move {
            let dir = self.open(id)?;
            let lock = dir.lock()?;
            let mut record = dir.record()?;
            if record.status == RunStatus::Finished {
                return Ok(Taken::Finished(Box::new(record)));
            }
            let path = dir.path.join("artifact.pbc");
            let artifact = fs::read(&path).map_err(|e| StoreError::Io(path, e))?;
            let contents = checked_journal(&dir, &mut record, check)?;
            let journal = contents.records.clone();
            Ok(Taken::Held(Box::new(TakenRun {
                held: Box::new(FileHeld {
                    dir,
                    _lock: lock,
                    contents,
                    first: Vec::new(),
                }),
                record,
                artifact,
                journal,
            })))
        })
    }

    fn record<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(String, RunRecord), StoreError>> {
        Box::pin(async move {
            let dir = self.open(id)?;
            let record = dir.record()?;
            Ok((dir.id, record))
        })
    }

    fn read<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<StoredRun, StoreError>> {
        Box::pin(async move {
            let dir = self.open(id)?;
            let record = dir.record()?;
            let path = dir.path.join("artifact.pbc");
            let artifact = fs::read(&path).map_err(|e| StoreError::Io(path, e))?;
            let journal = dir
                .read_journal(&record)
                .map_err(|e| StoreError::Invalid(format!("run {}: {e}", dir.id)))?
                .records;
            Ok(StoredRun {
                id: dir.id,
                record,
                artifact,
                journal,
            })
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<RunRow>, StoreError>> {
        Box::pin(async move { Ok(listing::list(self.state_dir.as_deref())) })
    }

    fn prune<'a>(&'a self, rule: &'a PruneRule) -> BoxFuture<'a, Result<Vec<Pruned>, StoreError>> {
        Box::pin(async move {
            Ok(listing::prune(
                self.state_dir.as_deref(),
                rule,
                std::time::SystemTime::now(),
            ))
        })
    }

    fn put_eval<'a>(
        &'a self,
        id: &'a str,
        _started: &'a str,
        record: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let dir = self.evals_dir();
            crate::ids::checked(id)?;
            std::fs::create_dir_all(&dir).map_err(|e| StoreError::Io(dir.clone(), e))?;
            let bytes = serde_json::to_vec_pretty(record)
                .map_err(|e| StoreError::Invalid(format!("eval {id}: {e}")))?;
            fs::write_durable(&dir.join(format!("{id}.json")), &bytes)
        })
    }

    fn eval<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<serde_json::Value, StoreError>> {
        Box::pin(async move {
            crate::ids::checked(id)?;
            let path = self.evals_dir().join(format!("{id}.json"));
            let text = fs::read_to_string(&path).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    StoreError::NoRun(format!("no eval `{id}` in {}", self.evals_dir().display()))
                }
                _ => StoreError::Io(path.clone(), e),
            })?;
            serde_json::from_str(&text).map_err(|e| StoreError::Invalid(format!("eval {id}: {e}")))
        })
    }

    fn evals<'a>(&'a self) -> BoxFuture<'a, Result<Vec<serde_json::Value>, StoreError>> {
        Box::pin(async move {
            let mut ids: Vec<String> = std::fs::read_dir(self.evals_dir())
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| {
                            let name = e.file_name().into_string().ok()?;
                            let id = name.strip_suffix(".json")?;
                            crate::ids::is_run_id(id).then(|| id.to_string())
                        })
                        .collect()
                })
                .unwrap_or_default();
            ids.sort();
            let mut out = Vec::new();
            for id in ids {
                out.push(self.eval(&id).await?);
            }
            Ok(out)
        })
    }

    fn details<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<serde_json::Map<String, serde_json::Value>, StoreError>> {
        Box::pin(async move {
            let dir = self.open(id)?;
            let mut details = serde_json::Map::new();
            details.insert("path".into(), dir.path.display().to_string().into());
            Ok(details)
        })
    }

    fn views(&self, id: &str) -> Result<PathBuf, StoreError> {
        match self.open(id) {
            Ok(d) => Ok(d.path),
            Err(_) => {
                Ok(RunDir::runs_root(self.state_dir.as_deref()).join(crate::ids::checked(id)?))
            }
        }
    }

    fn views_in_run(&self) -> bool {
        true
    }
}

impl HeldRun for FileHeld {
    fn id(&self) -> &str {
        &self.dir.id
    }

    fn views(&self) -> &Path {
        &self.dir.path
    }

    fn journal(&mut self) -> Result<Box<dyn JournalSink>, StoreError> {
        let mut journal = journal::Journal::open(&self.dir.journal_path(), &self.contents)
            .map_err(|e| self.invalid(e))?;
        journal.sync_first(std::mem::take(&mut self.first));
        Ok(Box::new(FileSink {
            journal,
            run: self.dir.id.clone(),
        }))
    }

    fn write_record<'a>(&'a self, record: &'a RunRecord) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.dir.write_record(record) })
    }

    fn stage_record<'a>(&'a self, record: &'a RunRecord) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.dir.stage_record(record) })
    }

    fn rewrite_journal<'a>(
        &'a mut self,
        keep: &'a [&'a Reply],
    ) -> BoxFuture<'a, Result<Seal, StoreError>> {
        Box::pin(async move {
            let seed = journal::seed(&self.dir.id);
            self.contents = journal::rewrite(&self.dir.journal_path(), seed, keep)
                .map_err(|e| self.invalid(e))?;
            Ok(self.contents.seal())
        })
    }

    fn replace_program<'a>(
        &'a self,
        program: &'a Program,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            fs::write_durable(&self.dir.path.join("artifact.pbc"), &program.bytes)?;
            fs::write_durable(
                &self.dir.path.join("program.prose"),
                program.artifact.modules[0].source.as_bytes(),
            )
        })
    }

    fn release(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        // The lock goes when the hold is dropped.
        Box::pin(async { Ok(()) })
    }
}

/// The run's journal, checked against its record as `check` says. When forced, what is
/// accepted becomes the record's seal.
fn checked_journal(
    dir: &RunDir,
    record: &mut RunRecord,
    check: JournalCheck,
) -> Result<Contents, StoreError> {
    let path = dir.journal_path();
    let seed = journal::seed(&record.id);
    let refused = |e: journal::JournalError| {
        StoreError::Invalid(format!(
            "run {}: {e}; refusing to resume (`prosevm resume --force` goes on with what the journal holds)",
            dir.id
        ))
    };
    let corrupted = |e: journal::JournalError| StoreError::Invalid(format!("run {}: {e}", dir.id));
    match check {
        JournalCheck::Strict => {
            let contents = journal::read(&path, seed).map_err(|e| match e {
                journal::JournalError::Missing => refused(e),
                e => corrupted(e),
            })?;
            contents.check_seal(&record.journal).map_err(refused)?;
            contents.check_repeats().map_err(refused)?;
            Ok(contents)
        }
        JournalCheck::Force => {
            let contents = match journal::read(&path, seed) {
                Err(journal::JournalError::Missing) => Contents::empty(seed),
                read => read.map_err(corrupted)?,
            };
            let contents = match contents.check_repeats() {
                Ok(()) => contents,
                Err(_) => journal::rewrite(&path, seed, &contents.kept()).map_err(corrupted)?,
            };
            record.journal = contents.seal();
            Ok(contents)
        }
    }
}
