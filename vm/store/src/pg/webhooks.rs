//! The Postgres store's webhooks: the tables `prose_webhooks` (a run's hook) and
//! `prose_webhook_deliveries` (each delivery, its record as JSON).

use super::{query, PgStore};
use crate::webhooks::{self, Delivery, Hook, Webhooks};
use crate::{BoxFuture, StoreError};

/// The webhooks in a Postgres store's database.
pub struct PgWebhooks {
    pub(super) store: PgStore,
}

impl PgWebhooks {
    /// The deliveries `sql` selects (`run_id, id, record::text`) with `param`.
    async fn deliveries(&self, sql: &str, param: &str) -> Result<Vec<Delivery>, StoreError> {
        let client = self.store.client().await?;
        let rows = client.query(sql, &[&param]).await.map_err(query)?;
        rows.iter()
            .map(|r| {
                let (run, id, text): (String, String, String) = (r.get(0), r.get(1), r.get(2));
                webhooks::read(&id, &run, &text)
            })
            .collect()
    }
}

/// A delivery's record as the table keeps it.
fn record(delivery: &Delivery) -> Result<String, StoreError> {
    serde_json::to_string(webhooks::checked(delivery)?)
        .map_err(|e| StoreError::Invalid(format!("delivery {}: {e}", delivery.id)))
}

impl Webhooks for PgWebhooks {
    fn put_hook<'a>(
        &'a self,
        id: &'a str,
        hook: &'a Hook,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            crate::ids::checked(id)?;
            let client = self.store.client().await?;
            client
                .execute(
                    "INSERT INTO prose_webhooks (run_id, url, owner) VALUES ($1, $2, $3)
                     ON CONFLICT (run_id) DO UPDATE
                         SET url = excluded.url, owner = excluded.owner, settled = false",
                    &[&id, &hook.url, &hook.owner],
                )
                .await
                .map_err(query)?;
            Ok(())
        })
    }

    fn hook<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Hook>, StoreError>> {
        Box::pin(async move {
            crate::ids::checked(id)?;
            let client = self.store.client().await?;
            let row = client
                .query_opt(
                    "SELECT url, owner FROM prose_webhooks WHERE run_id = $1",
                    &[&id],
                )
                .await
                .map_err(query)?;
            Ok(row.map(|r| Hook {
                url: r.get(0),
                owner: r.get(1),
            }))
        })
    }

    fn unsettled<'a>(
        &'a self,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, Hook)>, StoreError>> {
        Box::pin(async move {
            let client = self.store.client().await?;
            let rows = client
                .query(
                    "SELECT run_id, url, owner FROM prose_webhooks
                      WHERE owner = $1 AND NOT settled ORDER BY run_id",
                    &[&owner],
                )
                .await
                .map_err(query)?;
            Ok(rows
                .iter()
                .map(|r| {
                    (
                        r.get::<_, String>(0),
                        Hook {
                            url: r.get(1),
                            owner: r.get(2),
                        },
                    )
                })
                .filter(|(id, _)| crate::ids::is_run_id(id))
                .collect())
        })
    }

    fn settle<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let client = self.store.client().await?;
            client
                .execute(
                    "UPDATE prose_webhooks SET settled = true WHERE run_id = $1",
                    &[&id],
                )
                .await
                .map_err(query)?;
            Ok(())
        })
    }

    fn add<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let text = record(delivery)?;
            let client = self.store.client().await?;
            let added = client
                .execute(
                    "INSERT INTO prose_webhook_deliveries (id, run_id, owner, state, created, record)
                     VALUES ($1, $2, $3, $4, $5, $6::text::jsonb) ON CONFLICT (id) DO NOTHING",
                    &[
                        &delivery.id,
                        &delivery.run,
                        &delivery.owner,
                        &delivery.state.as_str(),
                        &delivery.created,
                        &text,
                    ],
                )
                .await
                .map_err(query)?;
            Ok(added == 1)
        })
    }

    fn update<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let text = record(delivery)?;
            let client = self.store.client().await?;
            let changed = client
                .execute(
                    "UPDATE prose_webhook_deliveries SET state = $2, record = $3::text::jsonb
                      WHERE id = $1",
                    &[&delivery.id, &delivery.state.as_str(), &text],
                )
                .await
                .map_err(query)?;
            if changed == 0 {
                return Err(StoreError::NoRun(format!(
                    "no delivery {} in the Postgres store",
                    delivery.id
                )));
            }
            Ok(())
        })
    }

    fn pending<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<Delivery>, StoreError>> {
        Box::pin(async move {
            self.deliveries(
                "SELECT run_id, id, record::text FROM prose_webhook_deliveries
                  WHERE owner = $1 AND state = 'pending' ORDER BY created, id",
                owner,
            )
            .await
        })
    }

    fn of_run<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<Delivery>, StoreError>> {
        Box::pin(async move {
            crate::ids::checked(id)?;
            self.deliveries(
                "SELECT run_id, id, record::text FROM prose_webhook_deliveries
                  WHERE run_id = $1 ORDER BY created, id",
                id,
            )
            .await
        })
    }
}
