//! The file store's webhooks: in each run's directory, `webhooks/hook.json` (its hook, and
//! whether it is settled) and `webhooks/dlv_….json` (one file per delivery), each written
//! whole and synced. Pruning a run removes its directory, and them with it.

use super::RunDir;
use crate::webhooks::{self, Delivery, DeliveryState, Hook, Webhooks};
use crate::{fs, BoxFuture, StoreError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The hooks and deliveries of the runs under a state directory.
pub struct FileWebhooks {
    pub(super) state_dir: Option<PathBuf>,
}

/// A hook as `hook.json` holds it.
#[derive(Serialize, Deserialize)]
struct HookFile {
    #[serde(flatten)]
    hook: Hook,
    settled: bool,
}

/// The directory of run `id`'s webhooks (the run must exist).
fn dir_of(state_dir: Option<&Path>, id: &str) -> Result<PathBuf, StoreError> {
    crate::ids::checked(id)?;
    Ok(RunDir::open(state_dir, id)?.path.join("webhooks"))
}

fn read_hook(dir: &Path) -> Result<Option<HookFile>, StoreError> {
    let path = dir.join("hook.json");
    match fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| StoreError::Invalid(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::Io(path, e)),
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec_pretty(value)
        .map_err(|e| StoreError::Invalid(format!("{}: {e}", path.display())))?;
    fs::write_durable(path, &bytes)
}

/// The deliveries in `dir` (a run's webhooks directory), oldest first.
fn deliveries_in(dir: &Path, run: &str) -> Result<Vec<Delivery>, StoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::Io(dir.to_path_buf(), e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".json") else {
            continue;
        };
        if !webhooks::is_delivery_id(id) {
            continue;
        }
        let text =
            fs::read_to_string(&entry.path()).map_err(|e| StoreError::Io(entry.path(), e))?;
        out.push(webhooks::read(id, run, &text)?);
    }
    out.sort_by(|a, b| (&a.created, &a.id).cmp(&(&b.created, &b.id)));
    Ok(out)
}

impl Webhooks for FileWebhooks {
    fn put_hook<'a>(
        &'a self,
        id: &'a str,
        hook: &'a Hook,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let dir = dir_of(self.state_dir.as_deref(), id)?;
            fs::ensure_dir(&dir)?;
            let file = HookFile {
                hook: hook.clone(),
                settled: false,
            };
            write_json(&dir.join("hook.json"), &file)
        })
    }

    fn hook<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Hook>, StoreError>> {
        Box::pin(async move {
            let dir = dir_of(self.state_dir.as_deref(), id)?;
            Ok(read_hook(&dir)?.map(|f| f.hook))
        })
    }

    fn unsettled<'a>(
        &'a self,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, Hook)>, StoreError>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for run in RunDir::list(self.state_dir.as_deref()) {
                if !crate::ids::is_run_id(&run.id) {
                    continue;
                }
                if let Some(f) = read_hook(&run.path.join("webhooks"))? {
                    if !f.settled && f.hook.owner == owner {
                        out.push((run.id, f.hook));
                    }
                }
            }
            Ok(out)
        })
    }

    fn settle<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let dir = dir_of(self.state_dir.as_deref(), id)?;
            match read_hook(&dir)? {
                Some(mut f) if !f.settled => {
                    f.settled = true;
                    write_json(&dir.join("hook.json"), &f)
                }
                _ => Ok(()),
            }
        })
    }

    fn add<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            webhooks::checked(delivery)?;
            let dir = dir_of(self.state_dir.as_deref(), &delivery.run)?;
            fs::ensure_dir(&dir)?;
            let path = dir.join(format!("{}.json", delivery.id));
            if std::fs::symlink_metadata(&path).is_ok() {
                return Ok(false);
            }
            write_json(&path, delivery)?;
            Ok(true)
        })
    }

    fn update<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            webhooks::checked(delivery)?;
            let dir = dir_of(self.state_dir.as_deref(), &delivery.run)?;
            let path = dir.join(format!("{}.json", delivery.id));
            if std::fs::symlink_metadata(&path).is_err() {
                return Err(StoreError::NoRun(format!(
                    "no delivery {} of run {}",
                    delivery.id, delivery.run
                )));
            }
            write_json(&path, delivery)
        })
    }

    fn pending<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<Delivery>, StoreError>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for run in RunDir::list(self.state_dir.as_deref()) {
                if !crate::ids::is_run_id(&run.id) {
                    continue;
                }
                out.extend(
                    deliveries_in(&run.path.join("webhooks"), &run.id)?
                        .into_iter()
                        .filter(|d| d.state == DeliveryState::Pending && d.owner == owner),
                );
            }
            out.sort_by(|a, b| (&a.created, &a.id).cmp(&(&b.created, &b.id)));
            Ok(out)
        })
    }

    fn of_run<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<Delivery>, StoreError>> {
        Box::pin(async move {
            let dir = dir_of(self.state_dir.as_deref(), id)?;
            deliveries_in(&dir, id)
        })
    }
}
