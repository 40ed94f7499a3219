// One overlay through every check: render, JSON Schemas, strict fields, the policy rules, the
// overlay's shape, and gpujobd's own parser on each container's flags and GPUJOBD_* variables.
// Shared by test_manifests.mjs (the real tree) and test_manifests_negative.mjs (broken copies).
import path from "node:path";
import { SOURCE_ROOT, run, runOk } from "./common.mjs";
import { OVERLAY_SHAPES, POLICY_RULES, commandLine, workloads } from "./k8s_policy.mjs";
import { render } from "./k8s_render.mjs";
import { fieldProblems, schemaProblems } from "./k8s_schema.mjs";

// Read by gpujobd from the environment without being a flag's twin, or a flag being added
// (issue 13: --admin-key-file / GPUJOBD_ADMIN_KEY_FILE, by the secrets-from-files work).
const EXTRA_ENV = new Set(["GPUJOBD_ADMIN_KEY_FILE", "GPUJOBD_MODELS_DIR", "GPUJOBD_PSEUDONYM_SECRET",
    "GPUJOBD_INFER_PURGE_PHI", "GPUJOBD_PG_BINDIR", "GPUJOBD_PG_USER"]);

/** What checkOverlay needs besides the tree: the gpujobd binary and the image tag. */
export function context() {
    const gpujobd = process.env.GPUJOBD || path.join(process.env.GJ_BUILD_ROOT || path.join(SOURCE_ROOT, "build"), "service", "gpujobd");
    const imageTag = runOk("sh", [path.join(SOURCE_ROOT, "deploy", "docker", "build.sh"), "--print-tag"]).trim();
    return { gpujobd, imageTag, helps: {} };
}

/** The flags and variables `gpujobd COMMAND --help` lists. */
function known(ctx, command) {
    if (!ctx.helps[command]) {
        const text = runOk(ctx.gpujobd, [command, "--help"]);
        ctx.helps[command] = {
            flags: new Set([...text.matchAll(/^\s+--([a-z0-9-]+)/gm)].map((m) => m[1])),
            env: new Set([...text.matchAll(/\[(GPUJOBD_[A-Z0-9_]+)\]/g)].map((m) => m[1])),
        };
    }
    return ctx.helps[command];
}

/**
 * Every container's settings through gpujobd itself: each --flag and GPUJOBD_* variable must be
 * one it has, and `gpujobd COMMAND ARGS... --help` with that environment must accept every value
 * (the parser checks each as it reads it; --help then stops before anything starts).
 */
export function binaryProblems(objects, ctx) {
    const problems = [];
    for (const w of workloads(objects))
        for (const c of w.pod.containers ?? []) {
            const { command, flags } = commandLine(c);
            if (!["serve", "migrate"].includes(command)) {
                problems.push(`${w.key} ${c.name}: args start with '${command}', not serve or migrate`);
                continue;
            }
            const k = known(ctx, command);
            for (const f of Object.keys(flags))
                if (!k.flags.has(f))
                    problems.push(`${w.key} ${c.name}: gpujobd ${command} has no --${f}`);
            const env = { PATH: process.env.PATH };
            for (const e of c.env ?? []) {
                if (!e.name.startsWith("GPUJOBD_"))
                    continue;
                if (!k.env.has(e.name) && !EXTRA_ENV.has(e.name))
                    problems.push(`${w.key} ${c.name}: gpujobd ${command} reads no ${e.name}`);
                env[e.name] = e.valueFrom ? "postgresql:///from-a-secret" : String(e.value ?? "");
            }
            const r = run(ctx.gpujobd, [...c.args, "--help"], { env });
            if (r.status !== 0)
                problems.push(`${w.key} ${c.name}: gpujobd refuses its settings: ${(r.stderr || r.stdout).trim()}`);
        }
    return problems;
}

function checkPolicyNames() {
    return POLICY_RULES.map(([name]) => name);
}

function checkPolicy(objects, ctx, name) {
    return POLICY_RULES.find(([n]) => n === name)[1](objects, ctx);
}

/**
 * [{name, problems}] for one overlay directory, rendered by `renderer`: every check, or with
 * `only`, the rendering and the checks whose name contains it; `overlay` names the shape
 * (OVERLAY_SHAPES) it must have, by default the directory's name.
 */
export async function checkOverlay(dir, renderer, ctx, only = "", overlay = path.basename(dir)) {
    let objects;
    try {
        objects = render(renderer, dir);
    } catch (e) {
        return [{ name: "renders", problems: [e.message] }];
    }
    const shape = OVERLAY_SHAPES[overlay];
    const checks = [
        ["JSON Schemas (kubernetes-models, KEDA, Prometheus Operator)", () => schemaProblems(objects)],
        ["no field the API does not have (TypeScript models)", () => fieldProblems(objects)],
        ...checkPolicyNames().map((name) => [name, () => checkPolicy(objects, ctx, name)]),
        ["what the overlay is for", () => (shape ? shape(objects) : [`no shape for overlay ${overlay}`])],
        ["gpujobd accepts every flag and variable", () => binaryProblems(objects, ctx)],
    ];
    const results = [{ name: "renders", problems: objects.length ? [] : ["no objects"] }];
    for (const [name, fn] of checks)
        if (name.includes(only))
            results.push({ name, problems: await fn() });
    return results;
}
