"""Several `gpujobd serve` replicas on one PostgreSQL share one model repository
(issue 13): a model uploaded through one replica is served by /v2 on another, an
unload through a third (an api replica, which runs no models) reaches every replica,
each converging within a bound, and /v1/models shows each replica's state of each
version; a replica started later picks the models up; a replica whose cached copy of
a model's files was corrupted fetches them again by digest; a worker replica (no
HTTP listener) converges and reports like the others. A version's files are stored where blobs
are (objects of the store under GJ_TEST_BLOB_STORE=s3: test_replicas_s3) and go with it. Every replica is given
the admin key of one file (GPUJOBD_ADMIN_KEY_FILE), as the Kubernetes overlay does: the
first registers it, none makes or logs one."""
import hashlib
import json
import os
import sys
import time

import jsonschema
import numpy as np
import yaml

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, multipart_form, run_tests  # noqa: E402

SRC = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
DEMO = "chest-xray-demo"
SHARED = "shared-demo"
SHAPE = (1, 1, 256, 256)
# The bound each replica gets to apply a change made through another: NOTIFY does it in
# milliseconds; the periodic resync (GJ_MODEL_RESYNC_MS, 5 s) is the fallback.
CONVERGE_S = 10

H = None
A = B = C = D = W = None   # A, B, D: role all (run models); C: role api; W: role worker (no HTTP)
KEY = None


def replica_env():
    """What every replica is given, as the production overlay gives each pod: the admin
    key of one Secret (GPUJOBD_ADMIN_KEY_FILE), one inference thread."""
    return {"GPUJOBD_INFER_THREADS": "1", "GPUJOBD_ADMIN_KEY_FILE": os.path.join(H.tmp, "admin.key")}


def setup():
    global H, A, B, C, KEY
    H = Harness()
    KEY = "gjk_" + hashlib.sha256(b"replicas").digest().hex()[:43]
    with open(os.path.join(H.tmp, "admin.key"), "w") as f:
        f.write(KEY + "\n")
    os.chmod(os.path.join(H.tmp, "admin.key"), 0o400)
    args = ["--cpu-workers", "1"]
    if H.blob_store == "s3":   # the maintenance pass every 5 s (a deleted version's objects)
        args += ["--s3-stale-upload-seconds", "10"]
    A = H.start_server(args, env=replica_env())
    B = H.start_server(args, env=replica_env())
    C = H.start_server(args + ["--role", "api"], env=replica_env())
    for s in (A, B, C):   # the first registered the key of the file; none made one
        assert not os.path.exists(os.path.join(s.data_dir, "admin.key")), s.data_dir


