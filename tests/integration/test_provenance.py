"""Issue 26 over real HTTPS: each attempt records what determines its result (gpujobd's build,
the kind's version, device, libraries, the seed chosen when none was given, kept in the params),
GET /v1/jobs/{id}/provenance answers a Process Run Crate (JSON-LD, and a zip with its files),
a chained input points at the job that made it, POST /v1/jobs/{id}/rerun runs a job again and
reports whether it reproduced it: identical digests for every CPU kind (recon FBP, SART, FDK in
slabs, phantom, BRKGA network and TSP, infer on the demo model, whose record names each
convolution's implementation), a rerun on a second replica where oneDNN is off says what
differed (the library, each convolution's implementation) and that the promise did not cover
it, 409 naming an input whose blob is gone, 404 for another tenant."""
import csv
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402

SRC = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(SRC, "tests", "brkga", "data")
PROFILE = "https://w3id.org/ro/wfrun/process/0.5"
H = SRV = C = None

PAR = {"type": "parallel2d", "angles_deg": {"start": 0, "step": 4, "count": 45}, "detector": {"cols": 48, "spacing_u": 1.0}}
VOL = {"nx": 32, "ny": 32, "voxel_mm": 1.0}
CONE = {"type": "cone3d", "angles_deg": {"start": 0, "step": 12, "count": 30},
        "detector": {"cols": 32, "rows": 24, "spacing_u": 3.0, "spacing_v": 3.0},
        "source_origin_mm": 500, "source_detector_mm": 1000}
VOL3 = {"nx": 16, "ny": 16, "nz": 16, "voxel_mm": 3.0}


def setup():
    global H, SRV, C
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "2"])
    C = SRV.client()


def tenant_key(tenant):
    return C.json("POST", "/v1/api-keys", {"tenant": tenant, "label": tenant}, expect=201)["key"]


def run(kind, params, inputs=None, timeout=120):
    job = C.submit(kind, params, inputs=inputs)
    job = C.wait_job(job["id"], timeout=timeout)
    assert job["state"] == "succeeded", job
    return job


def crate_of(job_id, client=None):
    r = (client or C).request("GET", f"/v1/jobs/{job_id}/provenance")
    assert r.status == 200, r
    assert r.headers["content-type"].startswith("application/ld+json"), r.headers
    return r.json()


def entities(crate):
    return {e["@id"]: e for e in crate["@graph"]}


def types(e):
    t = e.get("@type", [])
    return t if isinstance(t, list) else [t]


def ids(v):
    return [x["@id"] for x in (v if isinstance(v, list) else [v])]


def action_of(crate, job_id):
    return entities(crate)["#action-" + job_id]


def env_of(crate, job_id):
    g = entities(crate)
    return {g[i]["name"]: g[i]["value"] for i in ids(action_of(crate, job_id)["environment"])}


def outputs_by_digest(job_id):
    out = C.json("GET", f"/v1/jobs/{job_id}/outputs", expect=200)
    items = out["outputs"] if isinstance(out, dict) else out
    return {o["name"]: o for o in items}


def rerun(job, timeout=120):
    r = C.request("POST", f"/v1/jobs/{job['id']}/rerun")
    assert r.status == 201, r
    again = r.json()
    assert again["rerun_of"] == job["id"] and again["kind"] == job["kind"], again
    assert again["params"] == job["params"], (again["params"], job["params"])
    done = C.wait_job(again["id"], timeout=timeout)
    assert done["state"] == "succeeded", done
    return done


def assert_identical(job, label):
    again = rerun(job)
    rep = again["reproduction"]
    assert again["reproduced"] == "identical", (label, rep)
    assert rep["compared"] and rep["promised"] is True, (label, rep)
    return again


