"""The Grafana dashboard (deploy/grafana/gpujobd.json) and the alert rules
(deploy/k8s/overlays/production/prometheusrule.yaml) against a running gpujobd: every metric
and label their PromQL names is one the server exports after a little of everything (a job, an upload, an inference, on two simulated GPUs), and Debian's promtool
(unpacked from its package, not installed) parses every expression and the rules, and runs the
rules' unit tests (promtool_tests.yaml beside this file).

Run with /usr/bin/python3 (numpy, yaml)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("GJ_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("GJ_BUILD_ROOT", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
from harness import Harness, run_tests  # noqa: E402

DASHBOARD = os.path.join(SRC, "deploy", "grafana", "gpujobd.json")
RULES = os.path.join(SRC, "deploy", "k8s", "overlays", "production", "prometheusrule.yaml")
# Labels Prometheus adds to every scraped series, and the histogram bucket bound.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "service", "endpoint"}
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$job": ".*", "$instance": ".*", "$gpu": ".*"}

H = None
EXPORTED = None   # {metric name: set of label names}


def scrape_families(text):
    """{series name: label names} from the text format, and the declared families (TYPE)."""
    series, declared = {}, {}
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            declared[m.group(1)] = m.group(2)
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[^"}]|"(?:\\.|[^"\\])*")*)\})?\s', line)
        assert m, f"cannot read the sample line {line!r}"
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
        series.setdefault(m.group(1), set()).update(labels)
    return series, declared


def inference_request():
    x = np.random.RandomState(3).normal(0, 1, size=(1, 1, 256, 256)).astype(np.float32)
    raw = x.tobytes()
    head = json.dumps({"inputs": [{"name": "image", "shape": list(x.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": len(raw)}}]}).encode()
    return head + raw, {"Inference-Header-Content-Length": str(len(head)),
                        "Content-Type": "application/octet-stream"}


def setup():
    global H, EXPORTED
    H = Harness()
    srv = H.start_server(["--triton-metrics", "--cpu-workers", "1"], env={"GPUJOBD_FAKE_GPUS": "2:16G"})
    c = srv.client()
    job = c.submit("noop", {"sleep_ms": 10, "use_gpu": True, "device_bytes": 1 << 20})
    c.wait_job(job["id"])
    c.upload(b"x" * 4096)
    body, headers = inference_request()
    r = c.request("POST", "/v2/models/chest-xray-demo/infer", body=body, headers=headers, timeout=120)
    assert r.status == 200, f"inference: {r.status} {r.body[:300]!r}"
    r = c.request("GET", "/metrics")
    assert r.status == 200, r
    EXPORTED, declared = scrape_families(r.body.decode())
    for name, kind in declared.items():      # histograms appear as their three series
        if kind == "histogram" and name + "_count" not in EXPORTED:
            EXPORTED.setdefault(name, set())


def strip_strings(expr):
    return re.sub(r'"(\\.|[^"\\])*"', '""', expr)


def selectors(expr):
    """[(metric, {label names matched})] of every vector selector with a metric name."""
    out = []
    for m in re.finditer(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{([^}]*)\})?", expr):
        name = m.group(1)
        if not re.match(r"(gpujobd_|nv_|up$)", name):
            continue
        labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(3) or ""))
        out.append((name, labels))
    return out


def grouping_labels(expr):
    names = set()
    for m in re.finditer(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr):
        names.update(n.strip() for n in m.group(2).split(",") if n.strip())
    return names


def check_expr(where, expr):
    """Problems with one PromQL expression against what the server exports."""
    problems = []
    e = strip_strings(expr)
    found = selectors(e)
    if not found:
        problems.append(f"{where}: names no gpujobd metric: {expr}")
    known = set()
    for name, labels in found:
        if name == "up":
            continue
        if name not in EXPORTED:
            problems.append(f"{where}: {name} is not exported")
            continue
        known |= EXPORTED[name]
        for label in labels - TARGET_LABELS - EXPORTED[name]:
            problems.append(f"{where}: {name} has no label {label}")
    for label in grouping_labels(e) - TARGET_LABELS - known - {"le"}:
        problems.append(f"{where}: no metric of the expression has the label {label} it groups by")
    return problems


def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def dashboard_targets(d):
    for p in d["panels"]:
        for t in p.get("targets", []):
            yield p, t


def test_dashboard_names_only_exported_metrics():
    problems = []
    for p, t in dashboard_targets(dashboard()):
        where = f"panel '{p['title']}' {t['refId']}"
        problems += check_expr(where, t["expr"])
        legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", "")))
        group = grouping_labels(strip_strings(t["expr"]))
        for label in legend - group - TARGET_LABELS:
            names = {n for n, _ in selectors(strip_strings(t["expr"]))}
            if group or not any(label in EXPORTED.get(n, set()) for n in names):
                problems.append(f"{where}: the legend names {label}, which the series do not carry")
    assert not problems, "\n".join(problems)


def test_dashboard_is_importable():
    d = dashboard()
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    variables = {v["name"] for v in d["templating"]["list"]}
    assert {"datasource", "job", "instance", "gpu"} <= variables, variables
    ds = next(v for v in d["templating"]["list"] if v["name"] == "datasource")
    assert ds["type"] == "datasource" and ds["query"] == "prometheus", ds
    for p in d["panels"]:
        assert {"x", "y", "w", "h"} <= set(p["gridPos"]), p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p.get("description"), f"panel '{p['title']}' has no description (its text alternative)"
        for t in p["targets"]:
            for var in re.findall(r"\$\{?(\w+)", t["expr"]):
                assert var in variables or "$" + var in GRAFANA_VARS, f"{p['title']}: ${var} is no variable"
    repeated = [p for p in d["panels"] if p.get("repeat")]
    assert sorted(p["repeat"] for p in repeated) == ["gpu", "instance"], "one row per GPU and per replica"
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            problems = check_expr(f"variable {v['name']}", re.sub(r"label_values\((.*),\s*\w+\)$", r"\1",
                                                                    v["query"]["query"]))
            assert not problems, problems


def rule_groups():
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    assert doc["kind"] == "PrometheusRule", doc["kind"]
    return doc["spec"]["groups"]


def test_alert_rules_name_only_exported_metrics():
    problems = []
    alerts = []
    for g in rule_groups():
        for rule in g["rules"]:
            alerts.append(rule["alert"])
            problems += check_expr(f"alert {rule['alert']}", rule["expr"])
    for wanted in ("QueueGrowingWithIdleSlots", "ReplicaNotReady", "DatabaseUnreachable",
                   "GpuMemoryRefusals", "DeliveryRetriesPilingUp"):
        assert "Gpujobd" + wanted in alerts, f"no alert for {wanted}: {alerts}"
    assert not problems, "\n".join(problems)


def promtool():
    """Debian's promtool: on PATH, or unpacked from the prometheus package under the build tree."""
    for cand in ("/usr/bin/promtool", os.path.join(BUILD, "tests", "deploy", "prometheus", "usr", "bin", "promtool")):
        if os.access(cand, os.X_OK):
            return cand
    dest = os.path.join(BUILD, "tests", "deploy", "prometheus")
    subprocess.run(["flock", os.path.join(BUILD, "tests", "deploy", ".prometheus.lock"), "sh",
                    os.path.join(HERE, "fetch_deb.sh"), "prometheus", dest], check=True)
    path = os.path.join(dest, "usr", "bin", "promtool")
    assert os.access(path, os.X_OK), f"promtool did not unpack into {dest}"
    return path


