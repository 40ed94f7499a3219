-- 0017_provenance.sql — what determined each attempt's result, and which job a rerun
-- repeats (issue 26; service/jobs/provenance_store.c is the only reader and writer).

-- One row per attempt (and stage: a parent that waited for its sub-tasks runs again), written
-- before the kind runs: the environment the worker gathered (gpujobd's build, the kind's
-- version, device, libraries, precision, seed) and the inputs as the attempt read them, by
-- digest, so that the record outlives a blob deleted later.
CREATE TABLE job_attempt_environments (
    job_id       uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    stage        integer NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    worker       text NOT NULL,
    environment  jsonb NOT NULL,
    inputs       jsonb NOT NULL,
    PRIMARY KEY (job_id, attempt, stage)
);

-- A job made by POST /v1/jobs/{id}/rerun. rerun_of has no foreign key: the original may be
-- deleted, and the rerun still says what it repeated.
CREATE TABLE job_reruns (
    job_id    uuid PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
    rerun_of  uuid NOT NULL
);
CREATE INDEX job_reruns_of ON job_reruns (rerun_of);
