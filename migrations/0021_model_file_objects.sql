-- A model's files in the object store too (issue 30): with `--blob-store s3` a version's
-- files are objects of the bucket (s3_key), as blobs are; older files stay large objects
-- (lo_oid) and both are read.
ALTER TABLE model_files ALTER COLUMN lo_oid DROP NOT NULL;
ALTER TABLE model_files ADD COLUMN s3_key text;
ALTER TABLE model_files ADD CONSTRAINT model_files_one_place CHECK ((lo_oid IS NULL) <> (s3_key IS NULL));
-- A deleted file's object goes as a deleted blob's does: 0018's gj_blob_forget unlinks a large
-- object or records the key in blob_objects_unowned for the maintenance pass.
DROP TRIGGER model_files_unlink ON model_files;
CREATE TRIGGER model_files_forget AFTER DELETE ON model_files FOR EACH ROW EXECUTE FUNCTION gj_blob_forget();
