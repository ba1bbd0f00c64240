-- Evals kept beside the runs (prosevm's Postgres store, migration 4): each one's record, a
-- JSON document `prosevm eval` writes as its rows are scored, by the eval's id.
CREATE TABLE prose_evals (
    id      text PRIMARY KEY,
    started text NOT NULL,
    record  jsonb NOT NULL
);
