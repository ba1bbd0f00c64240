//! The file store: each run lives in `.prose/runs/{YYYYMMDD}-{HHMMSS}-{random6}/` with the
//! program's source, its artifact, `run.json` (what was run, with which inputs, and how it
//! ended), and the journal of every driver answer (`journal.log`, [`crate::journal`]).
//! Replaying the journal through the deterministic machine resumes an interrupted run
//! without asking anything twice. A run is held by a lock on its `lock` file, which the
//! kernel releases when the holder dies and which readers test without taking ([`lock`]).

mod listing;
mod lock;
mod memo;
mod sink;
mod store;
mod webhooks;

pub use lock::Lock;
pub use memo::FileMemo;
pub use sink::FileSink;
pub use store::FileStore;
pub use webhooks::FileWebhooks;

use crate::{fs, journal, StoreError};
use prose_runtime::record::RunRecord;
use std::path::{Path, PathBuf};

fn io<T>(path: &Path, r: std::io::Result<T>) -> Result<T, StoreError> {
    r.map_err(|e| StoreError::Io(path.to_path_buf(), e))
}

/// What the state directory holds so that git, and tools that walk a tree by git's rules
/// (`prosec check` and `prosec fmt`, linters, editors), leave the copies of programs kept
/// with each run alone: a `.gitignore` naming `runs/` (as `.pytest_cache` carries one), so
/// a project's agents' memory beside it can still be committed.
const STATE_GITIGNORE: &str = "# Written by prosevm: run records are not sources.\nruns/\n";

/// Gives the state directory `dir` its `.gitignore` ([`STATE_GITIGNORE`]) if it has none.
fn mark_runs_not_sources(dir: &Path) -> Result<(), StoreError> {
    let path = dir.join(".gitignore");
    match std::fs::symlink_metadata(&path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match fs::write_new(&path, STATE_GITIGNORE.as_bytes()) {
                Err(StoreError::Io(_, e)) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    Ok(())
                }
                r => r,
            }
        }
        Err(e) => Err(StoreError::Io(path, e)),
    }
}

/// A run directory.
pub struct RunDir {
    /// Its path.
    pub path: PathBuf,
    /// Its id (the directory name).
    pub id: String,
}

