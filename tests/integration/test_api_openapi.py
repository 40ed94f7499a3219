"""openapi/openapi.yaml and the server's route table agree, both ways.

The route table comes from `gpujobd serve --print-routes` ("METHOD /path" lines);
the spec's `paths:` keys and their methods are read with a small line-based
extraction (no YAML library needed)."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import GPUJOBD, run_tests  # noqa: E402

SPEC = os.path.join(os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", "..")),
                    "openapi", "openapi.yaml")
METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def spec_routes(path=SPEC):
    routes, in_paths, current = set(), False, None
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            indent = len(line) - len(line.lstrip(" "))
            if indent == 0:
                in_paths = line.startswith("paths:")
                current = None
                continue
            if not in_paths:
                continue
            m = re.match(r"^  (/\S*):\s*$", line)
            if m:
                current = m.group(1).strip("'\"")
                continue
            m = re.match(r"^    ([a-z]+):", line)
            if m and current and m.group(1) in METHODS:
                routes.add((m.group(1).upper(), current))
    return routes


def server_routes():
    out = subprocess.run([GPUJOBD, "serve", "--print-routes"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    routes = set()
    for line in out.stdout.splitlines():
        if line.strip():
            method, path = line.split()
            routes.add((method, path))
    return routes


def test_extraction_sees_the_spec():
    routes = spec_routes()
    assert ("GET", "/v1/jobs/{id}") in routes and ("POST", "/v1/jobs") in routes, routes
    assert len(routes) >= 15


def test_every_server_route_is_in_the_spec():
    missing = server_routes() - spec_routes()
    assert not missing, f"routes the server answers but openapi.yaml lacks: {sorted(missing)}"


def test_every_spec_route_is_served():
    missing = spec_routes() - server_routes()
    assert not missing, f"routes in openapi.yaml the server does not answer: {sorted(missing)}"


def test_spec_basics():
    text = open(SPEC).read()
    assert text.startswith("openapi: 3.1"), text[:40]
    for needle in ("bearerAuth:", "Problem:", "application/problem+json", "Job:", "text/event-stream"):
        assert needle in text, needle


if __name__ == "__main__":
    run_tests([test_extraction_sees_the_spec, test_every_server_route_is_in_the_spec,
               test_every_spec_route_is_served, test_spec_basics])
