//! The Postgres store's memo: the `prose_memo` table, one row per answer by its key, shared
//! by every worker of the store.

use super::{describe, PgStore};
use crate::BoxFuture;
use prose_runtime::memo::{MemoKey, MemoSize, MemoStore};

/// The memo in a Postgres store's database.
pub struct PgMemo {
    pub(super) store: PgStore,
}

impl PgMemo {
    /// The count and bytes `sql` answers with (one row of two bigints).
    async fn counted(&self, sql: &str) -> Result<MemoSize, String> {
        let client = self.store.client().await.map_err(|e| e.to_string())?;
        let row = client.query_one(sql, &[]).await.map_err(|e| describe(&e))?;
        Ok(MemoSize {
            entries: row.get::<_, i64>(0).max(0) as u64,
            bytes: row.get::<_, i64>(1).max(0) as u64,
        })
    }
}

impl MemoStore for PgMemo {
    fn place(&self) -> String {
        "the table prose_memo of the Postgres store".into()
    }

    fn get<'a>(&'a self, key: &'a MemoKey) -> BoxFuture<'a, Result<Option<Vec<u8>>, String>> {
        Box::pin(async move {
            let client = self.store.client().await.map_err(|e| e.to_string())?;
            let row = client
                .query_opt("SELECT entry FROM prose_memo WHERE key = $1", &[&key.hex()])
                .await
                .map_err(|e| describe(&e))?;
            Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
        })
    }

    fn put<'a>(&'a self, key: &'a MemoKey, entry: Vec<u8>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let client = self.store.client().await.map_err(|e| e.to_string())?;
            client
                .execute(
                    "INSERT INTO prose_memo (key, entry) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET entry = excluded.entry",
                    &[&key.hex(), &entry],
                )
                .await
                .map(|_| ())
                .map_err(|e| describe(&e))
        })
    }

    fn size(&self) -> BoxFuture<'_, Result<MemoSize, String>> {
        Box::pin(
            self.counted(
                "SELECT count(*), coalesce(sum(length(entry)), 0)::bigint FROM prose_memo",
            ),
        )
    }

    fn clear(&self) -> BoxFuture<'_, Result<MemoSize, String>> {
        Box::pin(self.counted(
            "WITH gone AS (DELETE FROM prose_memo RETURNING length(entry) AS n)
             SELECT count(*), coalesce(sum(n), 0)::bigint FROM gone",
        ))
    }
}
