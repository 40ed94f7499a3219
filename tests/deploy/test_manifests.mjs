// The Kubernetes manifests: each overlay rendered by every kustomize at hand (Debian's kubectl
// 1.20, the machine's newer kubectl), the renderings identical, and every object through the
// checks of lib/k8s_checks.mjs. test_manifests_negative.mjs shows those checks fail on broken
// copies.
import path from "node:path";
import { assertNone, runChecks } from "./lib/common.mjs";
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

await runChecks(checks);
