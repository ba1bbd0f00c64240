//! How a command names a run: its id (or, in the file store, its directory), a prefix of
//! its id that no other run shares, or `latest` (the run that started last; also what a
//! command that takes no run names).

use crate::{Store, StoreError};

/// The word that names the run that started last.
pub const LATEST: &str = "latest";

/// The run `given` names in `store` (see the module's documentation); none names the latest.
pub async fn resolve(store: &dyn Store, given: Option<&str>) -> Result<String, StoreError> {
    let given = match given {
        None | Some(LATEST) => return latest(store).await,
        Some(g) => g,
    };
    let missing = match store.record(given).await {
        Ok(_) => return Ok(given.to_string()),
        Err(e @ StoreError::NoRun(_)) => e,
        Err(e) => return Err(e),
    };
    let rows = store.list().await?;
    let mut named = rows.iter().filter(|r| r.id.starts_with(given));
    match (named.next(), named.next()) {
        (Some(one), None) if !given.is_empty() => Ok(one.id.clone()),
        (Some(a), Some(b)) => {
            let more = rows.iter().filter(|r| r.id.starts_with(given)).count() - 2;
            Err(StoreError::NoRun(format!(
                "`{given}` begins more than one run's id ({}, {}{}): give more of it",
                a.id,
                b.id,
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )))
        }
        _ => Err(missing),
    }
}

/// The id of the run that started last (ids sort by start time).
async fn latest(store: &dyn Store) -> Result<String, StoreError> {
    let rows = store.list().await?;
    rows.iter().map(|r| &r.id).max().cloned().ok_or_else(|| {
        StoreError::NoRun(format!(
            "the {} store at {} holds no runs",
            store.kind(),
            store.location()
        ))
    })
}
