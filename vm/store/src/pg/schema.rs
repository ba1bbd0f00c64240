//! The store's schema: migrations as SQL files embedded in the binary, applied in order by
//! whichever process connects first. Each is applied once, in its own transaction, under an
//! advisory lock, so workers starting together do not race; the versions applied are kept in
//! `prose_migrations`.

use super::{describe, PgError, PgStore};

/// The migrations, by version, in order.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "runs, artifacts and journals",
        include_str!("migrations/0001_runs.sql"),
    ),
    (
        2,
        "the memo of model answers",
        include_str!("migrations/0002_memo.sql"),
    ),
    (
        3,
        "runs waiting for input",
        include_str!("migrations/0003_waiting.sql"),
    ),
    (4, "evals", include_str!("migrations/0004_evals.sql")),
    (5, "webhooks", include_str!("migrations/0005_webhooks.sql")),
];

/// The advisory lock key migrations are applied under ("prose" in ASCII).
const LOCK: i64 = 0x70_72_6f_73_65;

/// Applies the migrations `store` lacks. A database whose schema is newer than this binary
/// knows is refused.
pub async fn migrate(store: &PgStore) -> Result<(), PgError> {
    let fail = |e: tokio_postgres::Error| PgError::Migrate(describe(&e));
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(fail)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK])
        .await
        .map_err(fail)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS prose_migrations (
             version integer PRIMARY KEY,
             name    text NOT NULL,
             applied timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(fail)?;
    let applied: Vec<i32> = tx
        .query("SELECT version FROM prose_migrations ORDER BY version", &[])
        .await
        .map_err(fail)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let known = MIGRATIONS.last().map_or(0, |m| m.0);
    if let Some(newer) = applied.iter().find(|v| **v > known) {
        return Err(PgError::Migrate(format!(
            "the database has migration {newer}, newer than this prosevm knows ({known}); use a newer prosevm"
        )));
    }
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tx.batch_execute(sql).await.map_err(|e| {
            PgError::Migrate(format!("migration {version} ({name}): {}", describe(&e)))
        })?;
        tx.execute(
            "INSERT INTO prose_migrations (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .await
        .map_err(fail)?;
    }
    tx.commit().await.map_err(fail)
}
