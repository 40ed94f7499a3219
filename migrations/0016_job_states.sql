-- 0016_job_states.sql — a job's stored state is named as the API shows it (issue 25).
-- Until now the stored names were the public names swapped: a parent whose sub-tasks ran was
-- stored 'waiting' (shown 'running') and a job waiting for another job's output was stored
-- 'blocked' (shown 'waiting'). Now:
--   subtasks  a parent whose sub-tasks run (shown 'running', as a queued parent at stage > 0)
--   waiting   waiting for other jobs' outputs it takes as inputs (shown 'waiting')
-- service/jobs/job_state.h lists the same states and the moves between them. Every
-- function and index below that named a state is redefined with the new names; the rows are
-- converted without firing the history and sub-task triggers (nothing changed for a reader).
--
-- And one delete rule (ARCHITECTURE.md): a running job that is deleted is canceled and
-- marked delete_requested; it is deleted when it stops (gj_job_settled, at that commit).

ALTER TABLE jobs ADD COLUMN delete_requested boolean NOT NULL DEFAULT false;

ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs DISABLE TRIGGER jobs_changed;
ALTER TABLE jobs DISABLE TRIGGER jobs_child_finished;
UPDATE jobs SET state = 'subtasks' WHERE state = 'waiting';
UPDATE jobs SET state = 'waiting' WHERE state = 'blocked';
ALTER TABLE jobs ENABLE TRIGGER jobs_changed;
ALTER TABLE jobs ENABLE TRIGGER jobs_child_finished;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('queued', 'running', 'subtasks', 'waiting', 'succeeded', 'failed', 'canceled'));

-- The history keeps the stored state where it differs from the public one: a parent's is
-- 'subtasks' now, and a waiting job's no longer differs.
UPDATE job_events SET detail = jsonb_set(detail, '{internal_state}', '"subtasks"')
 WHERE kind = 'state' AND detail->>'internal_state' = 'waiting';
UPDATE job_events SET detail = detail - 'internal_state'
 WHERE kind = 'state' AND detail->>'internal_state' = 'blocked';

DROP INDEX jobs_tenant_blocked;
CREATE INDEX jobs_tenant_waiting ON jobs (tenant_id) WHERE state = 'waiting';

