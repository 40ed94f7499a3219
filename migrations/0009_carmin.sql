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

-- A CARMIN execution is a job with what CARMIN says of it. Its outputs are placed under
-- results_location (as files of the space, the job's output blobs themselves) once it has
-- succeeded and is first looked at (results_placed).
CREATE TABLE carmin_executions (
    job_id            uuid PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
    tenant_id         uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name              text NOT NULL,
    pipeline          text NOT NULL,
    input_values      jsonb NOT NULL,
    results_location  text NOT NULL,
    results_placed    boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX carmin_executions_tenant ON carmin_executions (tenant_id, created_at);
