//! The SQLite store's webhooks: the tables `prose_webhooks` (a run's hook) and
//! `prose_webhook_deliveries` (each delivery, its record as JSON).

use super::{lock, sql, Shared};
use crate::webhooks::{self, Delivery, Hook, Webhooks};
use crate::{BoxFuture, StoreError};
use rusqlite::{params, OptionalExtension};

/// The webhooks in a SQLite store's database.
pub struct SqliteWebhooks {
    pub(super) conn: Shared,
}

impl SqliteWebhooks {
    /// The deliveries `query` selects (`run_id, id, record`) with `param`.
    fn deliveries(&self, query: &str, param: &str) -> Result<Vec<Delivery>, StoreError> {
        let conn = lock(&self.conn);
        let mut stmt = conn.prepare(query).map_err(sql)?;
        let rows = stmt
            .query_map(params![param], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(sql)?;
        let mut out = Vec::new();
        for row in rows {
            let (run, id, text) = row.map_err(sql)?;
            out.push(webhooks::read(&id, &run, &text)?);
        }
        Ok(out)
    }
}

/// A delivery's record as the table keeps it.
fn record(delivery: &Delivery) -> Result<String, StoreError> {
    serde_json::to_string(webhooks::checked(delivery)?)
        .map_err(|e| StoreError::Invalid(format!("delivery {}: {e}", delivery.id)))
}

impl Webhooks for SqliteWebhooks {
    fn put_hook<'a>(
        &'a self,
        id: &'a str,
        hook: &'a Hook,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            crate::ids::checked(id)?;
            lock(&self.conn)
                .execute(
                    "INSERT INTO prose_webhooks (run_id, url, owner) VALUES (?1, ?2, ?3)
                     ON CONFLICT (run_id) DO UPDATE
                         SET url = excluded.url, owner = excluded.owner, settled = 0",
                    params![id, hook.url, hook.owner],
                )
                .map_err(sql)?;
            Ok(())
        })
    }

    fn hook<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Hook>, StoreError>> {
        Box::pin(async move {
            crate::ids::checked(id)?;
            lock(&self.conn)
                .query_row(
                    "SELECT url, owner FROM prose_webhooks WHERE run_id = ?1",
                    params![id],
                    |r| {
                        Ok(Hook {
                            url: r.get(0)?,
                            owner: r.get(1)?,
                        })
                    },
                )
                .optional()
                .map_err(sql)
        })
    }

    fn unsettled<'a>(
        &'a self,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, Hook)>, StoreError>> {
        Box::pin(async move {
            let conn = lock(&self.conn);
            let mut stmt = conn
                .prepare(
                    "SELECT run_id, url, owner FROM prose_webhooks
                      WHERE owner = ?1 AND settled = 0 ORDER BY run_id",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map(params![owner], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        Hook {
                            url: r.get(1)?,
                            owner: r.get(2)?,
                        },
                    ))
                })
                .map_err(sql)?;
            let mut out = Vec::new();
            for row in rows {
                let (id, hook) = row.map_err(sql)?;
                if crate::ids::is_run_id(&id) {
                    out.push((id, hook));
                }
            }
            Ok(out)
        })
    }

    fn settle<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            lock(&self.conn)
                .execute(
                    "UPDATE prose_webhooks SET settled = 1 WHERE run_id = ?1",
                    params![id],
                )
                .map_err(sql)?;
            Ok(())
        })
    }

    fn add<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let text = record(delivery)?;
            let added = lock(&self.conn)
                .execute(
                    "INSERT INTO prose_webhook_deliveries (id, run_id, owner, state, created, record)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO NOTHING",
                    params![
                        delivery.id,
                        delivery.run,
                        delivery.owner,
                        delivery.state.as_str(),
                        delivery.created,
                        text
                    ],
                )
                .map_err(sql)?;
            Ok(added == 1)
        })
    }

    fn update<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let text = record(delivery)?;
            let changed = lock(&self.conn)
                .execute(
                    "UPDATE prose_webhook_deliveries SET state = ?2, record = ?3 WHERE id = ?1",
                    params![delivery.id, delivery.state.as_str(), text],
                )
                .map_err(sql)?;
            if changed == 0 {
                return Err(StoreError::NoRun(format!(
                    "no delivery {} in the SQLite store",
                    delivery.id
                )));
            }
            Ok(())
        })
    }

    fn pending<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<Delivery>, StoreError>> {
        Box::pin(async move {
            self.deliveries(
                "SELECT run_id, id, record FROM prose_webhook_deliveries
                  WHERE owner = ?1 AND state = 'pending' ORDER BY created, id",
                owner,
            )
        })
    }

    fn of_run<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<Delivery>, StoreError>> {
        Box::pin(async move {
            crate::ids::checked(id)?;
            self.deliveries(
                "SELECT run_id, id, record FROM prose_webhook_deliveries
                  WHERE run_id = ?1 ORDER BY created, id",
                id,
            )
        })
    }
}
