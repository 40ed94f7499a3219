// Shared by the deploy tests: where the trees are, running commands, and a small check runner
// that prints one line a check and the closing "N passed, N failed".
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const SOURCE_ROOT = process.env.GJ_SOURCE_ROOT || path.resolve(here, "../../..");
export const BUILD_ROOT = process.env.GJ_BUILD_ROOT || path.join(SOURCE_ROOT, "build");
export const DEPLOY_TESTS = path.resolve(here, "..");

/** A scratch directory of this suite in the build tree (kept between runs: caches). */
export function buildDir(...parts) {
    const dir = path.join(BUILD_ROOT, "tests", "deploy", ...parts);
    mkdirSync(dir, { recursive: true });
    return dir;
}

/** Runs a command; returns {status, stdout, stderr}. Never throws on a non-zero exit. */
export function run(cmd, args, opts = {}) {
    const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 64 << 20, ...opts });
    if (r.error && r.error.code === "ENOENT")
        return { status: 127, stdout: "", stderr: `${cmd}: not found` };
    if (r.error)
        throw r.error;
    return { status: r.status ?? 128 + 1, stdout: r.stdout, stderr: r.stderr };
}

/** Like run(), but a non-zero exit is an error carrying the command's stderr. */
export function runOk(cmd, args, opts = {}) {
    const r = run(cmd, args, opts);
    if (r.status !== 0)
        throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}: ${(r.stderr || r.stdout).trim().slice(-2000)}`);
    return r.stdout;
}

/**
 * Runs named checks in order; each returns nothing (pass) or throws (fail), or returns the
 * string "skip: why". One failing check does not stop the others.
 */
export async function runChecks(checks) {
    let passed = 0, failed = 0, skipped = 0;
    for (const [name, fn] of checks) {
        const t0 = Date.now();
        try {
            const r = await fn();
            if (typeof r === "string" && r.startsWith("skip:")) {
                skipped++;
                console.log(`skip ${name}: ${r.slice(5).trim()}`);
                continue;
            }
            passed++;
            console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)}s)`);
        } catch (e) {
            failed++;
            console.log(`FAIL ${name}: ${e.message}`);
        }
    }
    console.log(`${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
    process.exitCode = failed ? 1 : 0;
}

/** Throws with every message of a list of problems, when there is one. */
export function assertNone(problems, what) {
    if (problems.length)
        throw new Error(`${what}:\n  - ` + problems.join("\n  - "));
}
