-- 0008_dicom_instances.sql — the DICOM instances each tenant stored by STOW-RS, with
-- the attributes QIDO-RS searches on, beside the blob that holds the instance.
--
-- These rows hold patient identity (PatientID, PatientName, AccessionNumber, ...): they
-- are the tenant's own data, as the blob is, and go with it. The row goes when its blob
-- goes (ON DELETE CASCADE): when the job that owns the blob is deleted, and when
-- --infer-purge-phi (GPUJOBD_INFER_PURGE_PHI=1) deletes a job's DICOM inputs once its
-- results are stored. inference_results never holds any of them (0002), nor do the logs.
--
-- One row per (tenant, SOP Instance UID): STOW-RS acknowledges an instance already
-- stored with a warning and makes no new job for it (INSERT ... ON CONFLICT DO NOTHING
-- decides, so two concurrent STOWs of one instance make one job). The job that took an
-- instance is its blob's owner_job.
CREATE TABLE dicom_instances (
    id                  bigserial PRIMARY KEY,
    tenant_id           uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    blob_id             uuid NOT NULL UNIQUE REFERENCES blobs(id) ON DELETE CASCADE,
    study_uid           text NOT NULL CHECK (study_uid ~ '^[0-9.]{1,64}$'),
    series_uid          text CHECK (series_uid ~ '^[0-9.]{1,64}$'),
    sop_uid             text NOT NULL CHECK (sop_uid ~ '^[0-9.]{1,64}$'),
    sop_class_uid       text NOT NULL,
    transfer_syntax_uid text,
    patient_id          text,
    patient_name        text,
    patient_birth_date  text,
    patient_sex         text,
    accession_number    text,
    study_date          text,            -- DA as stored (YYYYMMDD); QIDO ranges compare it as text
    study_time          text,
    study_id            text,
    study_description   text,
    referring_physician text,
    modality            text,
    series_number       text,
    series_description  text,
    instance_number     text,
    rows                integer,
    columns             integer,
    number_of_frames    integer,
    stored_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, sop_uid)
);
CREATE INDEX dicom_instances_study ON dicom_instances (tenant_id, study_uid, series_uid);
CREATE INDEX dicom_instances_patient ON dicom_instances (tenant_id, patient_id);
CREATE INDEX dicom_instances_accession ON dicom_instances (tenant_id, accession_number);
CREATE INDEX dicom_instances_date ON dicom_instances (tenant_id, study_date);
