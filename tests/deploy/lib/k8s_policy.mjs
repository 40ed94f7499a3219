// What the manifests must say beyond their schemas: hardened pods, pinned images, probes on the
// port gpujobd listens on (a worker's on --metrics-listen), grace periods above gpujobd's, GPUs
// only for workers, and references between objects (Service -> pods -> port, Ingress -> Service,
// PDB/ScaledObject/ServiceMonitor -> their targets) that hold. Each rule returns problems naming the object.
import { objectKey } from "./k8s_render.mjs";

const NAMESPACE = "gpujobd";
const BOOLEAN_FLAGS = new Set(["insecure-http"]);
const DEFAULT_GRACE = 30;

// ---------------------------------------------------------------- reading gpujobd's settings

/** The pods of Deployments and Jobs: [{obj, key, labels, pod}]. */
export function workloads(objects) {
    return objects.filter((o) => ["Deployment", "Job"].includes(o.kind)).map((o) => ({
        obj: o, key: objectKey(o), labels: o.spec?.template?.metadata?.labels ?? {}, pod: o.spec?.template?.spec ?? {},
    }));
}

/** A container's gpujobd command line: {command, flags: {name: value}} (the last value wins). */
export function commandLine(container) {
    const args = container.args ?? [];
    const flags = {};
    for (let i = 1; i < args.length; i++) {
        const m = args[i].match(/^--([^=]+)(?:=(.*))?$/);
        if (!m)
            continue;
        if (m[2] !== undefined)
            flags[m[1]] = m[2];
        else if (BOOLEAN_FLAGS.has(m[1]) || i + 1 >= args.length || args[i + 1].startsWith("--"))
            flags[m[1]] = "true";
        else
            flags[m[1]] = args[++i];
    }
    return { command: args[0], flags };
}

/** The value of a setting: its flag, else its GPUJOBD_* variable ("<secret>" when from one). */
export function setting(container, name) {
    const { flags } = commandLine(container);
    if (name in flags)
        return flags[name];
    const env = (container.env ?? []).find((e) => e.name === "GPUJOBD_" + name.toUpperCase().replace(/-/g, "_"));
    if (!env)
        return undefined;
    return env.valueFrom ? "<secret>" : env.value;
}

function role(container) {
    return setting(container, "role") ?? "all";
}

function isServe(container) {
    return commandLine(container).command === "serve";
}

function selects(selector, labels) {
    return Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);
}

function quantity(v) {
    return v === undefined ? 0 : Number(String(v).replace(/[^0-9.]/g, "")) || 0;
}

// ---------------------------------------------------------------- rules

function namespaced(objects) {
    return objects.filter((o) => o.kind !== "Namespace" && o.metadata?.namespace !== NAMESPACE)
        .map((o) => `${objectKey(o)}: not in namespace ${NAMESPACE}`);
}

function hardenedPods(objects) {
    const problems = [];
    for (const w of workloads(objects)) {
        const sc = w.pod.securityContext ?? {};
        if (sc.runAsNonRoot !== true)
            problems.push(`${w.key}: pod securityContext.runAsNonRoot is not true`);
        if (!Number.isInteger(sc.runAsUser) || sc.runAsUser === 0)
            problems.push(`${w.key}: pod securityContext.runAsUser must be the image's uid (10001)`);
        if (sc.seccompProfile?.type !== "RuntimeDefault")
            problems.push(`${w.key}: seccompProfile RuntimeDefault is missing`);
        if (w.pod.automountServiceAccountToken !== false)
            problems.push(`${w.key}: automountServiceAccountToken must be false (gpujobd never calls the API)`);
        if (w.pod.enableServiceLinks !== false)
            problems.push(`${w.key}: enableServiceLinks must be false (service variables would land in GPUJOBD_*)`);
        for (const c of w.pod.containers ?? []) {
            const csc = c.securityContext ?? {};
            if (csc.allowPrivilegeEscalation !== false)
                problems.push(`${w.key} ${c.name}: allowPrivilegeEscalation is not false`);
            if (csc.readOnlyRootFilesystem !== true)
                problems.push(`${w.key} ${c.name}: readOnlyRootFilesystem is not true`);
            if (!(csc.capabilities?.drop ?? []).includes("ALL"))
                problems.push(`${w.key} ${c.name}: capabilities are not dropped (drop: [ALL])`);
            if (csc.privileged)
                problems.push(`${w.key} ${c.name}: privileged`);
            if (c.command)
                problems.push(`${w.key} ${c.name}: 'command' replaces the image's entrypoint (tini, checks); use args`);
        }
    }
    return problems;
}

