-- 0022_attempt_record.sql — an attempt's environment written by one function (issue 25), so a
-- worker can send it inside another statement: the job's end (a job shorter than a second
-- records its attempt in its end's round trip) or its log's flush. recorded_at is when the
-- worker gathered the environment, at the attempt's start, not when the row was written.
CREATE FUNCTION gj_attempt_record(a_job uuid, a_attempt integer, a_stage integer, a_worker text, a_environment jsonb,
                                  a_gathered_at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$   -- plpgsql: its plan is kept, where an sql function's is made anew each call
BEGIN
    INSERT INTO job_attempt_environments (job_id, attempt, stage, recorded_at, worker, environment, inputs)
    SELECT a_job, a_attempt, a_stage, a_gathered_at, a_worker, a_environment,
           (SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object('name', i.name, 'blob', i.blob_id,
                   'sha256', encode(b.sha256, 'hex'), 'size', b.size, 'content_type', b.content_type,
                   'job', d.upstream_id, 'output', d.output)) ORDER BY i.name), '[]'::jsonb)
              FROM job_inputs i JOIN blobs b ON b.id = i.blob_id
              LEFT JOIN job_dependencies d ON d.job_id = i.job_id AND d.name = i.name
             WHERE i.job_id = a_job)
     WHERE EXISTS (SELECT 1 FROM jobs WHERE id = a_job)   -- a job deleted meanwhile: nothing to record
    ON CONFLICT (job_id, attempt, stage) DO UPDATE SET recorded_at = EXCLUDED.recorded_at,
        worker = EXCLUDED.worker, environment = EXCLUDED.environment, inputs = EXCLUDED.inputs;
END $$;
