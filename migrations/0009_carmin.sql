-- CARMIN's file space (service/carmin/): per tenant, a tree of directories and files under
-- /vip/Home (home itself is implied). A file is a blob of the tenant (uploaded, or a job's
-- output placed under an execution's resultsLocation); a directory has no blob.
CREATE TABLE carmin_paths (
    tenant_id     uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    path          text NOT NULL CHECK (path LIKE '/vip/Home/%'),
    parent        text NOT NULL,
    blob_id       uuid REFERENCES blobs(id),
    execution_id  uuid,
    modified_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, path)
);
CREATE INDEX carmin_paths_parent ON carmin_paths (tenant_id, parent);
CREATE INDEX carmin_paths_blob ON carmin_paths (blob_id) WHERE blob_id IS NOT NULL;
