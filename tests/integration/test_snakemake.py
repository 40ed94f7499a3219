"""examples/snakemake run by Debian's real `snakemake` against a service this test starts: a
phantom, its FBP and SART reconstructions (taking the projections from the phantom's job, no
upload) and the PSNR table. Then a failing step: snakemake must see the job's failure."""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import GPUJOBD, Harness, run_tests  # noqa: E402

ROOT = os.environ.get("GJ_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
EXAMPLE = os.path.join(ROOT, "examples", "snakemake")
H = SRV = None
ENV = {}


def setup():
    global H, SRV, ENV
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "2"])
    key_file = os.path.join(H.tmp, "api.key")
    with open(key_file, "w") as f:
        f.write(SRV.admin_key + "\n")
    ENV = dict(os.environ, GPUJOBD=GPUJOBD, GPUJOBD_SERVER=f"https://127.0.0.1:{SRV.port}",
               GPUJOBD_CACERT=os.path.join(SRV.data_dir, "tls", "cert.pem"), GPUJOBD_KEY_FILE=key_file,
               HOME=H.tmp, XDG_CACHE_HOME=os.path.join(H.tmp, "cache"))
    ENV.pop("GPUJOBD_API_KEY", None)


def snakemake(workdir, *extra):
    return subprocess.run([shutil.which("snakemake") or "/usr/bin/snakemake", "-s", os.path.join(EXAMPLE, "Snakefile"),
                           "-d", workdir, "--cores", "2", "--quiet", *extra],
                          capture_output=True, text=True, env=ENV, timeout=300)


def test_pipeline_fbp_sart_psnr():
    wd = os.path.join(H.tmp, "wd")
    r = snakemake(wd, "--config", "run=ci")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line.split("\t") for line in open(os.path.join(wd, "results", "psnr.tsv")).read().splitlines()]
    assert rows[0] == ["volume", "psnr_db"] and [r[0] for r in rows[1:]] == ["fbp", "sart"], rows
    fbp, sart = float(rows[1][1]), float(rows[2][1])
    assert fbp > 25 and sart > 15, rows                  # real reconstructions of the phantom
    c = SRV.client()
    jobs = {j["name"]: j for j in c.json("GET", "/v1/jobs?label=run=ci", expect=200)["jobs"]}
    assert sorted(jobs) == ["fbp", "phantom", "sart"], jobs
    phantom_id = open(os.path.join(wd, "results", "phantom", "job.id")).read().strip()
    assert jobs["phantom"]["id"] == phantom_id
    for algo in ("fbp", "sart"):
        frm = jobs[algo]["inputs_from"]["projections"]
        assert frm["job"] == phantom_id and frm["output"] == "projections.nrrd", jobs[algo]
    # the reconstructions read the phantom's projections blob itself: one blob, three jobs
    blob = H.scalar(f"SELECT blob_id FROM job_outputs WHERE job_id = '{phantom_id}' AND name = 'projections.nrrd'")
    users = H.scalar(f"SELECT count(*) FROM job_inputs WHERE blob_id = '{blob}'")
    assert users == "2", users
    # a second run has nothing to do
    again = snakemake(wd, "--config", "run=ci")
    assert again.returncode == 0 and H.scalar("SELECT count(*) FROM jobs") == "3"


def test_failed_job_fails_the_step():
    wd = os.path.join(H.tmp, "wd-bad")
    os.makedirs(wd)
    bad = os.path.join(H.tmp, "bad-example")
    shutil.copytree(EXAMPLE, bad)
    p = os.path.join(bad, "params", "sart.json")
    params = json.load(open(p))
    params["volume"]["nx"] = 64                 # the projections do not fit this geometry
    params["geometry"]["detector"]["cols"] = 99
    json.dump(params, open(p, "w"))
    r = subprocess.run(["snakemake", "-s", os.path.join(bad, "Snakefile"), "-d", wd, "--cores", "2", "--keep-going",
                        "--config", "run=bad"], capture_output=True, text=True, env=ENV, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert re.search(r"gpujobd submit: job [0-9a-f-]{36} failed: projections", out), out   # the job's own reason
    assert os.path.exists(os.path.join(wd, "results", "fbp", "volume.nrrd"))        # the other branch went on
    assert not os.path.exists(os.path.join(wd, "results", "psnr.tsv"))


def teardown():
    H.close()


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_pipeline_fbp_sart_psnr, test_failed_job_fails_the_step])
    finally:
        teardown()
