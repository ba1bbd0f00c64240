-- Runs may wait for a person's input (prosevm's Postgres store, migration 3): `waiting` joins
-- the statuses a run can have.
ALTER TABLE prose_runs DROP CONSTRAINT prose_runs_status_check;
ALTER TABLE prose_runs ADD CONSTRAINT prose_runs_status_check CHECK (status IN
    ('queued', 'running', 'interrupted', 'paused', 'waiting', 'finished', 'failed'));