CREATE OR REPLACE FUNCTION gj_public_state(state text, stage integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN state = 'subtasks' THEN 'running'
                WHEN state = 'queued' AND stage > 0 THEN 'running'
                ELSE state END
$$;

CREATE OR REPLACE FUNCTION gj_child_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.parent_id IS NOT NULL AND NEW.state IS DISTINCT FROM OLD.state THEN
        IF NEW.state = 'succeeded' THEN
            UPDATE jobs SET children_pending = children_pending - 1,
                            state = CASE WHEN children_pending = 1 AND state = 'subtasks' THEN 'queued' ELSE state END,
                            stage = CASE WHEN children_pending = 1 AND state = 'subtasks' THEN stage + 1 ELSE stage END,
                            attempts = CASE WHEN children_pending = 1 AND state = 'subtasks' THEN 0 ELSE attempts END,
                            updated_at = now()
             WHERE id = NEW.parent_id;
        ELSIF NEW.state IN ('failed', 'canceled') THEN
            UPDATE jobs SET state = 'failed', finished_at = now(), updated_at = now(),
                            lease_owner = NULL, lease_expires_at = NULL,
                            error = jsonb_build_object('message',
                                format('sub-task %s %s: %s', NEW.child_index, NEW.state,
                                       coalesce(NEW.error->>'message', 'canceled')))
             WHERE id = NEW.parent_id AND state IN ('subtasks', 'queued', 'running');
        END IF;
    END IF;
    IF NEW.state IN ('failed', 'canceled') AND OLD.state NOT IN ('failed', 'canceled', 'succeeded') THEN
        UPDATE jobs SET state = 'canceled', finished_at = now(), updated_at = now()
         WHERE parent_id = NEW.id AND state = 'queued';
        UPDATE jobs SET cancel_requested = true, updated_at = now()
         WHERE parent_id = NEW.id AND state IN ('running', 'subtasks') AND NOT cancel_requested;
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION gj_dependency_failed(job uuid, input text, why text, failed_job uuid, cause text)
RETURNS void LANGUAGE sql AS $$
    UPDATE jobs SET state = 'failed', finished_at = now(), updated_at = now(),
                    error = jsonb_strip_nulls(jsonb_build_object(
                        'message', format('input %s: %s', input, why),
                        'field', 'inputs.' || input,
                        'failed_job', failed_job, 'cause', cause))
     WHERE id = job AND state = 'waiting';
$$;

CREATE OR REPLACE FUNCTION gj_resolve_dependents(up jobs) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    d record;
    blob uuid;
    root uuid;
BEGIN
    FOR d IN SELECT * FROM job_dependencies WHERE upstream_id = up.id AND NOT resolved
             ORDER BY job_id, name FOR UPDATE LOOP
        IF up.state <> 'succeeded' THEN
            root := coalesce((up.error->>'failed_job')::uuid, up.id);
            PERFORM gj_dependency_failed(d.job_id, d.name,
                CASE WHEN root = up.id THEN format('job %s %s', up.id, gj_failure_cause(up))
                     ELSE format('job %s failed because job %s %s', up.id, root, gj_failure_cause(up)) END,
                root, gj_failure_cause(up));
            CONTINUE;
        END IF;
        SELECT o.blob_id INTO blob FROM job_outputs o WHERE o.job_id = up.id AND o.name = d.output;
        IF NOT FOUND THEN
            PERFORM gj_dependency_failed(d.job_id, d.name,
                format('job %s succeeded without an output named %s', up.id, d.output), NULL, NULL);
            CONTINUE;
        END IF;
        INSERT INTO job_inputs (job_id, name, blob_id) VALUES (d.job_id, d.name, blob);
        UPDATE job_dependencies SET resolved = true WHERE job_id = d.job_id AND name = d.name;
        UPDATE jobs SET deps_pending = deps_pending - 1,
                        state = CASE WHEN deps_pending = 1 AND state = 'waiting' THEN 'queued' ELSE state END,
                        updated_at = now()
         WHERE id = d.job_id AND state = 'waiting';
    END LOOP;
END $$;

-- A job settled: as before (0007), and a job whose deletion was asked while it ran goes now.
-- A blob of it that another job still needs keeps it (a warning; DELETE may be asked again).
CREATE OR REPLACE FUNCTION gj_job_settled() RETURNS trigger LANGUAGE plpgsql AS $$
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
    IF j.delete_requested THEN
        BEGIN
            DELETE FROM jobs WHERE id = j.id;
        EXCEPTION WHEN foreign_key_violation THEN
            RAISE WARNING 'job %: not deleted when it stopped: %', j.id, SQLERRM;
        END;
    END IF;
    RETURN NULL;
END $$;

-- A deleted job wakes its followers too (a reader that holds the job learns it is gone).
CREATE OR REPLACE FUNCTION gj_job_deleting() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d record;
BEGIN
    UPDATE blobs b SET owner_job = (SELECT i.job_id FROM job_inputs i
                                     WHERE i.blob_id = b.id AND i.job_id <> OLD.id
                                     ORDER BY i.job_id LIMIT 1)
     WHERE b.owner_job = OLD.id
       AND EXISTS (SELECT 1 FROM job_inputs i WHERE i.blob_id = b.id AND i.job_id <> OLD.id);
    FOR d IN SELECT * FROM job_dependencies WHERE upstream_id = OLD.id AND NOT resolved LOOP
        PERFORM gj_dependency_failed(d.job_id, d.name, format('job %s was deleted', OLD.id), NULL, NULL);
    END LOOP;
    PERFORM pg_notify('gpujobd_jobs', OLD.id::text);
    RETURN OLD;
END $$;
