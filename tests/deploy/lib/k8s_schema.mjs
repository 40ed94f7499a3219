// Every rendered object against the Kubernetes schemas, in two passes over the same models
// (npm kubernetes-models for the core API; @kubernetes-models/keda and
// @kubernetes-models/prometheus-operator, generated from those projects' CRDs):
//   1. the JSON Schema validators: types, required fields, enums, formats, patterns;
//   2. TypeScript's excess-property check against the models' type declarations: a field the
//      API does not have (a typo, a field at the wrong level). The JSON schemas allow unknown
//      fields, like the OpenAPI they come from; an API server with strict field validation
//      (kubectl's default since 1.27) refuses them.
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DEPLOY_TESTS, buildDir, run } from "./common.mjs";
import { objectKey } from "./k8s_render.mjs";

// API groups served by CRD model packages; everything else is kubernetes-models' own.
const CRD_PACKAGES = {
    "keda.sh": "@kubernetes-models/keda",
    "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
};

/** The module that models apiVersion/kind, e.g. kubernetes-models/apps/v1/Deployment. */
export function modelModule(apiVersion, kind) {
    const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
    const pkg = CRD_PACKAGES[group] ?? "kubernetes-models";
    if (!/^[A-Za-z0-9]+$/.test(kind) || !/^[a-z0-9.]*\/?v[0-9a-z]+$/.test(apiVersion))
        throw new Error(`unexpected apiVersion/kind ${apiVersion}/${kind}`);
    return `${pkg}/${apiVersion}/${kind}`;
}

/** Pass 1: JSON Schema validation. Returns problems. */
export async function schemaProblems(objects) {
    const problems = [];
    for (const o of objects) {
        const key = objectKey(o);
        let Model;
        try {
            const mod = await import(modelModule(o.apiVersion ?? "", o.kind ?? ""));
            Model = mod[o.kind];
        } catch (e) {
            problems.push(`${key}: no schema for ${o.apiVersion} ${o.kind} (${e.message.split("\n")[0]})`);
            continue;
        }
        try {
            new Model(o).validate();
        } catch (e) {
            problems.push(`${key}: ${e.message}`);
        }
    }
    return problems;
}

/** Pass 2: TypeScript's strict object-literal check. Returns problems. */
export function fieldProblems(objects) {
    const dir = mkdtempSync(path.join(buildDir(), "tsc-"));
    try {
        symlinkSync(path.join(DEPLOY_TESTS, "node_modules"), path.join(dir, "node_modules"));
        const header = [];
        const body = [];
        objects.forEach((o, i) => {
            header.push(`import type { I${o.kind} as T${i} } from "${modelModule(o.apiVersion, o.kind)}";`);
            body.push(`export const o${i}: T${i} = ${JSON.stringify(o)};`);
        });
        writeFileSync(path.join(dir, "objects.ts"), header.concat(body).join("\n") + "\n");
        writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({
            compilerOptions: { strict: true, noEmit: true, module: "nodenext", moduleResolution: "nodenext",
                skipLibCheck: true, types: [] },
            files: ["objects.ts"],
        }));
        const tsc = path.join(DEPLOY_TESTS, "node_modules", ".bin", "tsc");
        const r = run(tsc, ["-p", path.join(dir, "tsconfig.json")]);
        if (r.status === 0)
            return [];
        const problems = [];
        for (const m of (r.stdout + r.stderr).matchAll(/^objects\.ts\((\d+),\d+\): error (TS\d+: .*)$/gm)) {
            const i = Number(m[1]) - 1 - objects.length;
            problems.push(i >= 0 && i < objects.length ? `${objectKey(objects[i])}: ${m[2]}` : m[2]);
        }
        return problems.length ? problems : [`tsc failed: ${(r.stdout + r.stderr).trim().slice(0, 2000)}`];
    } finally {
        rmSync(dir, { recursive: true, force: true });
    }
}
