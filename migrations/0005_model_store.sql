-- 0005_model_store.sql — one model repository for every replica (issue 13).
--
-- The desired state: models, their versions and each version's files (large objects with
-- their SHA-256, as blobs), config.json kept as the JSON text it was given, and what the
-- operators asked (a version loaded, unloaded, or loaded on first use). The actual state:
-- what each replica has, reported by it. Every replica converges to the desired state
-- (service/infer/model_sync.c): it LISTENs on gpujobd_models and rereads the whole store
-- every few seconds anyway, caching files under DATA_DIR/model-cache/<digest>/.

-- The store's generation: every change of the desired state moves it (trigger below), so a
-- replica says which one it has applied and a client can wait until all have.
CREATE TABLE model_store (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    generation  bigint NOT NULL DEFAULT 0
);
INSERT INTO model_store DEFAULT VALUES;

CREATE TABLE models (
    name        text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_-][A-Za-z0-9._-]{0,126}$'),
    config      text NOT NULL CHECK (length(config) <= 1048576),   -- config.json (its version_policy too)
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- desired: 'available' loads on first use (a job, a /v2 request) on each serving replica;
-- 'loaded' is loaded and placed by every serving replica now; 'unloaded' is served by none
-- until it is loaded again. requested_at moves with every load or unload asked, even of the
-- same state: a replica whose load failed tries again once per request.
CREATE TABLE model_versions (
    model         text NOT NULL REFERENCES models(name) ON DELETE CASCADE,
    version       integer NOT NULL CHECK (version BETWEEN 1 AND 999999999),
    config        text CHECK (length(config) <= 1048576),   -- its own config.json; NULL: the model's
    digest        text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),   -- of its files: the cache key
    desired       text NOT NULL DEFAULT 'available' CHECK (desired IN ('available', 'loaded', 'unloaded')),
    requested_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, version)
);

-- A version's files (model.onnx, and whatever came with it: labels, the training record),
-- immutable. The version's digest is the SHA-256 of "path NUL sha256-hex LF" for each file
-- in byte order of path (service/infer/model_store.c).
CREATE TABLE model_files (
    model    text NOT NULL,
    version  integer NOT NULL,
    path     text NOT NULL CHECK (path ~ '^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$'),
    size     bigint NOT NULL CHECK (size >= 0),
    sha256   bytea NOT NULL CHECK (length(sha256) = 32),
    lo_oid   oid NOT NULL,
    PRIMARY KEY (model, version, path),
    FOREIGN KEY (model, version) REFERENCES model_versions ON DELETE CASCADE
);
-- A deleted file takes its large object with it (the blobs' trigger function, 0001).
CREATE TRIGGER model_files_unlink AFTER DELETE ON model_files
    FOR EACH ROW EXECUTE FUNCTION gj_blob_unlink();

-- Versions imported from a replica's seed directory (DATA_DIR/models, --models-dir): each
-- once, so a version deleted through the API does not come back at the next start.
CREATE TABLE model_seeds (
    model        text NOT NULL,
    version      integer NOT NULL,
    imported_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, version)
);

-- The actual state. A replica (host:pid:start, as workers.id) writes its row every few
-- seconds; one not seen for a while is gone (the listing leaves it out, the others delete
-- it). serving: it runs models (roles all and worker); api replicas do not.
CREATE TABLE model_replicas (
    replica     text PRIMARY KEY,
    role        text NOT NULL CHECK (role IN ('all', 'api', 'worker')),
    serving     boolean NOT NULL,
    generation  bigint NOT NULL DEFAULT 0,   -- the store generation it has converged to
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE model_replica_versions (
    replica     text NOT NULL REFERENCES model_replicas ON DELETE CASCADE,
    model       text NOT NULL,
    version     integer NOT NULL,
    state       text NOT NULL CHECK (state IN ('available', 'loaded', 'failed', 'unloaded')),
    reason      text,
    devices     jsonb NOT NULL DEFAULT '[]',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (replica, model, version),
    FOREIGN KEY (model, version) REFERENCES model_versions ON DELETE CASCADE
);

-- "The desired state changed": the generation moves and every replica is told, with the
-- model's name as payload (gpujobd_models), whichever path changed it.
CREATE FUNCTION gj_models_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed text;
BEGIN
    IF TG_TABLE_NAME = 'models' THEN
        changed := CASE WHEN TG_OP = 'DELETE' THEN OLD.name ELSE NEW.name END;
    ELSE
        changed := CASE WHEN TG_OP = 'DELETE' THEN OLD.model ELSE NEW.model END;
    END IF;
    UPDATE model_store SET generation = generation + 1;
    PERFORM pg_notify('gpujobd_models', changed);
    RETURN NULL;
END $$;
CREATE TRIGGER models_changed AFTER INSERT OR UPDATE OR DELETE ON models
    FOR EACH ROW EXECUTE FUNCTION gj_models_changed();
CREATE TRIGGER model_versions_changed AFTER INSERT OR UPDATE OR DELETE ON model_versions
    FOR EACH ROW EXECUTE FUNCTION gj_models_changed();
