-- Runs, their artifacts and their journals (prosevm's SQLite store, migration 1).

-- Artifacts by content: many runs of one program share one row.
CREATE TABLE prose_artifacts (
    sha256 TEXT PRIMARY KEY,
    bytes  BLOB NOT NULL,
    source TEXT NOT NULL
);

-- One row per run. `record` is the run record as JSON; `status` mirrors its status. The
-- holder is the process running it (host, pid, start time); `epoch` counts takes, and every
-- write names the epoch it took, so a process that lost the run can write nothing.
CREATE TABLE prose_runs (
    id              TEXT PRIMARY KEY,
    program         TEXT NOT NULL,
    artifact_sha256 TEXT NOT NULL REFERENCES prose_artifacts (sha256),
    status          TEXT NOT NULL CHECK (status IN
                        ('running', 'interrupted', 'paused', 'finished', 'failed')),
    record          TEXT NOT NULL,
    started         TEXT NOT NULL,
    epoch           INTEGER NOT NULL DEFAULT 0,
    holder_host     TEXT,
    holder_pid      INTEGER,
    holder_start    INTEGER
);

-- The journal: append-only, one row per reply, in the order the run recorded them.
CREATE TABLE prose_journal (
    run_id     TEXT NOT NULL REFERENCES prose_runs (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    request_id TEXT NOT NULL,
    answered   INTEGER NOT NULL,
    reply      TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- A request's answer is recorded once (a failure may be followed by another attempt).
CREATE UNIQUE INDEX prose_journal_one_answer ON prose_journal (run_id, request_id)
    WHERE answered;
