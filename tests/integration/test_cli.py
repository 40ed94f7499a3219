"""The command line without a server: `gpujobd run`, `version`, and start-up refusals."""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import GPUJOBD, run_tests  # noqa: E402


def gj(*args, **kw):
    return subprocess.run([GPUJOBD, *args], capture_output=True, text=True, timeout=120, **kw)


def test_version_lists_kinds():
    r = gj("version")
    assert r.returncode == 0, r.stderr
    assert "noop" in r.stdout
    # the build provenance records (git describe: a release's tag, else its commit)
    assert re.match(r"gpujobd \S+ \((CUDA|CPU only)\), build \S+", r.stdout), r.stdout


def test_run_noop_writes_outputs():
    with tempfile.TemporaryDirectory() as d:
        params = os.path.join(d, "p.json")
        with open(params, "w") as f:
            json.dump({"sleep_ms": 10, "output_bytes": 4096}, f)
        inp = os.path.join(d, "in.bin")
        with open(inp, "wb") as f:
            f.write(b"x" * 123)
        out = os.path.join(d, "out")
        r = gj("run", "noop", "--params", params, "--input", f"input={inp}", "--out", out, "--device", "cpu")
        assert r.returncode == 0, r.stderr
        assert os.path.getsize(os.path.join(out, "data.bin")) == 4096
        res = json.load(open(os.path.join(out, "result.json")))
        assert res["inputs"] == {"input": 123}, res
        assert res["device"] == -1


def test_run_refuses_bad_jobs_with_the_field():
    with tempfile.TemporaryDirectory() as d:
        params = os.path.join(d, "p.json")
        with open(params, "w") as f:
            json.dump({"sleep_ms": -5}, f)
        r = gj("run", "noop", "--params", params, "--out", os.path.join(d, "o"))
        assert r.returncode == 2 and "sleep_ms" in r.stderr, r.stderr
        with open(params, "w") as f:
            f.write("{not json")
        r = gj("run", "noop", "--params", params, "--out", os.path.join(d, "o"))
        assert r.returncode == 2 and "p.json" in r.stderr, r.stderr
        r = gj("run", "nosuchkind", "--out", os.path.join(d, "o"))
        assert r.returncode == 2 and "unknown kind" in r.stderr, r.stderr
        with open(params, "w") as f:
            json.dump({"fail_with": "asked to fail"}, f)
        r = gj("run", "noop", "--params", params, "--out", os.path.join(d, "o"))
        assert r.returncode == 1 and "asked to fail" in r.stderr, r.stderr


def test_serve_refuses_bad_configuration_in_one_line():
    for args, name in ((["--listen", "nowhere"], "--listen"),
                       (["--placement", "best"], "--placement"),
                       (["--tls-key", "/nonexistent.pem"], "--tls")):
        r = gj("serve", *args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and name in lines[0], r.stderr
    r = gj("serve", env={**os.environ, "GPUJOBD_LEASE_SECONDS": "zero"})
    assert r.returncode == 2 and "GPUJOBD_LEASE_SECONDS" in r.stderr, r.stderr


if __name__ == "__main__":
    run_tests([test_version_lists_kinds, test_run_noop_writes_outputs,
               test_run_refuses_bad_jobs_with_the_field, test_serve_refuses_bad_configuration_in_one_line])
