-- Webhooks (prosevm's Postgres store, migration 5): the URL a run started by `prosevm serve`
-- names to be told how it ended, and each delivery made to it, its record a JSON document
-- (its body, tries and outcome). Both go with their run when it is removed.
CREATE TABLE prose_webhooks (
    run_id  text PRIMARY KEY REFERENCES prose_runs (id) ON DELETE CASCADE,
    url     text NOT NULL,
    owner   text NOT NULL,
    settled boolean NOT NULL DEFAULT false
);
CREATE TABLE prose_webhook_deliveries (
    id      text PRIMARY KEY,
    run_id  text NOT NULL REFERENCES prose_runs (id) ON DELETE CASCADE,
    owner   text NOT NULL,
    state   text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    created text NOT NULL,
    record  jsonb NOT NULL
);
CREATE INDEX prose_webhook_deliveries_run ON prose_webhook_deliveries (run_id, created);
CREATE INDEX prose_webhook_deliveries_pending ON prose_webhook_deliveries (owner, created)
    WHERE state = 'pending';
