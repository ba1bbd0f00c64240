-- Evals kept beside the runs (prosevm's SQLite store, migration 4): each one's record, a
-- JSON document `prosevm eval` writes as its rows are scored, by the eval's id.
CREATE TABLE prose_evals (
    id      TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    record  TEXT NOT NULL
);
