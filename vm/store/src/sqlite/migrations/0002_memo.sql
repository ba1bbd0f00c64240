-- The memo: model answers kept across runs, by the key of the request (prosevm's SQLite
-- store, migration 2). `entry` is the answer as the runtime encodes it, with its key and
-- a checksum of its own.
CREATE TABLE prose_memo (
    key     TEXT PRIMARY KEY,
    entry   BLOB NOT NULL,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
) WITHOUT ROWID;