function resources(objects) {
    const problems = [];
    for (const w of workloads(objects))
        for (const c of w.pod.containers ?? []) {
            const r = c.resources ?? {};
            for (const k of ["cpu", "memory"])
                if (!r.requests?.[k])
                    problems.push(`${w.key} ${c.name}: no ${k} request`);
            if (!r.limits?.memory)
                problems.push(`${w.key} ${c.name}: no memory limit`);
        }
    return problems;
}

function pinnedImages(objects, ctx) {
    const problems = [];
    const images = new Set();
    for (const w of workloads(objects))
        for (const c of w.pod.containers ?? []) {
            images.add(c.image);
            const m = (c.image ?? "").match(/^(.+?)(?::([\w][\w.-]*))?(@sha256:[0-9a-f]{64})?$/);
            if (!m || (!m[2] && !m[3]))
                problems.push(`${w.key} ${c.name}: image ${c.image} has no tag`);
            else if (m[2] === "latest")
                problems.push(`${w.key} ${c.name}: image ${c.image}: latest is not a pinned version`);
            else if (ctx.imageTag && m[2] !== ctx.imageTag)
                problems.push(`${w.key} ${c.name}: image tag ${m[2]} is not the tag deploy/docker/build.sh makes (${ctx.imageTag})`);
            if (c.imagePullPolicy === "Always")
                problems.push(`${w.key} ${c.name}: imagePullPolicy Always on a pinned tag`);
        }
    if (images.size > 1)
        problems.push(`the workloads run different images: ${[...images].join(", ")}`);
    return problems;
}

function volumes(objects) {
    const problems = [];
    for (const w of workloads(objects)) {
        const defined = new Map();
        for (const v of w.pod.volumes ?? []) {
            const sources = Object.keys(v).filter((k) => k !== "name");
            if (sources.length !== 1)
                problems.push(`${w.key}: volume ${v.name} has ${sources.length} sources (${sources.join(", ")})`);
            defined.set(v.name, v);
        }
        for (const c of w.pod.containers ?? []) {
            const mounts = c.volumeMounts ?? [];
            for (const m of mounts)
                if (!defined.has(m.name))
                    problems.push(`${w.key} ${c.name}: mounts volume ${m.name}, which the pod does not define`);
            // The root filesystem is read-only: what gpujobd writes must be on a volume.
            const writable = [];
            if (isServe(c) || (commandLine(c).command === "migrate" && !setting(c, "database-url")))
                writable.push(setting(c, "data-dir") ?? "./var");
            if (isServe(c))
                writable.push("/tmp");
            for (const dir of writable) {
                if (!dir.startsWith("/"))
                    problems.push(`${w.key} ${c.name}: data directory ${dir} is relative; give GPUJOBD_DATA_DIR`);
                else if (!mounts.some((m) => !m.readOnly && (dir === m.mountPath || dir.startsWith(m.mountPath + "/"))))
                    problems.push(`${w.key} ${c.name}: ${dir} is not on a writable volume (read-only root filesystem)`);
            }
            const keyFile = setting(c, "admin-key-file");
            if (keyFile && !mounts.some((m) => keyFile.startsWith(m.mountPath + "/") && defined.get(m.name)?.secret))
                problems.push(`${w.key} ${c.name}: the admin key file ${keyFile} is not on a mounted Secret`);
        }
    }
    return problems;
}

function gracePeriods(objects) {
    const problems = [];
    for (const w of workloads(objects))
        for (const c of w.pod.containers ?? []) {
            if (!isServe(c))
                continue;
            const grace = Number(setting(c, "shutdown-grace-seconds") ?? DEFAULT_GRACE);
            const period = w.pod.terminationGracePeriodSeconds ?? 30;
            if (!(period > grace))
                problems.push(`${w.key}: terminationGracePeriodSeconds ${period} is not above --shutdown-grace-seconds ${grace}`);
        }
    return problems;
}

function probe(w, c, which, path, port, scheme) {
    const p = c[which];
    if (!p?.httpGet)
        return [`${w.key} ${c.name}: no ${which} (httpGet ${path})`];
    const problems = [];
    const g = p.httpGet;
    if (g.path !== path)
        problems.push(`${w.key} ${c.name}: ${which} asks ${g.path}, not ${path}`);
    const target = (c.ports ?? []).find((cp) => cp.name === g.port || cp.containerPort === g.port);
    if (!target)
        problems.push(`${w.key} ${c.name}: ${which} port ${g.port} is no port of the container`);
    else if (target.containerPort !== port)
        problems.push(`${w.key} ${c.name}: ${which} goes to ${target.containerPort}; gpujobd listens on ${port}`);
    if ((g.scheme ?? "HTTP") !== scheme)
        problems.push(`${w.key} ${c.name}: ${which} scheme ${g.scheme ?? "HTTP"}; gpujobd serves ${scheme}`);
    return problems;
}

