-- Runs may wait for a person's input (prosevm's SQLite store, migration 3): `waiting` joins
-- the statuses a run can have. SQLite cannot change a CHECK constraint, so the table is made
-- anew and its rows copied (foreign keys are not enforced while migrations run, so the
-- journal's rows stay, pointing at the new table by its name).
CREATE TABLE prose_runs_new (
    id              TEXT PRIMARY KEY,
    program         TEXT NOT NULL,
    artifact_sha256 TEXT NOT NULL REFERENCES prose_artifacts (sha256),
    status          TEXT NOT NULL CHECK (status IN
                        ('running', 'interrupted', 'paused', 'waiting', 'finished', 'failed')),
    record          TEXT NOT NULL,
    started         TEXT NOT NULL,
    epoch           INTEGER NOT NULL DEFAULT 0,
    holder_host     TEXT,
    holder_pid      INTEGER,
    holder_start    INTEGER
);
INSERT INTO prose_runs_new
    SELECT id, program, artifact_sha256, status, record, started, epoch, holder_host,
           holder_pid, holder_start
      FROM prose_runs;
DROP TABLE prose_runs;
ALTER TABLE prose_runs_new RENAME TO prose_runs;