def run_promtool(*args):
    r = subprocess.run([promtool(), *args], capture_output=True, text=True)
    assert r.returncode == 0, f"promtool {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_promtool_checks_rules_and_runs_their_tests():
    rules = os.path.join(H.tmp, "gpujobd-rules.yaml")
    with open(rules, "w") as f:
        yaml.safe_dump({"groups": rule_groups()}, f)
    out = run_promtool("check", "rules", rules)
    assert "SUCCESS" in out, out
    tests = os.path.join(H.tmp, "gpujobd-rules-test.yaml")
    with open(os.path.join(HERE, "promtool_tests.yaml")) as f:
        spec = yaml.safe_load(f)
    spec["rule_files"] = [rules]
    with open(tests, "w") as f:
        yaml.safe_dump(spec, f)
    out = run_promtool("test", "rules", tests)
    assert "SUCCESS" in out, out


def test_promtool_parses_every_dashboard_expression():
    rules = []
    for i, (p, t) in enumerate(dashboard_targets(dashboard())):
        expr = t["expr"]
        for var, value in GRAFANA_VARS.items():
            expr = expr.replace(var, value)
        rules.append({"record": f"gpujobd:dashboard_{i}", "expr": expr})
    path = os.path.join(H.tmp, "dashboard-exprs.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
    out = run_promtool("check", "rules", path)
    assert f"{len(rules)} rules found" in out, out


def test_a_broken_expression_is_caught():
    """The checks above can fail: a misspelt metric, a label it lacks, and bad PromQL."""
    assert check_expr("x", "rate(gpujobd_job_wait_seconds_cnt[5m])")
    assert check_expr("x", 'gpujobd_jobs{status="queued"}')
    assert check_expr("x", "sum by (model) (gpujobd_queue_depth)")
    assert not check_expr("x", 'sum by (kind) (gpujobd_jobs{state="queued"})')
    path = os.path.join(H.tmp, "broken.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({"groups": [{"name": "b", "rules": [{"record": "b:x", "expr": "sum by (kind (x)"}]}]}, f)
    r = subprocess.run([promtool(), "check", "rules", path], capture_output=True, text=True)
    assert r.returncode != 0, r.stdout


if __name__ == "__main__":
    try:
        setup()
        run_tests([test_dashboard_names_only_exported_metrics, test_dashboard_is_importable,
                   test_alert_rules_name_only_exported_metrics, test_promtool_checks_rules_and_runs_their_tests,
                   test_promtool_parses_every_dashboard_expression, test_a_broken_expression_is_caught])
    finally:
        if H:
            H.close()