def openapi_check(body, path, method="get", status="200"):
    """body is what openapi/openapi.yaml says the route answers (the views documented
    there, their per-replica fields included)."""
    with open(os.path.join(SRC, "openapi", "openapi.yaml")) as f:
        spec = yaml.safe_load(f)
    schema = spec["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
    resolver = jsonschema.RefResolver.from_schema(spec)
    jsonschema.Draft202012Validator(schema, resolver=resolver).validate(body)


def client(srv):
    return srv.client(key=KEY)


def infer(srv, x, model=SHARED, expect=200):
    body = {"inputs": [{"name": "image", "shape": list(x.shape), "datatype": "FP32",
                        "data": x.reshape(-1).tolist()}]}
    r = client(srv).request("POST", f"/v2/models/{model}/infer", json=body, timeout=120)
    assert r.status == expect, f"{srv.port}: {r.status} {r.body[:300]!r}"
    return np.array(r.json()["outputs"][0]["data"], dtype=np.float64) if expect == 200 else r


def version_of(srv, model, version=1):
    models = {m["name"]: m for m in client(srv).json("GET", "/v1/models", expect=200)["models"]}
    if model not in models:
        return None
    return {v["version"]: v for v in models[model]["versions"]}.get(version)


def wait_until(what, check, bound=CONVERGE_S):
    """Polls check() until it returns a true value; returns (value, seconds taken)."""
    t0 = time.time()
    last = None
    while time.time() - t0 < bound:
        last = check()
        if last:
            return last, time.time() - t0
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {bound}s (last: {last})")


def replica_states(srv, model, version=1):
    """{replica id: state} as /v1/models on srv shows them, or None when absent."""
    v = version_of(srv, model, version)
    return None if v is None else {r["replica"]: r["state"] for r in v["replicas"]}


def all_states(srv, model, want, n):
    s = replica_states(srv, model)
    return s if s is not None and len(s) == n and set(s.values()) == {want} else None


def converged_everywhere(servers):
    """Every replica's /v1/models says every live replica has applied the last change."""
    views = [client(s).json("GET", "/v1/models", expect=200) for s in servers]
    return all(v.get("converged") is True for v in views) and len({v["generation"] for v in views}) == 1


def demo_files():
    with open(os.path.join(SRC, "models", DEMO, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(SRC, "models", DEMO, "1", "model.onnx"), "rb") as f:
        onnx = f.read()
    cfg["name"] = SHARED
    return onnx, json.dumps(cfg).encode()


# ---- tests ---------------------------------------------------------------------------

def test_upload_on_one_served_on_another():
    onnx, cfg = demo_files()
    body, ct = multipart_form([("model", "model.onnx", onnx), ("config", "config.json", cfg)])
    r = client(A).request("PUT", f"/v1/models/{SHARED}/versions/1", body=body, headers={"Content-Type": ct})
    assert r.status == 201, r
    # B learns of it and loads it on first use; C (api) knows it and says where it runs
    _, took = wait_until("B lists the upload", lambda: version_of(B, SHARED))
    print(f"  B listed the model {took:.2f}s after the upload through A")
    x = np.random.RandomState(7).normal(0, 1, size=SHAPE).astype(np.float32)
    got_b = infer(B, x)
    got_a = infer(A, x)
    assert np.allclose(got_a, got_b, rtol=1e-5, atol=1e-6), (got_a, got_b)
    r = infer(C, x, expect=503)
    assert b"worker" in r.body or b"api" in r.body, r.body
    wait_until("every replica converged", lambda: converged_everywhere([A, B, C]))
    files_where_blobs_go(SHARED, 1)


def files_where_blobs_go(model, version):
    """A version's files are stored where blobs are: objects of the store with --blob-store
    s3 (test_replicas_s3), each upload's record gone with the row; large objects otherwise."""
    rows = H.sql("SELECT coalesce(lo_oid::text, ''), coalesce(s3_key, '') FROM model_files"
                 f" WHERE model = '{model}' AND version = {version}")
    assert rows, model
    if H.blob_store == "s3":
        keys = set(H.s3.list_keys(H.bucket))
        for oid, key in rows:
            assert oid == "" and key.startswith("blobs/models/") and key in keys, (oid, key, keys)
        assert H.scalar("SELECT count(*) FROM blob_objects_unowned WHERE s3_key LIKE 'blobs/models/%'") == "0"
    else:
        assert all(oid and not key for oid, key in rows), rows
    return rows


def test_unload_on_a_third_reaches_all():
    load = client(A).json("POST", f"/v1/models/{SHARED}/load", expect=200)
    assert load["versions"][0]["desired"] == "loaded", load
    wait_until("A and B loaded", lambda: all_states(C, SHARED, "loaded", 2))
    t0 = time.time()
    r = client(C).json("POST", f"/v1/models/{SHARED}/unload?version=1", expect=200)
    assert r["versions"][0]["desired"] == "unloaded", r
    # each replica's own view, and the view through the others, within the bound
    for srv in (A, B, C):
        states, _ = wait_until(f"{srv.port} sees both serving replicas unloaded",
                               lambda: all_states(srv, SHARED, "unloaded", 2))
    took = time.time() - t0
    print(f"  every replica showed the unload {took:.2f}s after it was asked through C")
    assert took < CONVERGE_S, took
    ids = set(states)
    assert len(ids) == 2 and all(i.count(":") >= 2 for i in ids), ids   # host:pid:start
    for srv in (A, B):
        assert client(srv).request("GET", f"/v2/models/{SHARED}/ready").status != 200
    infer_refused_unloaded(B)
    wait_until("every replica converged", lambda: converged_everywhere([A, B, C]))
    view = client(C).json("GET", "/v1/models", expect=200)
    roles = sorted(rep["role"] for rep in view["replicas"])
    assert roles == ["all", "all", "api"], view["replicas"]
    openapi_check(view, "/v1/models")
    openapi_check(client(A).json("GET", "/v1/models", expect=200), "/v1/models")
    openapi_check(r, "/v1/models/{name}/unload", method="post")


def infer_refused_unloaded(srv):
    """/v2 infer of an unloaded version is refused, saying so (it is not loaded again)."""
    x = np.zeros(SHAPE, dtype=np.float32)
    body = {"inputs": [{"name": "image", "shape": list(x.shape), "datatype": "FP32",
                        "data": x.reshape(-1).tolist()}]}
    r = client(srv).request("POST", f"/v2/models/{SHARED}/infer", json=body, timeout=60)
    assert r.status >= 400 and b"unloaded" in r.body, (r.status, r.body[:300])


def test_replica_started_later_picks_models_up():
    global D, W
    D = H.start_server(["--cpu-workers", "1"], env=replica_env())
    v = version_of(D, SHARED)
    assert v is not None and v["desired"] == "unloaded", v
    assert D.client(key=KEY).request("GET", f"/v2/models/{SHARED}/ready").status != 200
    # a worker replica (the production overlay's GPU pods): no HTTP, seen through the others
    W = H.start_server(["--cpu-workers", "1", "--role", "worker"], env=replica_env(), wait=False)
    wait_until("the worker replica reports", lambda: all_states(A, SHARED, "unloaded", 4), bound=60)
    client(B).json("POST", f"/v1/models/{SHARED}/load", expect=200)
    wait_until("A, B, D and W loaded", lambda: all_states(A, SHARED, "loaded", 4))
    roles = sorted(r["role"] for r in client(D).json("GET", "/v1/models", expect=200)["replicas"])
    assert roles == ["all", "all", "all", "api", "worker"], roles
    x = np.random.RandomState(11).normal(0, 1, size=SHAPE).astype(np.float32)
    assert np.allclose(infer(D, x), infer(A, x), rtol=1e-5, atol=1e-6)


def cached_model_file(srv):
    digest = H.scalar(f"SELECT digest FROM model_versions WHERE model = '{SHARED}' AND version = 1")
    path = os.path.join(srv.data_dir, "model-cache", digest, "model.onnx")
    assert os.path.isfile(path), os.listdir(os.path.join(srv.data_dir, "model-cache"))
    return path


def test_corrupted_cache_fetched_again_by_digest():
    global D
    path = cached_model_file(D)
    want = H.scalar(f"SELECT encode(sha256, 'hex') FROM model_files WHERE model = '{SHARED}' "
                    "AND version = 1 AND path = 'model.onnx'")
    port, data_dir = D.port, D.data_dir
    assert D.terminate() == 0
    with open(path, "r+b") as f:        # same size, other bytes: only the digest can tell
        f.seek(os.path.getsize(path) // 2)
        f.write(b"\xde\xad\xbe\xef" * 16)
    with open(path, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() != want
    D = H.start_server(["--cpu-workers", "1"], env=replica_env(), data_dir=data_dir, port=port)
    wait_until("D loaded again", lambda: all_states(A, SHARED, "loaded", 4))
    with open(cached_model_file(D), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == want
    x = np.random.RandomState(13).normal(0, 1, size=SHAPE).astype(np.float32)
    assert np.allclose(infer(D, x), infer(B, x), rtol=1e-5, atol=1e-6)


def test_deleted_version_takes_its_files():
    """Deleting a version deletes its files' bytes: a large object at once, an object of the
    store by the maintenance pass (recorded as unowned by the same trigger as a blob's)."""
    onnx, cfg = demo_files()
    cfg = json.loads(cfg)
    cfg["name"] = "doomed-demo"
    body, ct = multipart_form([("model", "model.onnx", onnx), ("config", "config.json", json.dumps(cfg).encode())])
    r = client(A).request("PUT", "/v1/models/doomed-demo/versions/1", body=body, headers={"Content-Type": ct})
    assert r.status == 201, r
    rows = files_where_blobs_go("doomed-demo", 1)
    r = client(B).request("DELETE", "/v1/models/doomed-demo/versions/1")
    assert r.status in (200, 204), r
    if H.blob_store == "s3":
        keys = {key for _, key in rows}
        wait_until("the maintenance pass deleted the objects",
                   lambda: not keys & set(H.s3.list_keys(H.bucket)), bound=60)
    else:
        for oid, _ in rows:
            assert H.scalar(f"SELECT count(*) FROM pg_largeobject_metadata WHERE oid = {oid}") == "0", oid


def test_stopped_replica_leaves_the_view():
    assert D.terminate() == 0
    wait_until("D's reports gone", lambda: all_states(C, SHARED, "loaded", 3))


def test_logs_clean():
    for srv in (A, B, C, D, W):
        log = srv.log_text()
        assert KEY not in log and KEY[4:20] not in log, srv.data_dir
        for bad in ("ERROR", "AddressSanitizer", "runtime error"):
            assert bad not in log, (srv.data_dir, [l for l in log.splitlines() if bad in l][:5])


if __name__ == "__main__":
    setup()
    run_tests([test_upload_on_one_served_on_another, test_unload_on_a_third_reaches_all,
               test_replica_started_later_picks_models_up, test_corrupted_cache_fetched_again_by_digest,
               test_deleted_version_takes_its_files, test_stopped_replica_leaves_the_view, test_logs_clean])