def test_crate_of_a_job():
    """The crate's required entities: the metadata descriptor (RO-Crate 1.1), a root dataset
    that conforms to the profile and mentions the action; the action's instrument (the kind,
    part of gpujobd with its build), object (the params), result (each output by digest),
    agent (the tenant, never the key), times, status and the recorded environment."""
    job = run("phantom", {"geometry": PAR, "volume": VOL})
    crate = crate_of(job["id"])
    g = entities(crate)
    assert "https://w3id.org/ro/crate/1.1/context" in crate["@context"], crate["@context"]
    meta = g["ro-crate-metadata.json"]
    assert meta["conformsTo"]["@id"] == "https://w3id.org/ro/crate/1.1" and meta["about"]["@id"] == "./"
    root = g["./"]
    assert "Dataset" in types(root) and PROFILE in ids(root["conformsTo"]), root
    assert "CreativeWork" in types(g[PROFILE]), g[PROFILE]
    action = action_of(crate, job["id"])
    assert action["@id"] in ids(root["mentions"]) and "CreateAction" in types(action), action
    kind = g[action["instrument"]["@id"]]
    assert "SoftwareApplication" in types(kind) and kind["name"] == "phantom" and kind["version"] == "1", kind
    app = g[kind["isPartOf"]["@id"]]
    assert app["name"] == "gpujobd" and app["softwareVersion"] and app["version"], app
    assert action["actionStatus"]["@id"] == "http://schema.org/CompletedActionStatus", action
    assert action["startTime"] and action["endTime"] >= action["startTime"], action
    agent = g[action["agent"]["@id"]]
    assert "Organization" in types(agent) and agent["name"], agent
    assert C.key not in json.dumps(crate), "the crate holds no API key"
    params = {g[i]["name"]: g[i]["value"] for i in ids(action["object"]) if "PropertyValue" in types(g[i])}
    assert json.loads(params["geometry"]) == PAR, params
    outs = outputs_by_digest(job["id"])
    results = [g[i] for i in ids(action["result"])]
    assert sorted(f["name"] for f in results) == sorted(outs), (results, outs)
    for f in results:
        assert "File" in types(f) and f["@id"] in ids(root["hasPart"]), f
        body = C.request("GET", f"/v1/jobs/{job['id']}/outputs/{f['name']}").body
        assert f["sha256"] == hashlib.sha256(body).hexdigest() and f["contentSize"] == len(body), f
    env = env_of(crate, job["id"])
    assert env["kind.name"] == "phantom" and env["device.type"] == "cpu" and env["device.model"], env
    assert env["gpujobd.build"] == app["version"] and env["libraries.jansson"], env
    kinds = {k["name"]: k for k in C.json("GET", "/v1/kinds", expect=200)["kinds"]}
    assert kinds["phantom"]["version"] == "1" and kinds["phantom"]["bit_identical_on"] == ["cpu"], kinds["phantom"]
    assert kinds["brkga"]["bit_identical_on"] == ["cpu", "gpu"], kinds["brkga"]


def test_seed_chosen_at_submit_is_kept_and_recorded():
    """BRKGA without a seed: the one chosen at submit is in the job's params (so every attempt
    and a rerun use it) and in the attempt's recorded environment."""
    job = C.submit("brkga", {"decoder": "tsp", "population_size": 40, "max_generations": 20},
                   inputs={"tsp": C.upload(open(os.path.join(DATA, "burma14.tsp"), "rb").read())["id"]})
    seed = job["params"].get("seed")
    assert isinstance(seed, int) and 0 <= seed < 2 ** 53, job["params"]
    job = C.wait_job(job["id"], timeout=120)
    assert job["state"] == "succeeded", job
    assert env_of(crate_of(job["id"]), job["id"])["seed"] == seed
    rec = H.sql(f"SELECT attempt, environment->>'seed' FROM job_attempt_environments WHERE job_id = '{job['id']}'")
    assert rec == [["1", str(seed)]], rec
    assert_identical(job, "brkga tsp, seed chosen at submit")


