-- 0007_workflow.sql — what workflow managers and gateways need of a job (issue 15):
--   * a name and labels, filterable in GET /v1/jobs;
--   * inputs that name another job's output: the new job is 'blocked' (shown as 'waiting')
--     until that job settles, then takes the output's blob itself (no bytes are copied), or
--     fails saying why; a small DAG inside the queue. A job can only name jobs that already
--     exist, so every edge points to an older job and no cycle can be made;
--   * a callback URL, called with a signed body when the job settles (webhook_deliveries,
--     delivered by service/workflow/webhook_delivery.c);
--   * the job's own log (job_log), written by the worker in batches, bounded per job.

ALTER TABLE jobs
    ADD COLUMN name          text CHECK (length(name) BETWEEN 1 AND 200),
    ADD COLUMN labels        jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(labels) = 'object'),
    ADD COLUMN callback_url  text CHECK (length(callback_url) BETWEEN 1 AND 2048),
    ADD COLUMN deps_pending  integer NOT NULL DEFAULT 0 CHECK (deps_pending >= 0);

-- 'blocked': waits for the jobs whose outputs it takes (deps_pending of them).
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('queued', 'running', 'waiting', 'blocked', 'succeeded', 'failed', 'canceled'));

CREATE INDEX jobs_tenant_name ON jobs (tenant_id, name, created_at DESC) WHERE name IS NOT NULL;
CREATE INDEX jobs_labels ON jobs USING gin (labels jsonb_path_ops);

-- The public state: a parent waiting for (or resumed after) its children is running; a job
-- waiting for another job's output is waiting.
CREATE OR REPLACE FUNCTION gj_public_state(state text, stage integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN state = 'waiting' THEN 'running'
                WHEN state = 'blocked' THEN 'waiting'
                WHEN state = 'queued' AND stage > 0 THEN 'running'
                ELSE state END
$$;

-- An input taken from another job's output. resolved: its blob is in job_inputs. The rows
-- stay as the input's provenance; upstream_id has no foreign key so that they outlive the
-- upstream job (deleting it fails the jobs still waiting for it, below).
CREATE TABLE job_dependencies (
    job_id       uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    name         text NOT NULL,
    upstream_id  uuid NOT NULL,
    output       text NOT NULL,
    resolved     boolean NOT NULL DEFAULT false,
    PRIMARY KEY (job_id, name)
);
CREATE INDEX job_dependencies_upstream ON job_dependencies (upstream_id) WHERE NOT resolved;

-- A job that waits for an upstream job fails, with the input's name and why.
CREATE FUNCTION gj_dependency_failed(job uuid, input text, why text) RETURNS void
LANGUAGE sql AS $$
    UPDATE jobs SET state = 'failed', finished_at = now(), updated_at = now(),
                    error = jsonb_build_object('message', format('input %s: %s', input, why),
                                               'field', 'inputs.' || input)
     WHERE id = job AND state = 'blocked';
$$;

-- The upstream job settled: each job waiting for one of its outputs takes the output's blob
-- (the last one it waited for queues it), or fails.
CREATE FUNCTION gj_resolve_dependents(up jobs) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    d record;
    blob uuid;
BEGIN
    FOR d IN SELECT * FROM job_dependencies WHERE upstream_id = up.id AND NOT resolved
             ORDER BY job_id, name FOR UPDATE LOOP
        IF up.state <> 'succeeded' THEN
            PERFORM gj_dependency_failed(d.job_id, d.name,
                format('job %s %s: %s', up.id, up.state, coalesce(up.error->>'message', 'canceled')));
            CONTINUE;
        END IF;
        SELECT o.blob_id INTO blob FROM job_outputs o WHERE o.job_id = up.id AND o.name = d.output;
        IF NOT FOUND THEN
            PERFORM gj_dependency_failed(d.job_id, d.name,
                format('job %s succeeded without an output named %s', up.id, d.output));
            CONTINUE;
        END IF;
        INSERT INTO job_inputs (job_id, name, blob_id) VALUES (d.job_id, d.name, blob);
        UPDATE job_dependencies SET resolved = true WHERE job_id = d.job_id AND name = d.name;
        UPDATE jobs SET deps_pending = deps_pending - 1,
                        state = CASE WHEN deps_pending = 1 AND state = 'blocked' THEN 'queued' ELSE state END,
                        updated_at = now()
         WHERE id = d.job_id AND state = 'blocked';
    END LOOP;
END $$;

-- ---- webhooks -------------------------------------------------------------------------

-- Each tenant signs with its own secret (GET /v1/webhook-secret shows it to the tenant), so
-- one tenant can never forge a call to another's receiver.
CREATE TABLE webhook_secrets (
    tenant_id   uuid PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    secret      bytea NOT NULL CHECK (length(secret) BETWEEN 24 AND 64),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- One delivery per settled job, retried with backoff until delivered or given up. body is
-- fixed when the job settles. job_id has no foreign key: a delivery outlives its job.
CREATE TABLE webhook_deliveries (
    id               bigserial PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    job_id           uuid NOT NULL,
    url              text NOT NULL,
    event            text NOT NULL,
    body             text NOT NULL,
    state            text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_status      integer,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    UNIQUE (job_id, event)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';

-- What a settled job's callback receives (Standard Webhooks' {type, timestamp, data}).
CREATE FUNCTION gj_webhook_body(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'type', 'job.' || j.state,
        'timestamp', to_char(coalesce(j.finished_at, now()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'data', jsonb_build_object(
            'id', j.id, 'kind', j.kind, 'state', j.state, 'name', j.name, 'labels', j.labels,
            'error', j.error, 'url', '/v1/jobs/' || j.id,
            'outputs', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                            'name', o.name, 'blob_id', o.blob_id, 'size', b.size,
                            'sha256', encode(b.sha256, 'hex'), 'content_type', o.content_type,
                            'url', '/v1/jobs/' || j.id || '/outputs/' || o.name) ORDER BY o.name), '[]'::jsonb)
                        FROM job_outputs o JOIN blobs b ON b.id = o.blob_id WHERE o.job_id = j.id)));
