-- 0024_job_log_upsert.sql — gj_job_log_append counts a batch that fits with one upsert of the
-- job's totals (issue 25: each job's end writes its last lines; 0020 took three statements for
-- the totals: create, lock and read, update). What is kept, numbered and counted as dropped is
-- unchanged; a batch that does not fit goes line by line as before.
CREATE OR REPLACE FUNCTION gj_job_log_append(job uuid, attempt integer, entries jsonb, dropped bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t job_log_totals;
    e jsonb;
    n integer := 0;
    b bigint := 0;
    lost bigint := dropped;
    all_n integer := jsonb_array_length(entries);
    all_b bigint;
    before integer;
BEGIN
    SELECT coalesce(sum(octet_length(x.value->>2)), 0) INTO all_b FROM jsonb_array_elements(entries) AS x(value);
    -- A batch that fits, as nearly every one does: counted, and the totals row locked, in one
    -- statement. FOUND is false when it does not fit (the row is locked all the same) or the
    -- job is gone; then as 0020 did.
    INSERT INTO job_log_totals AS jt (job_id, lines, bytes, dropped)
    SELECT job, all_n, all_b, lost
     WHERE all_n <= 10000 AND all_b <= 1048576 AND EXISTS (SELECT 1 FROM jobs WHERE id = job)
    ON CONFLICT (job_id) DO UPDATE SET lines = jt.lines + EXCLUDED.lines, bytes = jt.bytes + EXCLUDED.bytes,
                                       dropped = jt.dropped + EXCLUDED.dropped
     WHERE jt.lines + EXCLUDED.lines <= 10000 AND jt.bytes + EXCLUDED.bytes <= 1048576
    RETURNING jt.lines - all_n INTO before;
    IF FOUND THEN
        INSERT INTO job_log (job_id, seq, at, attempt, level, line)
        SELECT job, before + x.ord, to_timestamp((x.value->>0)::double precision / 1000), attempt, x.value->>1,
               x.value->>2
          FROM jsonb_array_elements(entries) WITH ORDINALITY AS x(value, ord);
        PERFORM pg_notify('gpujobd_jobs', job::text);
        RETURN;
    END IF;
    INSERT INTO job_log_totals (job_id) SELECT job WHERE EXISTS (SELECT 1 FROM jobs WHERE id = job)
        ON CONFLICT (job_id) DO NOTHING;
    SELECT * INTO t FROM job_log_totals WHERE job_id = job FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;   -- the job is gone
    END IF;
    -- Line by line: a line is kept while the log stays under 10000 lines and within 1 MiB.
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
