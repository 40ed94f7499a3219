-- Blobs in an S3-compatible store (issue 30). A blob lives in one place: a large object
-- (lo_oid) or an object of the configured bucket (s3_key); both kinds are read at once, so
-- `gpujobd blobs migrate --to s3` can move them while the service runs. Quotas count
-- blobs.size wherever the bytes are (0015's trigger is unchanged).
ALTER TABLE blobs ALTER COLUMN lo_oid DROP NOT NULL;
ALTER TABLE blobs ADD COLUMN s3_key text;
ALTER TABLE blobs ADD CONSTRAINT blobs_one_place CHECK ((lo_oid IS NULL) <> (s3_key IS NULL));
CREATE UNIQUE INDEX blobs_s3_key ON blobs (s3_key) WHERE s3_key IS NOT NULL;

-- Objects no blob owns: a deleted blob's (by trigger, whichever path deleted it: jobs,
-- CARMIN files, DICOM instances, uploads, tenants; uploading false) and an upload's until the
-- transaction that inserts its blob removes the row (uploading true, written first on a
-- connection of its own, so a rolled-back or killed upload leaves it). A transaction cannot
-- delete from the store: the maintenance pass (service/db/blob_s3.c) deletes these objects.
CREATE TABLE blob_objects_unowned (
    s3_key      text PRIMARY KEY,
    uploading   boolean NOT NULL,
    since       timestamptz NOT NULL DEFAULT now()
);

-- 0001's gj_blob_unlink stays for model_files (large objects only).
CREATE FUNCTION gj_blob_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.lo_oid IS NOT NULL THEN
        PERFORM lo_unlink(OLD.lo_oid);
    END IF;
    IF OLD.s3_key IS NOT NULL THEN
        INSERT INTO blob_objects_unowned (s3_key, uploading) VALUES (OLD.s3_key, false)
        ON CONFLICT (s3_key) DO UPDATE SET uploading = false;
    END IF;
    RETURN OLD;
END $$;
DROP TRIGGER blobs_unlink ON blobs;
CREATE TRIGGER blobs_forget AFTER DELETE ON blobs FOR EACH ROW EXECUTE FUNCTION gj_blob_forget();
