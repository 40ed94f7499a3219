-- 0019_job_read_notify.sql — every change a reader of a job can see sends NOTIFY gpujobd_jobs
-- with the job's id (issue 25). Replicas answer GET /v1/jobs/{id} from memory
-- (service/jobs/job_cache.h) and forget a job when its notification comes, so a change that
-- did not notify would be served stale. Before this, only changes of state, progress and
-- message notified (gj_job_changed); attempts, device, error, the timestamps, name, labels,
-- inputs, dependencies, callback deliveries and deletions did not.
-- PostgreSQL delivers a notification sent more than once in a transaction with the same
-- payload once, so these add nothing where gj_job_changed already notified.

CREATE FUNCTION gj_job_row_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gpujobd_jobs', (CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END)::text);
    RETURN NULL;
END $$;
-- Any column: what the API shows of a row is most of it, and a column added later is covered.
CREATE TRIGGER jobs_row_changed AFTER UPDATE ON jobs
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION gj_job_row_changed();
CREATE TRIGGER jobs_row_deleted AFTER DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION gj_job_row_changed();

-- The rows of other tables a job's answer includes (job_inputs, job_dependencies,
-- webhook_deliveries: gj_job_workflow), by their job_id.
CREATE FUNCTION gj_job_part_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gpujobd_jobs', (CASE WHEN TG_OP = 'DELETE' THEN OLD.job_id ELSE NEW.job_id END)::text);
    RETURN NULL;
END $$;
CREATE TRIGGER job_inputs_changed AFTER INSERT OR UPDATE OR DELETE ON job_inputs
    FOR EACH ROW EXECUTE FUNCTION gj_job_part_changed();
CREATE TRIGGER job_dependencies_changed AFTER INSERT OR UPDATE OR DELETE ON job_dependencies
    FOR EACH ROW EXECUTE FUNCTION gj_job_part_changed();
CREATE TRIGGER webhook_deliveries_changed AFTER INSERT OR UPDATE OR DELETE ON webhook_deliveries
    FOR EACH ROW EXECUTE FUNCTION gj_job_part_changed();