def test_chained_input_points_at_upstream_output():
    """A recon whose projections are a phantom job's output: its input File carries that
    output's digest, and is among the results of the phantom's action in the crate."""
    ph = run("phantom", {"geometry": PAR, "volume": VOL})
    rc = run("recon", {"algorithm": "fbp", "geometry": PAR, "volume": VOL},
             inputs={"projections": {"job": ph["id"], "output": "projections.nrrd"}})
    crate = crate_of(rc["id"])
    g = entities(crate)
    action = action_of(crate, rc["id"])
    inputs = [g[i] for i in ids(action["object"]) if "File" in types(g[i])]
    assert [f["name"] for f in inputs] == ["projections"], inputs
    want = outputs_by_digest(ph["id"])["projections.nrrd"]
    assert inputs[0]["sha256"] == want["sha256"] and inputs[0]["contentSize"] == want["size"], (inputs, want)
    up = g["#action-" + ph["id"]]
    assert inputs[0]["@id"] in ids(up["result"]) and g[up["instrument"]["@id"]]["name"] == "phantom", up
    seen = read_with_ro_crate(crate)
    mine = [a for a in seen["actions"] if a["id"] == "#action-" + rc["id"]][0]
    assert [o["sha256"] for o in mine["objects"] if "File" in o["types"]] == [want["sha256"]], mine


def test_reruns_of_cpu_kinds_are_identical():
    """Every CPU kind run again gives the same bytes (save the outputs that record the run's
    times, which are named as not compared)."""
    ph = run("phantom", {"geometry": PAR, "volume": VOL})
    again = assert_identical(ph, "phantom")
    assert {"name": "report.json", "why": "it records the run itself (times), not only its result"} \
        in again["reproduction"]["not_compared"], again["reproduction"]
    proj = {"projections": {"job": ph["id"], "output": "projections.nrrd"}}
    assert_identical(run("recon", {"algorithm": "fbp", "geometry": PAR, "volume": VOL}, proj), "recon fbp")
    assert_identical(run("recon", {"algorithm": "sart", "iterations": 2, "geometry": PAR, "volume": VOL}, proj),
                     "recon sart")
    tsp = C.upload(open(os.path.join(DATA, "burma14.tsp"), "rb").read())["id"]
    assert_identical(run("brkga", {"decoder": "tsp", "population_size": 40, "max_generations": 20, "seed": 3},
                         {"tsp": tsp}), "brkga tsp")
    net = {n: C.upload(open(os.path.join(DATA, f), "rb").read())["id"]
           for n, f in (("network", "net12.xml"), ("demands", "dem12.xml"), ("params", "params12.xml"))}
    assert_identical(run("brkga", {"primary_stop": "generations", "max_generations": 15, "seed": 7}, net),
                     "brkga network")


def test_fdk_in_slabs_crate_and_rerun():
    """A cone FDK split into z-slabs (sub-tasks): its crate has each child's action with its
    outputs, and its rerun is identical."""
    ph = run("phantom", {"phantom": "kak-slaney", "geometry": CONE, "volume": VOL3})
    limit = 2 * (30 * 32 * 24 * 4) + (320 << 20) + 16 * 16 * 4 * 6   # 6 slices a slab (rc_estimate_bytes)
    fdk = run("recon", {"algorithm": "fdk", "geometry": CONE, "volume": VOL3, "max_device_bytes": limit},
              {"projections": {"job": ph["id"], "output": "projections.nrrd"}})
    crate = crate_of(fdk["id"])
    g = entities(crate)
    children = H.sql(f"SELECT id FROM jobs WHERE parent_id = '{fdk['id']}'")
    assert len(children) >= 2, children
    for (cid,) in children:
        a = g["#action-" + cid]
        assert a["@id"] in ids(g["./"]["mentions"]) and ids(a["result"]), a
        # a slab reads its parent's projections: the same blob is one File, in the zip once
        assert "inputs/projections" in ids(a["object"]), a["object"]
    z = zipfile.ZipFile(io.BytesIO(C.request("GET", f"/v1/jobs/{fdk['id']}/provenance?format=zip").body))
    names = z.namelist()
    assert names.count("inputs/projections") == 1 and not [n for n in names if n.endswith("/inputs/projections")], names
    files = {e["@id"] for e in g.values() if "File" in types(e)}
    assert files == set(names) - {"ro-crate-metadata.json"}, (files, names)
    assert_identical(fdk, "recon fdk in slabs")
    seen = read_with_ro_crate(crate)
    actions = {a["id"]: a for a in seen["actions"]}
    assert set(actions) >= {"#action-" + fdk["id"]} | {"#action-" + cid for (cid,) in children}, actions.keys()


