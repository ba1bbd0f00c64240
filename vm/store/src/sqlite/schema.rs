//! The SQLite store's schema: migrations as SQL files embedded in the binary, applied in
//! order inside one write transaction by whichever process opens the database first; the
//! version applied is the database's `user_version`.

use super::sql;
use crate::StoreError;
use rusqlite::{Connection, TransactionBehavior};

/// The migrations, in order: migration `n` is at index `n - 1`.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_runs.sql"),
    include_str!("migrations/0002_memo.sql"),
];

/// Applies the migrations the database lacks; refuses a database newer than this build.
pub fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    let version: usize = tx
        .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .map_err(sql)
        .map(|v| usize::try_from(v).unwrap_or(0))?;
    if version > MIGRATIONS.len() {
        return Err(StoreError::Sqlite(format!(
            "the database has migration {version}, newer than this prosevm knows ({}); use a newer prosevm",
            MIGRATIONS.len()
        )));
    }
    for (i, migration) in MIGRATIONS.iter().enumerate().skip(version) {
        tx.execute_batch(migration)
            .map_err(|e| StoreError::Sqlite(format!("migration {}: {e}", i + 1)))?;
    }
    tx.pragma_update(None, "user_version", MIGRATIONS.len() as i64)
        .map_err(sql)?;
    tx.commit().map_err(sql)
}
