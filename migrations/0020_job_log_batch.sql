-- 0020_job_log_batch.sql — gj_job_log_append writes a batch that fits the job's bounds with one
-- INSERT (issue 25: every job's end writes its last lines, and the queue's throughput is
-- measured against pgbench); a batch that does not fit goes line by line as in 0007, so what
-- is kept and what is counted as dropped is unchanged. Fits: every line would be kept by the
-- loop, which keeps a line while the lines stay under 10000 and the bytes within 1 MiB.
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
BEGIN
    INSERT INTO job_log_totals (job_id) SELECT job WHERE EXISTS (SELECT 1 FROM jobs WHERE id = job)
        ON CONFLICT (job_id) DO NOTHING;
    SELECT * INTO t FROM job_log_totals WHERE job_id = job FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;   -- the job is gone
    END IF;
    SELECT coalesce(sum(octet_length(x.value->>2)), 0) INTO all_b FROM jsonb_array_elements(entries) AS x(value);
    IF t.lines + all_n <= 10000 AND t.bytes + all_b <= 1048576 THEN
        INSERT INTO job_log (job_id, seq, at, attempt, level, line)
        SELECT job, t.lines + x.ord, to_timestamp((x.value->>0)::double precision / 1000), attempt, x.value->>1,
               x.value->>2
          FROM jsonb_array_elements(entries) WITH ORDINALITY AS x(value, ord);
        n := all_n;
        b := all_b;
    ELSE
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
    END IF;
    UPDATE job_log_totals SET lines = lines + n, bytes = bytes + b, dropped = job_log_totals.dropped + lost
     WHERE job_id = job;
    PERFORM pg_notify('gpujobd_jobs', job::text);
END $$;
