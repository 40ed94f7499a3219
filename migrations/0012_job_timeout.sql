-- 0012_job_timeout.sql — a job's time limit (POST /v1/jobs timeout_seconds, or serve's
-- --job-timeout-seconds): each run of the job (an attempt, or a stage of a job with
-- sub-tasks) is stopped this long after it started and the job fails, not retried
-- (service/worker_pool.c). 0: no limit. A sub-task takes its parent's.
ALTER TABLE jobs ADD COLUMN timeout_seconds integer NOT NULL DEFAULT 0
    CHECK (timeout_seconds BETWEEN 0 AND 2592000);
