// Rendering the overlays with every kustomize at hand: the machine's kubectl (kubectl 1.21+
// carry kustomize v4-v5) and Debian 12's kubernetes-client (kubectl 1.20, kustomize v2.0.3).
// The manifests are written to render the same with both.
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import { DEPLOY_TESTS, SOURCE_ROOT, buildDir, run, runOk } from "./common.mjs";

export const K8S = path.join(SOURCE_ROOT, "deploy", "k8s");
export const OVERLAYS = ["single", "production"];

function clientVersion(kubectl) {
    const r = run(kubectl, ["version", "--client", "-o", "json"]);
    if (r.status !== 0)
        return null;
    const v = JSON.parse(r.stdout);
    return `kubectl ${v.clientVersion?.gitVersion}` + (v.kustomizeVersion ? `, kustomize ${v.kustomizeVersion}` : "");
}

function isDebians(kubectl) {
    const r = run("dpkg", ["-S", kubectl]);
    return r.status === 0 && r.stdout.startsWith("kubernetes-client:");
}

/**
 * Debian's kubectl: /usr/bin/kubectl when it is kubernetes-client's; else the package fetched
 * with apt-get download and unpacked (dpkg -x) under the build tree, since installing it would
 * clash with another package's /usr/bin/kubectl (google-cloud-cli's on some images).
 */
function debianKubectl() {
    const which = run("sh", ["-c", "command -v kubectl"]).stdout.trim();
    if (which && isDebians(which))
        return which;
    const dir = buildDir("kubernetes-client");
    const kubectl = path.join(dir, "usr", "bin", "kubectl");
    if (!existsSync(kubectl))
        runOk("flock", [path.join(dir, ".lock"), "sh", path.join(DEPLOY_TESTS, "fetch_deb.sh"), "kubernetes-client", dir]);
    if (!existsSync(kubectl))
        throw new Error(`Debian's kubectl did not unpack into ${dir}`);
    return kubectl;
}

/** [{name, argv}] of the kustomize renderers here: Debian's always, the machine's if other. */
export function renderers() {
    const list = [];
    const debian = debianKubectl();
    list.push({ name: clientVersion(debian) ?? "Debian kubectl", argv: [debian, "kustomize"] });
    const which = run("sh", ["-c", "command -v kubectl"]).stdout.trim();
    if (which && path.resolve(which) !== path.resolve(debian)) {
        const name = clientVersion(which);
        if (name)
            list.push({ name, argv: [which, "kustomize"] });
    }
    return list;
}

/** Renders a kustomization directory; returns its objects (plain JS). */
export function render(renderer, dir) {
    const [cmd, ...args] = renderer.argv;
    const r = run(cmd, [...args, dir]);
    if (r.status !== 0)
        throw new Error(`${renderer.name}: kustomize ${dir} failed: ${r.stderr.trim()}`);
    const docs = parseAllDocuments(r.stdout);
    for (const d of docs)
        if (d.errors.length)
            throw new Error(`${renderer.name}: unreadable YAML out of ${dir}: ${d.errors[0].message}`);
    return docs.map((d) => d.toJS()).filter(Boolean);
}

/** "Kind/namespace/name" of an object. */
export function objectKey(o) {
    return `${o.kind}/${o.metadata?.namespace ?? ""}/${o.metadata?.name}`;
}

function canonical(value) {
    if (Array.isArray(value))
        return value.map(canonical);
    if (value && typeof value === "object")
        return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical(value[k])]));
    return value;
}

/** Differences between two renderings of one overlay, as messages. */
export function diffRenderings(a, b) {
    const index = (objs) => new Map(objs.map((o) => [objectKey(o), JSON.stringify(canonical(o))]));
    const ia = index(a), ib = index(b);
    const out = [];
    for (const [k, v] of ia)
        if (!ib.has(k))
            out.push(`${k}: only in the first`);
        else if (ib.get(k) !== v)
            out.push(`${k}: differs`);
    for (const k of ib.keys())
        if (!ia.has(k))
            out.push(`${k}: only in the second`);
    return out;
}

/** The overlay directories (deploy/k8s/overlays/*). */
export function overlayDirs(root = K8S) {
    return readdirSync(path.join(root, "overlays")).sort().map((o) => path.join(root, "overlays", o));
}