$$;

-- A job settled (succeeded, failed, canceled). Deferred to the commit, so that a succeeded
-- job's outputs, stored after its state in the same transaction, are there. Reads the row as
-- it is at the commit; does nothing twice (dependents are resolved once, a delivery has one
-- row per job and event).
CREATE FUNCTION gj_job_settled() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = NEW.id;
    IF NOT FOUND OR j.state NOT IN ('succeeded', 'failed', 'canceled') THEN
        RETURN NULL;
    END IF;
    PERFORM gj_resolve_dependents(j);
    IF j.callback_url IS NOT NULL THEN
        INSERT INTO webhook_deliveries (tenant_id, job_id, url, event, body)
        VALUES (j.tenant_id, j.id, j.callback_url, 'job.' || j.state, gj_webhook_body(j)::text)
        ON CONFLICT (job_id, event) DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER jobs_settled AFTER UPDATE OF state ON jobs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.state IN ('succeeded', 'failed', 'canceled') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION gj_job_settled();

-- A job is deleted: the blobs it owns that another job takes as inputs pass to that job
-- (a blob lives while a job uses it), and the jobs still waiting for its outputs fail.
CREATE FUNCTION gj_job_deleting() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d record;
BEGIN
    UPDATE blobs b SET owner_job = (SELECT i.job_id FROM job_inputs i
                                     WHERE i.blob_id = b.id AND i.job_id <> OLD.id
                                     ORDER BY i.job_id LIMIT 1)
     WHERE b.owner_job = OLD.id
       AND EXISTS (SELECT 1 FROM job_inputs i WHERE i.blob_id = b.id AND i.job_id <> OLD.id);
    FOR d IN SELECT * FROM job_dependencies WHERE upstream_id = OLD.id AND NOT resolved LOOP
        PERFORM gj_dependency_failed(d.job_id, d.name, format('job %s was deleted', OLD.id));
    END LOOP;
    RETURN OLD;
