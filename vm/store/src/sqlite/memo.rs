//! The SQLite store's memo: the `prose_memo` table of the store's database, one row per
//! answer by its key.

use super::{lock, Shared};
use crate::BoxFuture;
use prose_runtime::memo::{MemoKey, MemoSize, MemoStore};
use rusqlite::{params, OptionalExtension};
use std::path::PathBuf;

/// The memo in a SQLite store's database.
pub struct SqliteMemo {
    pub(super) conn: Shared,
    pub(super) path: PathBuf,
}

impl SqliteMemo {
    fn size_now(&self) -> Result<MemoSize, String> {
        lock(&self.conn)
            .query_row(
                "SELECT count(*), coalesce(sum(length(entry)), 0) FROM prose_memo",
                [],
                |r| {
                    Ok(MemoSize {
                        entries: r.get::<_, i64>(0)?.max(0) as u64,
                        bytes: r.get::<_, i64>(1)?.max(0) as u64,
                    })
                },
            )
            .map_err(|e| e.to_string())
    }
}

impl MemoStore for SqliteMemo {
    fn place(&self) -> String {
        format!("the table prose_memo of {}", self.path.display())
    }

    fn get<'a>(&'a self, key: &'a MemoKey) -> BoxFuture<'a, Result<Option<Vec<u8>>, String>> {
        Box::pin(async move {
            lock(&self.conn)
                .query_row(
                    "SELECT entry FROM prose_memo WHERE key = ?1",
                    params![key.hex()],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| e.to_string())
        })
    }

    fn put<'a>(&'a self, key: &'a MemoKey, entry: Vec<u8>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            lock(&self.conn)
                .execute(
                    "INSERT INTO prose_memo (key, entry) VALUES (?1, ?2)
                     ON CONFLICT (key) DO UPDATE SET entry = excluded.entry",
                    params![key.hex(), entry],
                )
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }

    fn size(&self) -> BoxFuture<'_, Result<MemoSize, String>> {
        Box::pin(async move { self.size_now() })
    }

    fn clear(&self) -> BoxFuture<'_, Result<MemoSize, String>> {
        Box::pin(async move {
            let size = self.size_now()?;
            lock(&self.conn)
                .execute("DELETE FROM prose_memo", [])
                .map_err(|e| e.to_string())?;
            Ok(size)
        })
    }
}
