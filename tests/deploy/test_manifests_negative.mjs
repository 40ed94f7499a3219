// The manifest checks fail on broken manifests: each case copies deploy/k8s to a scratch
// directory, breaks one file the way a careless edit would, renders the overlay (Debian's
// kubectl) and runs the named check of lib/k8s_checks.mjs, which must report the break.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { buildDir, runChecks } from "./lib/common.mjs";
import { checkOverlay, context } from "./lib/k8s_checks.mjs";
import { K8S, renderers } from "./lib/k8s_render.mjs";

const ctx = context();
const renderer = renderers()[0];
const scratch = mkdtempSync(path.join(buildDir(), "broken-k8s-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));

// [what, overlay, file under deploy/k8s, from, to, the check that must fail, text of its problem]
const CASES = [
    ["a misspelt field", "production", "overlays/production/api-deployment.yaml",
        "readinessProbe:", "readynessProbe:", "no field the API does not have", "readynessProbe"],
    ["a string where the API wants a number", "production", "overlays/production/api-deployment.yaml",
        "replicas: 2", "replicas: two", "JSON Schemas", "replicas"],
    ["a KEDA field of the wrong type", "production", "overlays/production/scaledobject.yaml",
        "maxReplicaCount: 8", "maxReplicaCount: eight", "JSON Schemas", "maxReplicaCount"],
    ["a ScaledObject without its target", "production", "overlays/production/scaledobject.yaml",
        "scaleTargetRef:", "scaleTarget:", "JSON Schemas", "scaleTargetRef"],
    ["a ServiceMonitor interval Prometheus cannot read", "production", "overlays/production/servicemonitor.yaml",
        "interval: 30s", "interval: thirty", "JSON Schemas", "interval"],
    ["a misspelt ServiceMonitor field", "production", "overlays/production/servicemonitor.yaml",
        "path: /metrics", "pth: /metrics", "no field the API does not have", "pth"],
    ["workers killed before their grace period", "production", "overlays/production/worker-deployment.yaml",
        "terminationGracePeriodSeconds: 330", "terminationGracePeriodSeconds: 300",
        "terminationGracePeriodSeconds above", "not above --shutdown-grace-seconds 300"],
    ["a pod that may run as root", "single", "base/deployment.yaml",
        "runAsNonRoot: true", "runAsNonRoot: false", "hardened pods", "runAsNonRoot"],
    ["a writable root filesystem", "production", "overlays/production/worker-deployment.yaml",
        "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "hardened pods", "readOnlyRootFilesystem"],
    ["the latest image", "production", "overlays/production/kustomization.yaml",
        "newTag: 0.1.0-cuda13.0.2", "newTag: latest", "images pinned", "latest"],
    ["an Ingress to a Service that does not exist", "production", "overlays/production/ingress.yaml",
        "path: /v2\n            pathType: Prefix\n            backend:\n              service: {name: gpujobd,",
        "path: /v2\n            pathType: Prefix\n            backend:\n              service: {name: gpujob,",
        "selectors and references", "gpujob, which does not exist"],
    ["an Ingress that publishes /metrics", "production", "overlays/production/ingress.yaml",
        "path: /dicomweb", "path: /", "selectors and references", "would publish /metrics"],
    ["a readiness probe over HTTP to a TLS listener", "single", "overlays/single/deployment.yaml",
        "httpGet: {path: /readyz, port: https, scheme: HTTPS}", "httpGet: {path: /readyz, port: https}",
        "probes on the listen port", "readinessProbe scheme HTTP"],
    ["worker probes without the listener they ask", "production", "overlays/production/worker-deployment.yaml",
        ", \"--metrics-listen\", \"0.0.0.0:9090\"", "", "probes on the listen port",
        "--role worker without --metrics-listen"],
    ["a worker liveness probe to a port gpujobd does not listen on", "production",
        "overlays/production/worker-deployment.yaml",
        "livenessProbe:\n            httpGet: {path: /healthz, port: metrics}",
        "livenessProbe:\n            httpGet: {path: /healthz, port: 8080}",
        "probes on the listen port", "livenessProbe port 8080 is no port of the container"],
    ["the data directory on the read-only root", "single", "base/deployment.yaml",
        "mountPath: /var/lib/gpujobd", "mountPath: /var/lib/gpujob", "volumes",
        "/var/lib/gpujobd is not on a writable volume"],
    ["an admin key file outside its Secret", "production", "overlays/production/worker-deployment.yaml",
        "value: /run/secrets/gpujobd/admin.key", "value: /etc/gpujobd/admin.key", "volumes",
        "is not on a mounted Secret"],
    ["a GPU for the api pods", "production", "overlays/production/api-deployment.yaml",
        "memory: 4Gi", "memory: 4Gi\n              nvidia.com/gpu: 1", "GPUs for workers only", "--role api asks for a GPU"],
    ["a worker off GPU nodes", "production", "overlays/production/worker-deployment.yaml",
        "      nodeSelector:\n        nvidia.com/gpu.present: \"true\"\n", "", "GPUs for workers only", "nodeSelector"],
    ["a flag gpujobd does not have", "production", "overlays/production/worker-deployment.yaml",
        "\"--shutdown-grace-seconds\", \"300\"", "\"--shutdown-grace\", \"300\"", "gpujobd accepts", "no --shutdown-grace"],
    ["a value gpujobd refuses", "production", "overlays/production/api-deployment.yaml",
        "\"--role\", \"api\"", "\"--role\", \"apis\"", "gpujobd accepts", "expected all, api or worker"],
    ["a NetworkPolicy that shuts the api out", "production", "overlays/production/networkpolicy.yaml",
        "        - port: 8080", "        - port: 9090", "what the overlay is for", "port 8080"],
    ["two single replicas on one embedded PostgreSQL", "single", "overlays/single/deployment.yaml",
        "replicas: 1", "replicas: 2", "what the overlay is for", "replicas must be 1"],
    ["YAML that does not parse", "production", "overlays/production/poddisruptionbudget.yaml",
        "  minAvailable: 1", " minAvailable: 1\n   - x", "renders", "kustomize"],
];

const checks = [];
CASES.forEach(([what, overlay, file, from, to, checkName, expected], i) => {
    checks.push([`broken ${overlay} (${what}) fails '${checkName}'`, async () => {
        const root = path.join(scratch, String(i), "k8s");
        cpSync(K8S, root, { recursive: true });
        // the production overlay takes the Grafana dashboard from deploy/grafana, beside k8s/
        cpSync(path.join(K8S, "..", "grafana"), path.join(scratch, String(i), "grafana"), { recursive: true });
        const target = path.join(root, file);
        const text = readFileSync(target, "utf8");
        const n = text.split(from).length - 1;
        if (n !== 1)
            throw new Error(`the case no longer applies: '${from}' occurs ${n} times in ${file}`);
        writeFileSync(target, text.replace(from, to));
        const results = await checkOverlay(path.join(root, "overlays", overlay), renderer, ctx, checkName === "renders" ? "\u0000" : checkName);
        const hit = results.find((r) => r.name.includes(checkName));
        if (!hit)
            throw new Error(`no check '${checkName}' ran (the rendering failed? ${JSON.stringify(results[0])})`);
        if (!hit.problems.some((p) => p.includes(expected)))
            throw new Error(`'${checkName}' did not report it; it said: ${JSON.stringify(hit.problems)}`);
    }]);
});

await runChecks(checks);
