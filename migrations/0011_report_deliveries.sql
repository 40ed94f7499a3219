-- 0011_report_deliveries.sql — the Structured Reports of infer jobs waiting for, or done
-- with, their delivery by STOW-RS to --results-dicomweb-url (service/infer/delivery.c).
--
-- A row is made in the transaction that marks the job succeeded (so a report is never
-- forgotten: if the job's success commits, so does its delivery), for the report's
-- instance blob (0008); it goes with the blob or the job. A failed attempt leaves the row
-- pending with the next time to try (doubling, at most 5 minutes): a PACS that is down
-- delays the delivery, and nothing is dropped. Replicas share the work: a replica claims
-- a due row by moving next_attempt_at past the time one attempt can take.
-- No UID or patient attribute is copied here; last_error is the PACS's status or the
-- transport's error, never the report.
CREATE TABLE report_deliveries (
    id              bigserial PRIMARY KEY,
    job_id          uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    blob_id         uuid NOT NULL UNIQUE REFERENCES blobs(id) ON DELETE CASCADE,
    output_name     text NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status     integer,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz
);
CREATE INDEX report_deliveries_due ON report_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX report_deliveries_job ON report_deliveries (job_id);