/**
 * The listener a container's probes go to: {flag, address, scheme}. A worker has no API
 * listener; its probes go to --metrics-listen (plain HTTP), which it must then have.
 */
function probedListener(c) {
    if (role(c) === "worker")
        return { flag: "metrics-listen", address: setting(c, "metrics-listen"), scheme: "HTTP" };
    const insecure = ["true", "1", "yes", ""].includes(setting(c, "insecure-http") ?? "false");
    return { flag: "listen", address: setting(c, "listen") ?? "127.0.0.1:8443", scheme: insecure ? "HTTP" : "HTTPS" };
}

function probes(objects) {
    const problems = [];
    for (const w of workloads(objects))
        for (const c of w.pod.containers ?? []) {
            if (!isServe(c))
                continue;
            const { flag, address: listen, scheme } = probedListener(c);
            if (!listen) {
                problems.push(`${w.key} ${c.name}: --role worker without --${flag}: nothing to probe`);
                continue;
            }
            const [host, port] = [listen.slice(0, listen.lastIndexOf(":")), Number(listen.split(":").at(-1))];
            if (!["0.0.0.0", "[::]", "::"].includes(host))
                problems.push(`${w.key} ${c.name}: --${flag} ${listen}: the kubelet and Services cannot reach ${host}`);
            problems.push(...probe(w, c, "startupProbe", "/healthz", port, scheme),
                ...probe(w, c, "readinessProbe", "/readyz", port, scheme),
                ...probe(w, c, "livenessProbe", "/healthz", port, scheme));
        }
    return problems;
}

function gpus(objects) {
    const problems = [];
    for (const w of workloads(objects))
        for (const c of w.pod.containers ?? []) {
            if (!isServe(c))
                continue;
            const gpu = quantity(c.resources?.limits?.["nvidia.com/gpu"]);
            const tolerates = (w.pod.tolerations ?? []).some((t) => t.key === "nvidia.com/gpu");
            const r = role(c);
            if (r === "api") {
                if (gpu)
                    problems.push(`${w.key}: --role api asks for a GPU`);
                const nvd = (c.env ?? []).find((e) => e.name === "NVIDIA_VISIBLE_DEVICES")?.value;
                if (nvd !== "void")
                    problems.push(`${w.key}: --role api without NVIDIA_VISIBLE_DEVICES=void sees every GPU of an NVIDIA-runtime node`);
                continue;
            }
            if (gpu < 1)
                problems.push(`${w.key}: --role ${r} runs jobs but asks for no nvidia.com/gpu`);
            if (!tolerates)
                problems.push(`${w.key}: --role ${r} does not tolerate the nvidia.com/gpu taint of GPU nodes`);
            if (r === "worker" && !w.pod.nodeSelector)
                problems.push(`${w.key}: --role worker has no nodeSelector for GPU nodes`);
            if (r === "worker" && !setting(c, "database-url"))
                problems.push(`${w.key}: --role worker needs the shared PostgreSQL (--database-url)`);
        }
    return problems;
}

function serviceReferences(objects, pods, services) {
    const problems = [];
    for (const w of pods)
        if (w.obj.kind === "Deployment" && !selects(w.obj.spec?.selector?.matchLabels, w.labels))
            problems.push(`${w.key}: its selector does not match its pod labels`);
    for (const s of services) {
        const targets = pods.filter((w) => selects(s.spec?.selector, w.labels));
        if (!targets.length)
            problems.push(`${objectKey(s)}: selects no pod`);
        for (const p of s.spec?.ports ?? [])
            if (!targets.some((w) => (w.pod.containers ?? []).some((c) => (c.ports ?? []).some(
                (cp) => cp.name === p.targetPort || cp.containerPort === p.targetPort))))
                problems.push(`${objectKey(s)}: targetPort ${p.targetPort} is no port of the pods it selects`);
    }
    for (const o of objects.filter((x) => x.kind === "PodDisruptionBudget"))
        if (!pods.some((w) => w.obj.kind === "Deployment" && selects(o.spec?.selector?.matchLabels, w.labels)))
            problems.push(`${objectKey(o)}: covers no Deployment's pods`);
    for (const o of objects.filter((x) => x.kind === "NetworkPolicy"))
        if (Object.keys(o.spec?.podSelector?.matchLabels ?? {}).length &&
            !pods.some((w) => selects(o.spec.podSelector.matchLabels, w.labels)))
            problems.push(`${objectKey(o)}: selects no pod`);
    return problems;
}

