-- 0001_init.sql — tenants, keys, blobs, jobs and their history, workers (DESIGN §3, §4).
-- Applied once, under an advisory lock, by `gpujobd migrate` or at `serve` start-up.

CREATE TABLE tenants (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    key_hash    bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),   -- SHA-256 of the key, never the key
    prefix      text NOT NULL,                                         -- first characters, to recognise a key in lists
    role        text NOT NULL CHECK (role IN ('admin', 'user')),
    label       text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

-- Payloads live in large objects, written and read in chunks. A blob is immutable
-- once committed. owner_job: the job whose multipart submit or output created it;
-- such blobs go with the job. Standalone uploads (POST /v1/blobs) have none.
CREATE TABLE blobs (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id     uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    size          bigint NOT NULL CHECK (size >= 0),
    sha256        bytea NOT NULL CHECK (length(sha256) = 32),
    content_type  text NOT NULL,
    lo_oid        oid NOT NULL,
    owner_job     uuid,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX blobs_tenant ON blobs (tenant_id, created_at);
CREATE INDEX blobs_owner_job ON blobs (owner_job) WHERE owner_job IS NOT NULL;

-- A deleted blob takes its large object with it, whichever path deleted it.
CREATE FUNCTION gj_blob_unlink() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lo_unlink(OLD.lo_oid);
    RETURN OLD;
END $$;
CREATE TRIGGER blobs_unlink AFTER DELETE ON blobs FOR EACH ROW EXECUTE FUNCTION gj_blob_unlink();

CREATE SEQUENCE job_lease_token_seq;

-- States: queued -> running -> succeeded | failed | canceled. 'waiting' is a parent
-- whose children run; the API shows it as running.
CREATE TABLE jobs (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id         uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    kind              text NOT NULL,
    params            jsonb NOT NULL DEFAULT '{}'::jsonb,
    state             text NOT NULL DEFAULT 'queued'
                      CHECK (state IN ('queued', 'running', 'waiting', 'succeeded', 'failed', 'canceled')),
    priority          integer NOT NULL DEFAULT 0,
    attempts          integer NOT NULL DEFAULT 0,
    max_attempts      integer NOT NULL DEFAULT 3 CHECK (max_attempts BETWEEN 1 AND 100),
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at        timestamptz,
    finished_at       timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    run_after         timestamptz NOT NULL DEFAULT '-infinity',   -- retry backoff
    progress          real NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 1),
    message           text,
    error             jsonb,
    lease_owner       text,
    lease_token       bigint,
    lease_expires_at  timestamptz,
    device            text,
    idempotency_key   text,
    request_hash      bytea,        -- SHA-256 of the submit, to refuse a reused key with another body
    cancel_requested  boolean NOT NULL DEFAULT false,
    parent_id         uuid REFERENCES jobs(id) ON DELETE CASCADE,
    child_index       integer,
    stage             integer NOT NULL DEFAULT 0,
    children_pending  integer NOT NULL DEFAULT 0,
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX jobs_claim ON jobs (priority DESC, created_at, id) WHERE state = 'queued';
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_tenant_list ON jobs (tenant_id, created_at DESC, id DESC) WHERE parent_id IS NULL;
CREATE INDEX jobs_parent ON jobs (parent_id, child_index) WHERE parent_id IS NOT NULL;

ALTER TABLE blobs ADD CONSTRAINT blobs_owner_job_fkey
    FOREIGN KEY (owner_job) REFERENCES jobs(id) ON DELETE CASCADE;

CREATE TABLE job_inputs (
    job_id   uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    name     text NOT NULL,
    blob_id  uuid NOT NULL REFERENCES blobs(id),
    PRIMARY KEY (job_id, name)
);
CREATE INDEX job_inputs_blob ON job_inputs (blob_id);

CREATE TABLE job_outputs (
    job_id        uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    name          text NOT NULL,
    blob_id       uuid NOT NULL REFERENCES blobs(id),
    content_type  text NOT NULL,
    PRIMARY KEY (job_id, name)
);
-- Deleting a blob checks job_outputs for references: without this, a scan of the table per blob.
CREATE INDEX job_outputs_blob ON job_outputs (blob_id);

CREATE TABLE job_events (
    id      bigserial PRIMARY KEY,
    job_id  uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind    text NOT NULL,           -- state, message, retry, cancel_requested
    detail  jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX job_events_job ON job_events (job_id, id);

CREATE TABLE workers (
    id            text PRIMARY KEY,   -- host:pid:start
    host          text NOT NULL,
    pid           integer NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now(),
    devices       jsonb NOT NULL DEFAULT '[]'::jsonb,
    stopping      boolean NOT NULL DEFAULT false
);

-- The state the API shows: a parent waiting for (or resumed after) its children is running.
CREATE FUNCTION gj_public_state(state text, stage integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN state = 'waiting' THEN 'running'
                WHEN state = 'queued' AND stage > 0 THEN 'running'
                ELSE state END
$$;

-- History and wake-ups, kept by the database so every writer (any replica, any
-- code path) records them the same way.
--   gpujobd_queue  payload kind        a job became claimable
--   gpujobd_jobs   payload id          a job changed (state, progress, message)
--   gpujobd_cancel payload id          cancellation of a running job was asked
CREATE FUNCTION gj_job_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO job_events (job_id, kind, detail)
        VALUES (NEW.id, 'state', jsonb_build_object('state', gj_public_state(NEW.state, NEW.stage)));
        IF NEW.state = 'queued' THEN
            PERFORM pg_notify('gpujobd_queue', NEW.kind);
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        INSERT INTO job_events (job_id, kind, detail)
        VALUES (NEW.id, 'state', jsonb_strip_nulls(jsonb_build_object(
            'state', gj_public_state(NEW.state, NEW.stage),
            'internal_state', CASE WHEN NEW.state <> gj_public_state(NEW.state, NEW.stage) THEN NEW.state END,
            'attempt', NEW.attempts,
            'device', CASE WHEN NEW.state = 'running' THEN NEW.device END,
            'worker', CASE WHEN NEW.state = 'running' THEN NEW.lease_owner END,
            'error', CASE WHEN NEW.state IN ('failed', 'queued') THEN NEW.error END)));
        IF NEW.state = 'queued' THEN
            PERFORM pg_notify('gpujobd_queue', NEW.kind);
        END IF;
    END IF;
    IF NEW.message IS DISTINCT FROM OLD.message AND NEW.message IS NOT NULL THEN
        INSERT INTO job_events (job_id, kind, detail)
        VALUES (NEW.id, 'message', jsonb_build_object('message', NEW.message));
    END IF;
    IF NEW.cancel_requested AND NOT OLD.cancel_requested THEN
        INSERT INTO job_events (job_id, kind, detail) VALUES (NEW.id, 'cancel_requested', '{}');
        PERFORM pg_notify('gpujobd_cancel', NEW.id::text);
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state OR NEW.progress IS DISTINCT FROM OLD.progress
       OR NEW.message IS DISTINCT FROM OLD.message THEN
        PERFORM pg_notify('gpujobd_jobs', NEW.id::text);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_changed AFTER INSERT OR UPDATE ON jobs
    FOR EACH ROW EXECUTE FUNCTION gj_job_changed();

-- Sub-tasks: a finished child counts down its parent; the last one re-queues the
-- parent at its next stage. A child that fails fails the parent and cancels its
-- siblings; a canceled parent cancels its children.
CREATE FUNCTION gj_child_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.parent_id IS NOT NULL AND NEW.state IS DISTINCT FROM OLD.state THEN
        IF NEW.state = 'succeeded' THEN
            UPDATE jobs SET children_pending = children_pending - 1,
                            state = CASE WHEN children_pending = 1 AND state = 'waiting' THEN 'queued' ELSE state END,
                            stage = CASE WHEN children_pending = 1 AND state = 'waiting' THEN stage + 1 ELSE stage END,
                            attempts = CASE WHEN children_pending = 1 AND state = 'waiting' THEN 0 ELSE attempts END,
                            updated_at = now()
             WHERE id = NEW.parent_id;
        ELSIF NEW.state IN ('failed', 'canceled') THEN
            UPDATE jobs SET state = 'failed', finished_at = now(), updated_at = now(),
                            lease_owner = NULL, lease_expires_at = NULL,
                            error = jsonb_build_object('message',
                                format('sub-task %s %s: %s', NEW.child_index, NEW.state,
                                       coalesce(NEW.error->>'message', 'canceled')))
             WHERE id = NEW.parent_id AND state IN ('waiting', 'queued', 'running');
        END IF;
    END IF;
    IF NEW.state IN ('failed', 'canceled') AND OLD.state NOT IN ('failed', 'canceled', 'succeeded') THEN
        UPDATE jobs SET state = 'canceled', finished_at = now(), updated_at = now()
         WHERE parent_id = NEW.id AND state = 'queued';
        UPDATE jobs SET cancel_requested = true, updated_at = now()
         WHERE parent_id = NEW.id AND state IN ('running', 'waiting') AND NOT cancel_requested;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_child_finished AFTER UPDATE OF state ON jobs
    FOR EACH ROW EXECUTE FUNCTION gj_child_finished();
