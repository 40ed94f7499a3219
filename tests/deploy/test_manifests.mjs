// The Kubernetes manifests: each overlay rendered by every kustomize at hand (Debian's kubectl
// 1.20, the machine's newer kubectl), the renderings identical, and every object through the
// checks of lib/k8s_checks.mjs. test_manifests_negative.mjs shows those checks fail on broken
// copies.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { SOURCE_ROOT, assertNone, buildDir, runChecks } from "./lib/common.mjs";
import { checkOverlay, context } from "./lib/k8s_checks.mjs";
import { diffRenderings, overlayDirs, render, renderers } from "./lib/k8s_render.mjs";

const ctx = context();
const list = renderers();
console.log(`renderers: ${list.map((r) => r.name).join("; ")}`);
const checks = [];

for (const dir of overlayDirs()) {
    const overlay = path.basename(dir);
    if (list.length > 1)
        checks.push([`${overlay}: ${list.map((r) => r.name.split(",")[0]).join(" and ")} render the same objects`, () => {
            const [first, ...rest] = list.map((r) => render(r, dir));
            for (const other of rest)
                assertNone(diffRenderings(first, other), "renderings differ");
        }]);
    const results = await checkOverlay(dir, list[0], ctx);
    for (const { name, problems } of results)
        checks.push([`${overlay}: ${name}`, () => assertNone(problems, name)]);
}

// README's "your overlay" example (kustomize v4+: a directory under resources:), rendered the
// way an operator would, beside this tree.
checks.push(["README's own-overlay example renders and passes the checks", async () => {
    const modern = list.find((r) => !/v1\.(1\d|20)\./.test(r.name));
    if (!modern)
        return "skip: no kubectl 1.21+ here (the example uses resources: for a directory)";
    const block = readFileSync(path.join(SOURCE_ROOT, "README.md"), "utf8")
        .match(/cat > gpujobd-prod\/kustomization\.yaml <<'YAML'\n([\s\S]*?)\nYAML\n/);
    if (!block)
        throw new Error("README.md has no gpujobd-prod/kustomization.yaml example");
    const dir = mkdtempSync(path.join(buildDir(), "readme-"));
    try {
        symlinkSync(SOURCE_ROOT, path.join(dir, "gpujobd"));
        mkdirSync(path.join(dir, "gpujobd-prod"));
        writeFileSync(path.join(dir, "gpujobd-prod", "kustomization.yaml"), block[1] + "\n");
        const results = await checkOverlay(path.join(dir, "gpujobd-prod"), modern, ctx, "", "production");
        const failed = results.filter((r) => r.problems.length);
        assertNone(failed.flatMap((r) => r.problems.map((p) => `${r.name}: ${p}`)), "the README example");
        const images = render(modern, path.join(dir, "gpujobd-prod")).flatMap((o) =>
            (o.spec?.template?.spec?.containers ?? []).map((c) => c.image));
        if (!images.length || images.some((i) => !i.startsWith("registry.mycorp.example/gpujobd:")))
            throw new Error(`the example's images: ${images.join(", ")}`);
    } finally {
        rmSync(dir, { recursive: true, force: true });
    }
}]);

await runChecks(checks);