impl RunDir {
    /// The runs directory under `state_dir` (default: `.prose` in the working directory).
    pub fn runs_root(state_dir: Option<&Path>) -> PathBuf {
        state_dir
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".prose"))
            .join("runs")
    }

    /// Creates a new run directory with its program, artifact, `run.json` and an empty
    /// journal; gives `record` its id and start time. Nothing is synced yet, so a run starts
    /// without waiting for the disk: the journal's first sync makes these files durable
    /// first ([`RunDir::start_files`]), so no answer is durable before the run it belongs
    /// to.
    pub fn create(
        state_dir: Option<&Path>,
        record: &mut RunRecord,
        source: &str,
        artifact: &[u8],
        seeded: &[&prose_machine::protocol::Reply],
    ) -> Result<RunDir, StoreError> {
        let root = Self::runs_root(state_dir);
        io(&root, std::fs::create_dir_all(&root))?;
        if let Some(state_dir) = root.parent() {
            mark_runs_not_sources(state_dir)?;
        }
        // Built under a temporary name and renamed into place, so a run directory either
        // has all its files or does not exist (a crash in between leaves only a `.tmp-`).
        let (id, iso, tmp) = loop {
            let (id, iso) = crate::ids::new_run_id();
            let tmp = root.join(format!(".tmp-{id}"));
            if root.join(&id).exists() {
                continue;
            }
            match std::fs::create_dir(&tmp) {
                Ok(()) => break (id, iso, tmp),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::Io(tmp, e)),
            }
        };
        let staging = RunDir {
            path: tmp.clone(),
            id: id.clone(),
        };
        // Nobody sees the directory before its rename: its files are written in place.
        fs::write_new(&tmp.join("program.prose"), source.as_bytes())?;
        fs::write_new(&tmp.join("artifact.pbc"), artifact)?;
        // The journal exists from the start, so a missing one is never an empty run. A run
        // seeded with another's answers starts with them.
        let seed = journal::seed(&id);
        let invalid = |e: journal::JournalError| StoreError::Invalid(format!("run {id}: {e}"));
        let bytes = journal::encode(seed, seeded).map_err(invalid)?;
        fs::write_new(&staging.journal_path(), &bytes)?;
        record.id = id.clone();
        record.started = iso;
        record.journal = journal::parse(&bytes, seed).map_err(invalid)?.seal();
        fs::write_new(&staging.path.join("run.json"), &encode(record)?)?;
        let path = root.join(&id);
        io(&path, std::fs::rename(&tmp, &path))?;
        let dir = RunDir { path, id };
        Ok(dir)
    }

    /// Opens an existing run by id (under the runs root) or by path. A run directory that is
    /// a symbolic link, or whose `run.json` is one, is refused.
    pub fn open(state_dir: Option<&Path>, run: &str) -> Result<RunDir, StoreError> {
        let direct = PathBuf::from(run);
        let path = if direct.join("run.json").is_file() {
            direct
        } else {
            Self::runs_root(state_dir).join(run)
        };
        if !path.join("run.json").is_file() {
            return Err(StoreError::NoRun(format!(
                "no run `{run}` (looked in {})",
                path.display()
            )));
        }
        for p in [path.clone(), path.join("run.json")] {
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(StoreError::NoRun(format!(
                    "{} is a symbolic link; a run directory may not hold links",
                    p.display()
                )));
            }
        }
        let id = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(RunDir { path, id })
    }

    /// The run's `run.json`.
    pub fn record(&self) -> Result<RunRecord, StoreError> {
        let p = self.path.join("run.json");
        let text = io(&p, fs::read_to_string(&p))?;
        serde_json::from_str(&text)
            .map_err(|e| StoreError::Invalid(format!("{}: {e}", p.display())))
    }

    /// Rewrites `run.json` atomically and durably.
    pub fn write_record(&self, record: &RunRecord) -> Result<(), StoreError> {
        fs::write_durable(&self.path.join("run.json"), &encode(record)?)
    }

    /// Rewrites `run.json` atomically, not synced: a new run's record, made durable with
    /// its other [`RunDir::start_files`].
    pub fn stage_record(&self, record: &RunRecord) -> Result<(), StoreError> {
        fs::write_unsynced(&self.path.join("run.json"), &encode(record)?)
    }

    /// What a new run's journal syncs before its first answer is durable: what a resume
    /// needs (`run.json` and `artifact.pbc`; the journal's own data is synced with the
    /// answers), the run directory (the names in it) and the directory holding it.
    /// `program.prose` is a copy for people and is left to the file system.
    pub fn start_files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.path.join("run.json"), self.path.join("artifact.pbc")];
        files.push(self.path.clone());
        files.extend(self.path.parent().map(Path::to_path_buf));
        files
    }

    /// The journal's path.
    pub fn journal_path(&self) -> PathBuf {
        self.path.join("journal.log")
    }

    /// Reads the journal of the run `record` describes, without writing anything (a torn
    /// tail is skipped, not cut).
    pub fn read_journal(
        &self,
        record: &RunRecord,
    ) -> Result<journal::Contents, journal::JournalError> {
        journal::read(&self.journal_path(), journal::seed(&record.id))
    }

    /// Takes the run for this process ([`lock::take`]): refused while another process holds
    /// it, naming that process. Once held, the run directory is checked for symbolic links
    /// (refused anywhere in it), since the holder is about to write there.
    pub fn lock(&self) -> Result<Lock, StoreError> {
        let lock = lock::take(&self.path.join("lock"), &self.id)?;
        fs::refuse_links(&self.path)?;
        Ok(lock)
    }

    /// Whether a process holds the run now, found without taking it.
    pub fn held(&self) -> bool {
        lock::held(&self.path.join("lock"))
    }

    /// Every run under the runs root, oldest first.
    pub fn list(state_dir: Option<&Path>) -> Vec<RunDir> {
        let root = Self::runs_root(state_dir);
        let mut runs: Vec<RunDir> = std::fs::read_dir(&root)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                    .filter(|e| e.path().join("run.json").is_file())
                    .map(|e| RunDir {
                        id: e.file_name().to_string_lossy().into_owned(),
                        path: e.path(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        runs.sort_by(|a, b| a.id.cmp(&b.id));
        runs
    }
}

/// `record` as `run.json` holds it.
fn encode(record: &RunRecord) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec_pretty(record)
        .map_err(|e| StoreError::Invalid(format!("cannot encode the run record: {e}")))
}
