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
    include_str!("migrations/0003_waiting.sql"),
    include_str!("migrations/0004_evals.sql"),
    include_str!("migrations/0005_webhooks.sql"),
];

/// Applies the migrations the database lacks; refuses a database newer than this build.
/// Foreign keys must not be enforced on `conn` yet: a migration may make a table anew.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A database made by the first migration keeps its runs and journals when the store
    /// opens it and applies the second, which lets a run wait.
    #[test]
    fn runs_and_journals_survive_the_migration_that_adds_waiting() {
        let dir = std::env::temp_dir().join(format!("prose-sqlite-migrate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("runs.db");
        {
            let conn = Connection::open(&path).expect("open");
            conn.pragma_update(None, "foreign_keys", "ON").expect("fk");
            conn.execute_batch(MIGRATIONS[0]).expect("migration 1");
            conn.pragma_update(None, "user_version", 1)
                .expect("version");
            conn.execute_batch(
                "INSERT INTO prose_artifacts VALUES ('abc', x'00', 'p.prose');
                 INSERT INTO prose_runs (id, program, artifact_sha256, status, record, started)
                      VALUES ('r1', 'p', 'abc', 'interrupted', '{}', '2025-01-01T00:00:00Z');
                 INSERT INTO prose_journal VALUES ('r1', 0, '0:0', 1, '{}');",
            )
            .expect("rows");
            assert!(conn
                .execute("UPDATE prose_runs SET status = 'waiting'", [])
                .is_err());
        }
        super::super::SqliteStore::open(&path, dir.join("views")).expect("the store opens");
        let conn = Connection::open(&path).expect("open");
        conn.pragma_update(None, "foreign_keys", "ON").expect("fk");
        let count = |table: &str| -> i64 {
            conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .expect("count")
        };
        assert_eq!((count("prose_runs"), count("prose_journal")), (1, 1));
        conn.execute("UPDATE prose_runs SET status = 'waiting'", [])
            .expect("waiting is a status now");
        let broken: Option<String> = conn
            .query_row("PRAGMA foreign_key_check", [], |r| r.get(0))
            .ok();
        assert_eq!(broken, None, "a journal row lost its run");
        // Journal rows still belong to their run: removing it removes them.
        conn.execute("DELETE FROM prose_runs WHERE id = 'r1'", [])
            .expect("delete");
        assert_eq!(count("prose_journal"), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
