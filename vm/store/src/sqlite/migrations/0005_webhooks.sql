-- Webhooks (prosevm's SQLite store, migration 5): the URL a run started by `prosevm serve`
-- names to be told how it ended, and each delivery made to it, its record a JSON document
-- (its body, tries and outcome). Both go with their run when it is removed.
CREATE TABLE prose_webhooks (
    run_id  TEXT PRIMARY KEY REFERENCES prose_runs (id) ON DELETE CASCADE,
    url     TEXT NOT NULL,
    owner   TEXT NOT NULL,
    settled INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE prose_webhook_deliveries (
    id      TEXT PRIMARY KEY,
    run_id  TEXT NOT NULL REFERENCES prose_runs (id) ON DELETE CASCADE,
    owner   TEXT NOT NULL,
    state   TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    created TEXT NOT NULL,
    record  TEXT NOT NULL
);
CREATE INDEX prose_webhook_deliveries_run ON prose_webhook_deliveries (run_id, created);
CREATE INDEX prose_webhook_deliveries_pending ON prose_webhook_deliveries (owner, created)
    WHERE state = 'pending';
