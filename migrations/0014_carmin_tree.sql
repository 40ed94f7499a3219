-- CARMIN's tree holds together (issue 28): a path's parent is a path of the same tenant (a
-- directory's row, or home, which has none), so a file cannot outlive its directory when a
-- PUT races the directory's DELETE: the later of the two fails on the foreign key (the
-- service answers 409 or tries again, service/carmin/carmin_fs.h CARMIN_FS_RACE).
-- Paths such a race left without their directory get it back first: nothing is dropped.
INSERT INTO carmin_paths (tenant_id, path, parent)
SELECT DISTINCT p.tenant_id, '/vip/Home/' || array_to_string(s.parts[1:i], '/'),
       CASE WHEN i = 1 THEN '/vip/Home' ELSE '/vip/Home/' || array_to_string(s.parts[1:i - 1], '/') END
FROM carmin_paths p
CROSS JOIN LATERAL (SELECT string_to_array(substr(p.path, 11), '/') AS parts) s
CROSS JOIN LATERAL generate_series(1, cardinality(s.parts) - 1) AS i
ON CONFLICT (tenant_id, path) DO NOTHING;

ALTER TABLE carmin_paths
    ADD CONSTRAINT carmin_paths_parent_of_path CHECK (parent = regexp_replace(path, '/[^/]+$', '')),
    ADD COLUMN parent_dir text GENERATED ALWAYS AS (NULLIF(parent, '/vip/Home')) STORED,
    ADD CONSTRAINT carmin_paths_parent_exists FOREIGN KEY (tenant_id, parent_dir)
        REFERENCES carmin_paths (tenant_id, path);
CREATE INDEX carmin_paths_parent_dir ON carmin_paths (tenant_id, parent_dir) WHERE parent_dir IS NOT NULL;

-- Where an execution's results go: a directory of its own made when it is created, under its
-- results_location (which the client named, made then if missing), so results never take the
-- place of a user's file. NULL for executions made before: their results_location.
ALTER TABLE carmin_executions ADD COLUMN results_dir text;