function ingressReferences(objects, services) {
    const problems = [];
    for (const o of objects.filter((x) => x.kind === "Ingress")) {
        if (!(o.spec?.tls ?? []).some((t) => t.secretName))
            problems.push(`${objectKey(o)}: no TLS (spec.tls with a secretName)`);
        for (const rule of o.spec?.rules ?? [])
            for (const p of rule.http?.paths ?? []) {
                const b = p.backend?.service;
                const svc = services.find((s) => s.metadata.name === b?.name);
                if (!svc)
                    problems.push(`${objectKey(o)}: ${p.path} goes to Service ${b?.name}, which does not exist`);
                else if (!(svc.spec.ports ?? []).some((sp) => sp.name === b.port?.name || sp.port === b.port?.number))
                    problems.push(`${objectKey(o)}: ${p.path} goes to a port Service ${b.name} does not have`);
                if (p.path === "/" || p.path === "/metrics")
                    problems.push(`${objectKey(o)}: ${p.path} would publish /metrics and /readyz`);
            }
    }
    return problems;
}

function monitoringReferences(objects, pods, services) {
    const problems = [];
    for (const o of objects.filter((x) => x.kind === "ScaledObject")) {
        const target = pods.find((w) => w.obj.kind === "Deployment" && w.obj.metadata.name === o.spec?.scaleTargetRef?.name);
        if (!target)
            problems.push(`${objectKey(o)}: scales ${o.spec?.scaleTargetRef?.name}, which is no Deployment here`);
        else if (target.obj.spec.replicas !== undefined)
            problems.push(`${objectKey(o)}: ${target.key} sets replicas, which every apply would reset under KEDA`);
        if (!(o.spec?.triggers ?? []).some((t) => /gpujobd_queue_depth/.test(t.metadata?.query ?? "")))
            problems.push(`${objectKey(o)}: no trigger on gpujobd_queue_depth`);
    }
    for (const o of objects.filter((x) => x.kind === "ServiceMonitor")) {
        const svc = services.find((s) => selects(o.spec?.selector?.matchLabels, s.metadata.labels ?? {}));
        if (!svc)
            problems.push(`${objectKey(o)}: selects no Service`);
        for (const e of o.spec?.endpoints ?? [])
            if (svc && !(svc.spec.ports ?? []).some((p) => p.name === e.port))
                problems.push(`${objectKey(o)}: endpoint port ${e.port} is no port of ${objectKey(svc)}`);
    }
    return problems;
}

function references(objects) {
    const pods = workloads(objects);
    const services = objects.filter((o) => o.kind === "Service");
    return [...serviceReferences(objects, pods, services), ...ingressReferences(objects, services),
        ...monitoringReferences(objects, pods, services)];
}

/** Every rule: [name, (objects, ctx) => problems]. */
export const POLICY_RULES = [
    ["in namespace gpujobd", namespaced],
    ["hardened pods (non-root, read-only root, no capabilities, no token)", hardenedPods],
    ["resource requests and memory limits", resources],
    ["images pinned to the build's tag", pinnedImages],
    ["volumes: one source each, writable data dir and /tmp, admin key from a Secret", volumes],
    ["terminationGracePeriodSeconds above --shutdown-grace-seconds", gracePeriods],
    ["startup/readiness/liveness probes on the listen port and scheme", probes],
    ["GPUs for workers only, with tolerations and node selector", gpus],
    ["selectors and references between objects hold", references],
];

