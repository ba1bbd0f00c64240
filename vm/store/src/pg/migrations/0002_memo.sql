-- The memo: model answers kept across runs, by the key of the request (prosevm's Postgres
-- store, migration 2). `entry` is the answer as the runtime encodes it, with its key and
-- a checksum of its own.
CREATE TABLE prose_memo (
    key     text PRIMARY KEY,
    entry   bytea NOT NULL,
    created timestamptz NOT NULL DEFAULT now()
);
