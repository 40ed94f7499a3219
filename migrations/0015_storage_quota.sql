-- Per-tenant storage quotas (issue 28). A tenant's bytes are its blobs' sizes: uploads,
-- multipart inputs, job outputs, CARMIN files and DICOM instances are all blobs (models
-- are the operator's, in model_files, and do not count).
-- storage_quota_bytes: the tenant's own quota; NULL takes the server's
-- --tenant-storage-quota; 0 is no quota.
ALTER TABLE tenants ADD COLUMN storage_quota_bytes bigint
    CHECK (storage_quota_bytes IS NULL OR storage_quota_bytes >= 0);

-- What each tenant stores, kept by trigger with every blob inserted or deleted, whichever
-- path does it. The insert's UPDATE locks the tenant's row until its transaction ends, so
-- two uploads of one tenant are checked one after the other (service/storage_quota.c).
CREATE TABLE tenant_storage (
    tenant_id   uuid PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    used_bytes  bigint NOT NULL DEFAULT 0
);
INSERT INTO tenant_storage (tenant_id, used_bytes)
SELECT t.id, coalesce((SELECT sum(b.size) FROM blobs b WHERE b.tenant_id = t.id), 0) FROM tenants t;

CREATE FUNCTION gj_tenant_storage_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO tenant_storage AS s (tenant_id, used_bytes) VALUES (NEW.tenant_id, NEW.size)
        ON CONFLICT (tenant_id) DO UPDATE SET used_bytes = s.used_bytes + EXCLUDED.used_bytes;
        RETURN NEW;
    END IF;
    UPDATE tenant_storage SET used_bytes = used_bytes - OLD.size WHERE tenant_id = OLD.tenant_id;
    RETURN OLD;
END $$;
CREATE TRIGGER blobs_count_storage AFTER INSERT OR DELETE ON blobs
    FOR EACH ROW EXECUTE FUNCTION gj_tenant_storage_count();