/** The overlay-specific shape the issue asks for: [name, (objects) => problems]. */
export const OVERLAY_SHAPES = {
    single: (objects) => {
        const problems = [];
        const deps = objects.filter((o) => o.kind === "Deployment");
        if (deps.length !== 1)
            return [`expected one Deployment, found ${deps.length}`];
        const d = deps[0];
        const c = d.spec.template.spec.containers[0];
        if (d.spec.replicas !== 1)
            problems.push("replicas must be 1 (one embedded PostgreSQL)");
        if (d.spec.strategy?.type !== "Recreate")
            problems.push("strategy must be Recreate (the volume and its PostgreSQL belong to one pod at a time)");
        if (role(c) !== "all")
            problems.push(`--role ${role(c)}: the single pod does everything (all)`);
        if (setting(c, "database-url"))
            problems.push("the single overlay uses the embedded PostgreSQL: no --database-url");
        const dataDir = setting(c, "data-dir");
        const mount = (c.volumeMounts ?? []).find((m) => m.mountPath === dataDir);
        const vol = (d.spec.template.spec.volumes ?? []).find((v) => v.name === mount?.name);
        const claim = vol?.persistentVolumeClaim?.claimName;
        if (!claim || !objects.some((o) => o.kind === "PersistentVolumeClaim" && o.metadata.name === claim))
            problems.push("the data directory is not on a PersistentVolumeClaim of the overlay");
        return problems;
    },
    production: (objects) => {
        const problems = [];
        const containers = workloads(objects).flatMap((w) => (w.pod.containers ?? []).map((c) => [w, c]));
        const serveRoles = containers.filter(([, c]) => isServe(c)).map(([, c]) => role(c)).sort();
        if (JSON.stringify(serveRoles) !== JSON.stringify(["api", "worker"]))
            problems.push(`expected one --role api and one --role worker Deployment, found roles ${serveRoles.join(", ")}`);
        if (!containers.some(([w, c]) => w.obj.kind === "Job" && commandLine(c).command === "migrate"))
            problems.push("no Job runs gpujobd migrate");
        for (const [w, c] of containers)
            if (setting(c, "database-url") !== "<secret>")
                problems.push(`${w.key}: the database URL must come from a Secret`);
        for (const [w, c] of containers.filter(([, c]) => isServe(c)))
            if (!setting(c, "admin-key-file"))
                problems.push(`${w.key}: no admin key file (GPUJOBD_ADMIN_KEY_FILE): a replica would generate and log one`);
        const api = containers.find(([, c]) => isServe(c) && role(c) === "api");
        if (api && setting(api[1], "insecure-http") !== "true")
            problems.push("TLS ends at the Ingress: the api pods serve --insecure-http");
        for (const kind of ["Ingress", "NetworkPolicy", "ScaledObject", "ServiceMonitor"])
            if (!objects.some((o) => o.kind === kind))
                problems.push(`no ${kind}`);
        const pdbs = objects.filter((o) => o.kind === "PodDisruptionBudget");
        for (const r of ["api", "worker"])
            if (!pdbs.some((p) => p.spec?.selector?.matchLabels?.["app.kubernetes.io/component"] === r))
                problems.push(`no PodDisruptionBudget for the ${r} pods`);
        if (api) {
            const port = Number((setting(api[1], "listen") ?? "").split(":").at(-1));
            const allowed = objects.some((o) => o.kind === "NetworkPolicy" && selects(o.spec?.podSelector?.matchLabels, api[0].labels) &&
                (o.spec.ingress ?? []).some((rule) => (rule.ports ?? []).some((p) => p.port === port)));
            if (!allowed)
                problems.push(`no NetworkPolicy lets traffic in to the api pods' port ${port}`);
        }
        return problems;
    },
    // production with blobs in an S3 store (issue 30): the same shape, every serving pod on
    // --blob-store s3 with the endpoint and bucket from a Secret and the keys in a mounted Secret
    // file (never the environment), and a way out to the store.
    "production-s3": (objects) => {
        const problems = OVERLAY_SHAPES.production(objects);
        for (const w of workloads(objects)) {
            for (const c of (w.pod.containers ?? []).filter(isServe)) {
                if (setting(c, "blob-store") !== "s3")
                    problems.push(`${w.key}: --blob-store is not s3`);
                for (const flag of ["s3-endpoint", "s3-bucket"])
                    if (setting(c, flag) !== "<secret>")
                        problems.push(`${w.key}: --${flag} must come from a Secret`);
                const file = setting(c, "s3-credentials-file");
                const mount = (c.volumeMounts ?? []).find((m) => file?.startsWith(m.mountPath + "/"));
                const vol = (w.pod.volumes ?? []).find((v) => v.name === mount?.name);
                if (!vol?.secret)
                    problems.push(`${w.key}: the S3 credentials must be a file from a mounted Secret`);
            }
        }
        if (!objects.some((o) => o.kind === "NetworkPolicy" &&
            (o.spec?.egress ?? []).some((rule) => (rule.ports ?? []).some((p) => p.port === 443))))
            problems.push("no NetworkPolicy lets the pods reach the object store (443)");
        return problems;
    },
};