def read_with_ro_crate(crate):
    """The npm ro-crate library's reading of crate (tests/ro_crate/read_crate.mjs, run through
    tests/deploy/run_node.sh, which installs its package-lock.json), checked against the
    RO-Crate 1.1 root requirements and the Process Run Crate's entities."""
    path = os.path.join(tempfile.mkdtemp(prefix="gj-crate-"), "ro-crate-metadata.json")
    with open(path, "w") as f:
        json.dump(crate, f)
    here = os.path.join(SRC, "tests", "ro_crate")
    r = subprocess.run(["sh", os.path.join(SRC, "tests", "deploy", "run_node.sh"), os.path.join(here, "read_crate.mjs"),
                        path], env=dict(os.environ, GJ_NODE_PACKAGES=here), capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert seen["errors"] == [], seen["errors"]
    assert len(seen["passed"]) == 6, seen["passed"]
    assert PROFILE in seen["conformsTo"] and seen["profile"]["version"] == "0.5", seen
    for a in seen["actions"]:
        assert "CreateAction" in a["types"], a
        assert [i["types"] for i in a["instrument"]] == [["SoftwareApplication"]], a
        assert a["instrument"][0]["partOf"][0][0] == "gpujobd", a
        assert a["agent"] and "Organization" in a["agent"][0]["types"], a
        assert a["endTime"] >= a["startTime"] and a["actionStatus"], a
        for f in a["results"] + [o for o in a["objects"] if "File" in o["types"]]:
            assert re.fullmatch(r"[0-9a-f]{64}", f["sha256"] or ""), f
    return seen


def make_dicom(tmp):
    from PIL import Image
    import numpy as np
    rng = np.random.RandomState(5)
    y, x = np.mgrid[0:96, 0:80]
    img = 60 + 120 * np.exp(-(((x - 40) / 27) ** 2 + ((y - 48) / 38) ** 2)) + rng.normal(0, 8, size=(96, 80))
    bmp, dcm = os.path.join(tmp, "x.bmp"), os.path.join(tmp, "x.dcm")
    Image.fromarray(np.clip(img, 0, 255).astype("uint8"), "L").save(bmp)
    subprocess.run(["img2dcm", "-i", "BMP", bmp, dcm], check=True, capture_output=True)
    subprocess.run(["dcmodify", "-nb", "-i", "(0008,0060)=DX", "-i", "(0018,0015)=CHEST", "-i", "(0018,5101)=PA",
                    dcm], check=True, capture_output=True)
    return open(dcm, "rb").read()


def have_onednn():
    """Whether the server's binary links oneDNN (meson finds libdnnl-dev where it is installed)."""
    import harness
    out = subprocess.run(["ldd", harness.GPUJOBD], capture_output=True, text=True).stdout
    return "libdnnl" in out


def test_infer_rerun_is_identical_and_records_the_model():
    blob = C.upload(make_dicom(tempfile.mkdtemp(prefix="gj-prov-")), "application/dicom")["id"]
    job = run("infer", {"model": "chest-xray-demo"}, {"dicom": blob})
    assert "scores.csv" in outputs_by_digest(job["id"]), "the scores alone, for a rerun to compare"
    env = env_of(crate_of(job["id"]), job["id"])
    assert re.fullmatch(r"[0-9a-f]{64}", env["model.sha256"]) and env["model.name"] == "chest-xray-demo", env
    assert env["libraries.openblas"] and env["precision"] == "fp32", env
    # oneDNN convolves where the build has it (the server's default), and the record says which
    if os.environ.get("GJ_ONNX_DNNL") != "0" and have_onednn():
        assert re.fullmatch(r"\d+\.\d+\.\d+ \(.*\)", env.get("libraries.onednn", "")), env
    # how each convolution shape was computed, as the run chose it: oneDNN's kernel, or ours
    assert env["tf32"] is False, env
    check_convolutions(env["convolutions"], "onednn " if "libraries.onednn" in env else "gpujobd ")
    assert_identical(job, "infer")


SHAPE = r"x \d+x\d+x\d+x\d+ w \d+x\d+x\d+x\d+ pads \d+,\d+,\d+,\d+ strides \d+,\d+ dilations \d+,\d+ group \d+"


def check_convolutions(convs, prefix):
    """Every shape of the record (the crate's value: its JSON text) computed by prefix's
    implementation, named (never unknown)."""
    convs = json.loads(convs)
    assert isinstance(convs, dict) and convs, convs
    for shape, how in convs.items():
        assert re.fullmatch(SHAPE, shape), shape
        assert how.startswith(prefix) and len(how) > len(prefix) and "unknown" not in how, (shape, how)


def test_rerun_refused_when_an_input_blob_is_gone():
    blob = C.upload(b"some input bytes")["id"]
    job = run("noop", {"output_bytes": 16}, {"input": blob})
    assert C.request("DELETE", f"/v1/blobs/{blob}").status == 204
    r = C.request("POST", f"/v1/jobs/{job['id']}/rerun")
    assert r.status == 409, r
    body = r.json()
    assert body["field"] == "inputs.input" and blob in body["detail"], body
    assert hashlib.sha256(b"some input bytes").hexdigest() in body["detail"], body
    # the crate still describes the input by digest
    g = entities(crate_of(job["id"]))
    f = g["inputs/input"]
    assert f["sha256"] == hashlib.sha256(b"some input bytes").hexdigest() and f["contentSize"] == 16, f


def test_zip_holds_the_crate_and_its_files():
    blob = C.upload(b"zip me")["id"]
    job = run("noop", {"output_bytes": 100000}, {"input": blob})
    r = C.request("GET", f"/v1/jobs/{job['id']}/provenance?format=zip")
    assert r.status == 200 and r.headers["content-type"] == "application/zip", r
    z = zipfile.ZipFile(io.BytesIO(r.body))
    assert z.testzip() is None
    names = set(z.namelist())
    crate = json.loads(z.read("ro-crate-metadata.json"))
    g = entities(crate)
    files = [e for e in g.values() if "File" in types(e)]
    assert files and {f["@id"] for f in files} == names - {"ro-crate-metadata.json"}, (names, files)
    for f in files:
        data = z.read(f["@id"])
        assert hashlib.sha256(data).hexdigest() == f["sha256"] and len(data) == f["contentSize"], f
    assert C.request("GET", f"/v1/jobs/{job['id']}/provenance?format=tar").status == 400


def test_cli_rerun():
    """`gpujobd rerun ID --wait` prints the new job's id and says it reproduced the original."""
    job = run("phantom", {"geometry": PAR, "volume": VOL})
    env = dict(os.environ, GPUJOBD_SERVER=f"https://127.0.0.1:{SRV.port}",
               GPUJOBD_CACERT=os.path.join(SRV.data_dir, "tls", "cert.pem"), GPUJOBD_API_KEY=C.key)
    gpujobd = os.environ.get("GPUJOBD", "gpujobd")
    r = subprocess.run([gpujobd, "rerun", job["id"], "--wait"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r
    new = r.stdout.strip()
    assert C.json("GET", f"/v1/jobs/{new}", expect=200)["rerun_of"] == job["id"]
    assert f"reproduced job {job['id']}: identical" in r.stderr, r.stderr
    gone = subprocess.run([gpujobd, "rerun", "00000000-0000-4000-8000-000000000000"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert gone.returncode == 2 and "HTTP 404" in gone.stderr, gone


def test_rerun_idempotency_key():
    """A rerun retried with the same Idempotency-Key gets the rerun it made; the key on another
    job's rerun is refused."""
    job = run("noop", {"output_bytes": 8})
    other = run("noop", {"output_bytes": 9})
    hdr = {"Idempotency-Key": "rerun-" + job["id"]}
    first = C.request("POST", f"/v1/jobs/{job['id']}/rerun", headers=hdr)
    again = C.request("POST", f"/v1/jobs/{job['id']}/rerun", headers=hdr)
    assert first.status == 201 and again.status == 200, (first, again)
    assert first.json()["id"] == again.json()["id"] and again.json()["rerun_of"] == job["id"], again.json()
    r = C.request("POST", f"/v1/jobs/{other['id']}/rerun", headers=hdr)
    assert r.status == 409 and r.json()["field"] == "Idempotency-Key", r
    assert C.request("POST", f"/v1/jobs/{job['id']}/rerun", headers={"Idempotency-Key": "a b"}).status == 400
    assert H.scalar(f"SELECT count(*) FROM job_reruns WHERE rerun_of = '{job['id']}'") == "1"


def test_crate_of_a_job_not_run_yet():
    """A job waiting for another's output has a crate already: its action is potential, its
    chained input named, nothing recorded yet."""
    up = C.submit("noop", {"sleep_ms": 1500, "output_bytes": 8})
    waiting = C.submit("noop", {}, inputs={"input": {"job": up["id"], "output": "data.bin"}})
    a = action_of(crate_of(waiting["id"]), waiting["id"])
    assert a["actionStatus"]["@id"] == "http://schema.org/PotentialActionStatus" and a["environment"] == [], a
    assert "startTime" not in a and "endTime" not in a, a
    C.wait_job(waiting["id"], timeout=60)


def test_running_job_recorded_within_seconds_of_its_start():
    """The worker writes an attempt's record with its next statement (attempt_record.h): a short
    job's end, a long one's log flush a second after its start. So a running job's crate has its
    environment while it runs, timed when the attempt started."""
    job = C.submit("noop", {"sleep_ms": 6000})
    deadline = time.time() + 4.5
    env = []
    while time.time() < deadline and not env:
        time.sleep(0.2)
        a = action_of(crate_of(job["id"]), job["id"])
        env = a.get("environment", [])
    assert env, "no attempt recorded 4.5 s into a 6 s run"
    assert C.json("GET", f"/v1/jobs/{job['id']}", expect=200)["state"] == "running"
    started = H.scalar(f"SELECT started_at FROM jobs WHERE id = '{job['id']}'")
    lag = float(H.scalar(f"SELECT extract(epoch FROM recorded_at - '{started}'::timestamptz) "
                         f"FROM job_attempt_environments WHERE job_id = '{job['id']}'"))
    assert -1.0 < lag < 1.0, lag   # gathered at the start (clocks: the worker's and the database's)
    done = C.wait_job(job["id"], timeout=60)
    assert done["state"] == "succeeded", done
    assert H.scalar(f"SELECT count(*) FROM job_attempt_environments WHERE job_id = '{job['id']}'") == "1"


def test_another_tenant_sees_nothing():
    job = run("noop", {"output_bytes": 8})
    other = SRV.client(key=tenant_key("prov-other"))
    assert other.request("GET", f"/v1/jobs/{job['id']}/provenance").status == 404
    assert other.request("GET", f"/v1/jobs/{job['id']}/provenance?format=zip").status == 404
    assert other.request("POST", f"/v1/jobs/{job['id']}/rerun").status == 404
    assert H.scalar(f"SELECT count(*) FROM job_reruns WHERE rerun_of = '{job['id']}'") == "0"


def test_server_stops_clean():
    """Under ASan/UBSan (CI's second run) a leak or an error in these routes shows here."""
    assert_stopped_clean(SRV)


def test_rerun_on_a_replica_without_onednn():
    """A rerun on a replica whose CPU inference does not use oneDNN (GJ_ONNX_DNNL=0: our
    im2col and OpenBLAS's sgemm convolve) says what differed: the library and each shape's
    implementation. After test_server_stops_clean: replica A runs the original and stops,
    then B, the only replica with workers, runs the rerun (on the same database)."""
    if not have_onednn():
        print("skipped: this build has no oneDNN, so no replica can differ in it")
        return
    a = H.start_server(["--cpu-workers", "1"])
    blob = a.client(key=SRV.admin_key).upload(make_dicom(tempfile.mkdtemp(prefix="gj-prov-")),
                                              "application/dicom")["id"]
    job = a.client(key=SRV.admin_key).submit("infer", {"model": "chest-xray-demo"}, inputs={"dicom": blob})
    job = a.client(key=SRV.admin_key).wait_job(job["id"], timeout=120)
    assert job["state"] == "succeeded", job
    assert_stopped_clean(a)
    b = H.start_server(["--cpu-workers", "1"], env={"GJ_ONNX_DNNL": "0"})
    cb = b.client(key=SRV.admin_key)
    r = cb.request("POST", f"/v1/jobs/{job['id']}/rerun")
    assert r.status == 201, r
    again = cb.wait_job(r.json()["id"], timeout=120)
    assert again["state"] == "succeeded", again
    env_a = env_of(crate_of(job["id"], cb), job["id"])
    env_b = env_of(crate_of(again["id"], cb), again["id"])
    check_convolutions(env_a["convolutions"], "onednn ")
    check_convolutions(env_b["convolutions"], "gpujobd ")
    assert json.loads(env_a["convolutions"]).keys() == json.loads(env_b["convolutions"]).keys(), (env_a, env_b)
    rep = again["reproduction"]
    diffs = {d["path"]: d for d in rep["environment_differences"]}
    assert diffs["libraries.onednn"]["original"] == env_a["libraries.onednn"], diffs
    assert diffs["libraries.onednn"]["rerun"] is None, diffs
    for shape in json.loads(env_a["convolutions"]):
        d = diffs["convolutions." + shape]
        assert d["original"].startswith("onednn ") and d["rerun"].startswith("gpujobd "), d
    # the kind's promise (identical bits on the CPU) assumes the same implementations
    assert rep["promised"] is False and rep["compared"] == ["scores.csv"], rep
    # oneDNN and our im2col + sgemm sum in other orders: the scores may differ in the last
    # bits, never more than float32 rounding over the model's few layers
    scores = [scores_of(cb, j["id"]) for j in (job, again)]
    same = scores[0] == scores[1]
    assert again["reproduced"] == ("identical" if same else "different"), rep
    assert [d["name"] for d in rep["differing_outputs"]] == ([] if same else ["scores.csv"]), rep
    assert scores[0].keys() == scores[1].keys(), scores
    for k, v in scores[0].items():
        assert abs(v - scores[1][k]) <= 1e-6, (k, v, scores[1][k])
    a_rerun = action_of(crate_of(again["id"], cb), again["id"])
    assert a_rerun["isBasedOn"]["@id"] == "#action-" + job["id"], a_rerun
    assert "reproduced: " + again["reproduced"] in a_rerun["description"], a_rerun
    assert_stopped_clean(b)


def assert_stopped_clean(srv):
    code = srv.terminate()
    log = srv.log_text()
    assert code == 0, log[-3000:]
    assert "Sanitizer" not in log and "runtime error" not in log, log[-3000:]


def scores_of(client, job_id):
    """scores.csv as {(row, column): score} (its numeric cells)."""
    text = client.request("GET", f"/v1/jobs/{job_id}/outputs/scores.csv").body.decode()
    out = {}
    for i, row in enumerate(csv.reader(io.StringIO(text))):
        for j, cell in enumerate(row):
            try:
                out[(i, j)] = float(cell)
            except ValueError:
                pass
    assert out, text
    return out


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_crate_of_a_job, test_seed_chosen_at_submit_is_kept_and_recorded,
                   test_chained_input_points_at_upstream_output, test_reruns_of_cpu_kinds_are_identical,
                   test_fdk_in_slabs_crate_and_rerun, test_infer_rerun_is_identical_and_records_the_model,
                   test_rerun_refused_when_an_input_blob_is_gone,
                   test_zip_holds_the_crate_and_its_files, test_cli_rerun, test_rerun_idempotency_key, test_crate_of_a_job_not_run_yet,
                   test_running_job_recorded_within_seconds_of_its_start,
                   test_another_tenant_sees_nothing, test_server_stops_clean,
                   test_rerun_on_a_replica_without_onednn])
    finally:
        H.close()