END $$;
CREATE TRIGGER jobs_deleting BEFORE DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION gj_job_deleting();

-- ---- the job's own log ------------------------------------------------------------------

-- Lines a job's run reported (the module's log, the worker's phases and times, warnings),
-- numbered from 1 per job. At most 10000 lines and 1 MiB of text per job: what comes after
-- is counted in job_log_totals.dropped, and the log route says so at its end.
CREATE TABLE job_log (
    job_id   uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    seq      integer NOT NULL CHECK (seq >= 1),
    at       timestamptz NOT NULL,
    attempt  integer NOT NULL,
    level    text NOT NULL CHECK (level IN ('info', 'warn', 'error')),
    line     text NOT NULL,
    PRIMARY KEY (job_id, seq)
);
CREATE TABLE job_log_totals (
    job_id   uuid PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
    lines    integer NOT NULL DEFAULT 0,
    bytes    bigint NOT NULL DEFAULT 0,
    dropped  bigint NOT NULL DEFAULT 0
);

-- Appends a batch: entries is [[unix_ms, level, line], ...]; dropped counts lines the worker
-- could not keep in memory. Wakes the followers of the job (gpujobd_jobs).
CREATE FUNCTION gj_job_log_append(job uuid, attempt integer, entries jsonb, dropped bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t job_log_totals;
    e jsonb;
    n integer := 0;
    b bigint := 0;
    lost bigint := dropped;
BEGIN
    INSERT INTO job_log_totals (job_id) SELECT job WHERE EXISTS (SELECT 1 FROM jobs WHERE id = job)
        ON CONFLICT (job_id) DO NOTHING;
    SELECT * INTO t FROM job_log_totals WHERE job_id = job FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;   -- the job is gone
    END IF;
    FOR e IN SELECT value FROM jsonb_array_elements(entries) LOOP
        IF t.lines + n < 10000 AND t.bytes + b + octet_length(e->>2) <= 1048576 THEN
            n := n + 1;
            b := b + octet_length(e->>2);
            INSERT INTO job_log (job_id, seq, at, attempt, level, line)
            VALUES (job, t.lines + n, to_timestamp((e->>0)::double precision / 1000), attempt, e->>1, e->>2);
        ELSE
            lost := lost + 1;
        END IF;
    END LOOP;
    UPDATE job_log_totals SET lines = lines + n, bytes = bytes + b, dropped = job_log_totals.dropped + lost
     WHERE job_id = job;
    PERFORM pg_notify('gpujobd_jobs', job::text);
END $$;

-- ---- what the API shows of a job, beyond its row ------------------------------------------

CREATE FUNCTION gj_job_workflow(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'name', j.name,
        'labels', j.labels,
        'inputs_from', (SELECT coalesce(jsonb_object_agg(d.name, jsonb_build_object(
                               'job', d.upstream_id, 'output', d.output, 'resolved', d.resolved)), '{}'::jsonb)
                          FROM job_dependencies d WHERE d.job_id = j.id),
        'callback', CASE WHEN j.callback_url IS NULL THEN NULL ELSE jsonb_build_object(
            'url', j.callback_url,
            'deliveries', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                               'id', w.id, 'event', w.event, 'state', w.state, 'attempts', w.attempts,
                               'last_status', w.last_status, 'last_error', w.last_error,
                               'next_attempt_at', CASE WHEN w.state = 'pending' THEN
                                   to_char(w.next_attempt_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') END,
                               'delivered_at', to_char(w.delivered_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
                               ORDER BY w.id), '[]'::jsonb)
                             FROM webhook_deliveries w WHERE w.job_id = j.id)) END,
        'log_url', '/v1/jobs/' || j.id || '/log');
$$;
