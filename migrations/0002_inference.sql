-- 0002_inference.sql — results of the `infer` kind, kept for validation against
-- radiologists (GET /v1/inference-results), and the server's secrets.
--
-- No patient-identifying attribute is stored here: a study and an image are known
-- only by an HMAC-SHA256 of their Study / SOP Instance UID under a server secret
-- (so results of one study can be grouped and matched by whoever holds the UIDs
-- and the secret, and by nobody else). The UIDs themselves are not stored.

-- Secrets shared by every replica: the first to start inserts one, every other
-- reads it back (INSERT ... ON CONFLICT DO NOTHING, then SELECT).
CREATE TABLE server_secrets (
    name        text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 100),
    value       bytea NOT NULL CHECK (length(value) >= 32),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE inference_results (
    id                bigserial PRIMARY KEY,
    tenant_id         uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    job_id            uuid REFERENCES jobs(id) ON DELETE SET NULL,   -- results outlive their job
    study_key         text CHECK (study_key ~ '^[0-9a-f]{64}$'),   -- HMAC of the Study Instance UID (NULL: the file had none)
    image_key         text CHECK (image_key ~ '^[0-9a-f]{64}$'),            -- HMAC of the SOP Instance UID
    input_name        text NOT NULL,                                        -- dicom, dicom.1, ...
    model             text NOT NULL,
    model_version     bigint NOT NULL CHECK (model_version >= 1),
    status            text NOT NULL CHECK (status IN ('ok', 'skipped', 'failed')),
    reason            text,                                                 -- why skipped or failed
    scores            jsonb,                                                -- {label: score} (status ok)
    top_label         text,
    top_score         double precision,
    acquired_at       timestamp,        -- AcquisitionDate/Time or ContentDate/Time (DICOM local time, no zone)
    received_at       timestamptz NOT NULL,   -- the job's submission
    processed_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (job_id, input_name)
);
CREATE INDEX inference_results_export ON inference_results (tenant_id, id);
CREATE INDEX inference_results_model ON inference_results (tenant_id, model, model_version, id);
CREATE INDEX inference_results_study ON inference_results (tenant_id, study_key);
