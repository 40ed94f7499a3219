-- 0013_chain_bounds.sql — chains of waiting jobs, bounded (issue 28 #2).
--   * A job that fails because its upstream failed names the job whose own failure it is
--     (error.failed_job, error.cause), not the chain above it: each error quoted the whole
--     chain (12 KB at depth 200, 71 MB written by one cancel at depth 1500).
--   * chain_depth: how many blocked jobs a blocked job waits behind (1: its upstream is not
--     blocked), checked at submit against --max-chain-depth; an index counts a tenant's
--     blocked jobs for --max-waiting-jobs-per-tenant (service/queue_submit.c).

ALTER TABLE jobs ADD COLUMN chain_depth integer NOT NULL DEFAULT 0 CHECK (chain_depth >= 0);
CREATE INDEX jobs_tenant_blocked ON jobs (tenant_id) WHERE state = 'blocked';

-- A job that waits for an upstream job fails, with the input's name and why; failed_job
-- (when the upstream failed or was canceled): the job whose own failure it is, and cause,
-- what that job's own failure was, at most 500 characters of its message.
CREATE FUNCTION gj_dependency_failed(job uuid, input text, why text, failed_job uuid, cause text)
RETURNS void LANGUAGE sql AS $$
    UPDATE jobs SET state = 'failed', finished_at = now(), updated_at = now(),
                    error = jsonb_strip_nulls(jsonb_build_object(
                        'message', format('input %s: %s', input, why),
                        'field', 'inputs.' || input,
                        'failed_job', failed_job, 'cause', cause))
     WHERE id = job AND state = 'blocked';
$$;

-- What up's failure was, bounded: its own ('failed: out of memory', 'canceled'), or the
-- cause it took from its own upstream.
CREATE FUNCTION gj_failure_cause(up jobs) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN up.error ? 'failed_job' THEN up.error->>'cause'
                WHEN up.error->>'message' IS NULL THEN up.state
                ELSE up.state || ': ' || left(up.error->>'message', 500) END
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
                        state = CASE WHEN deps_pending = 1 AND state = 'blocked' THEN 'queued' ELSE state END,
                        updated_at = now()
         WHERE id = d.job_id AND state = 'blocked';
    END LOOP;
END $$;

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
    RETURN OLD;
END $$;

DROP FUNCTION gj_dependency_failed(uuid, text, text);
