-- Runs, their artifacts and their journals (prosevm's Postgres store, migration 1).

-- Artifacts by content: many runs of one program share one row.
CREATE TABLE prose_artifacts (
    sha256  text PRIMARY KEY,
    bytes   bytea NOT NULL,
    source  text NOT NULL,
    created timestamptz NOT NULL DEFAULT now()
);

-- One row per run. `record` is the run record (inputs, driver settings without keys,
-- options, outputs, error) as JSON; `status` is where the run is, `queued` included.
-- `epoch` is the fencing token: every claim increments it, and every write a worker makes
-- names the epoch it claimed, so a worker that lost its lease can write nothing.
CREATE TABLE prose_runs (
    id              text PRIMARY KEY,
    program         text NOT NULL,
    artifact_sha256 text NOT NULL REFERENCES prose_artifacts (sha256),
    status          text NOT NULL CHECK (status IN
                        ('queued', 'running', 'interrupted', 'paused', 'finished', 'failed')),
    record          json NOT NULL,
    outputs         json,
    epoch           bigint NOT NULL DEFAULT 0,
    owner           text,
    lease_until     timestamptz,
    submitted       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated         timestamptz NOT NULL DEFAULT now()
);

-- What a worker looks through when it claims: queued runs, and running ones whose lease
-- may have expired.
CREATE INDEX prose_runs_claimable ON prose_runs (submitted, id)
    WHERE status IN ('queued', 'running');

-- The journal: append-only, one row per reply, in the order the run recorded them.
CREATE TABLE prose_journal (
    run_id     text NOT NULL REFERENCES prose_runs (id) ON DELETE CASCADE,
    seq        bigint NOT NULL,
    request_id text NOT NULL,
    answered   boolean NOT NULL,
    epoch      bigint NOT NULL,
    reply      json NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- A request's answer is recorded once: a second answer to it is refused. (A failure may be
-- followed by another attempt's reply: resuming a failed run asks its failed request again.)
CREATE UNIQUE INDEX prose_journal_one_answer ON prose_journal (run_id, request_id)
    WHERE answered;
