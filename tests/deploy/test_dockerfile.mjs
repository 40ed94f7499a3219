// The Dockerfile, without a container builder: lint, the rules of lib/dockerfile_checks.mjs on
// the real file (all must hold), the same rules on broken copies (each must catch its break),
// and shellcheck on the scripts the image runs.
import { readFileSync } from "node:fs";
import path from "node:path";
import { SOURCE_ROOT, assertNone, run, runChecks, runOk } from "./lib/common.mjs";
import { DOCKERFILE } from "./lib/dockerfile.mjs";
import { checkDockerfile } from "./lib/dockerfile_checks.mjs";

const text = readFileSync(DOCKERFILE, "utf8");
const context = {
    dockerignore: readFileSync(path.join(SOURCE_ROOT, ".dockerignore"), "utf8"),
    trackedFiles: runOk("git", ["-C", SOURCE_ROOT, "ls-files"]).split("\n").filter(Boolean),
};

/** Replaces exactly one occurrence (so that a mutation that no longer applies fails loudly). */
function once(from, to) {
    return (t) => {
        const n = t.split(from).length - 1;
        if (n !== 1)
            throw new Error(`mutation: '${from}' occurs ${n} times in the Dockerfile`);
        return t.replace(from, to);
    };
}

// [what is broken, how, the check that must report it]
const BREAKS = [
    ["runs as root", once("USER 10001:10001", "USER root"), "runs as a numeric non-root user it creates"],
    ["no HEALTHCHECK", (t) => t.replace(/HEALTHCHECK[^\n]*\\\n[^\n]*\n/, ""), "HEALTHCHECK runs the healthcheck script"],
    ["a latest base", once("FROM nvidia/cuda:${CUDA_VERSION}-cudnn-runtime-ubuntu24.04", "FROM nvidia/cuda:latest"),
        "base images pinned, never latest"],
    ["a base without cuDNN", once("-cudnn-runtime-ubuntu24.04\nARG", "-runtime-ubuntu24.04\nARG"),
        "CUDA 13 + cuDNN bases, devel to build, runtime to run"],
    ["shell-form entrypoint", once('ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/gpujobd-entrypoint"]',
        "ENTRYPOINT /usr/local/bin/gpujobd-entrypoint"), "ENTRYPOINT: tini, then the entrypoint script"],
    ["apt lists kept", once(" \\\n && rm -rf /var/lib/apt/lists/* \\\n && groupadd", " \\\n && groupadd"),
        "apt-get: update, no recommends, lists removed"],
    ["a COPY of a missing file", once("deploy/docker/healthcheck.sh", "deploy/docker/health.sh"),
        "COPY sources are in the build context"],
    ["sm_80 dropped", once("-Dgpu_arch=80,86,89,90", "-Dgpu_arch=86,89,90"), "kernels for sm_80/86/89/90 + PTX, cuDNN"],
    ["no data directory for the user", once("install -d -o 10001 -g 10001 -m 0750 /var/lib/gpujobd", "true"),
        "data directory, ENV, VOLUME, WORKDIR, EXPOSE agree"],
    ["no PostgreSQL", once(" postgresql-16 ", " "), "PostgreSQL for the embedded default"],
    ["lowercase instruction", once("\nEXPOSE 8443", "\nexpose 8443"), "lint (dockerfile-utils)"],
];

const checks = [];
for (const { name, problems } of checkDockerfile(text, context))
    checks.push([`Dockerfile: ${name}`, () => assertNone(problems, name)]);

for (const [what, mutate, expected] of BREAKS)
    checks.push([`broken Dockerfile (${what}) is caught by '${expected}'`, () => {
        const results = checkDockerfile(mutate(text), context);
        const hit = results.find((r) => r.name === expected);
        if (!hit)
            throw new Error(`no check named '${expected}'`);
        if (!hit.problems.length)
            throw new Error("the check passed the broken Dockerfile");
    }]);

checks.push([".dockerignore drops a source file: caught", () => {
    const results = checkDockerfile(text, { ...context, dockerignore: context.dockerignore + "\nservice\n" });
    const hit = results.find((r) => r.name === ".dockerignore: local state out, tracked files in");
    if (!hit.problems.some((p) => p.includes("service/")))
        throw new Error("an ignored service/ went unnoticed");
}]);

checks.push(["shellcheck of the image's scripts and this suite's", () => {
    const dir = path.join(SOURCE_ROOT, "deploy", "docker");
    const scripts = ["entrypoint.sh", "healthcheck.sh", "check-binary.sh", "cudnn-prefix.sh",
        "check-noble-packages.sh", "build.sh"].map((s) => path.join(dir, s))
        .concat(["run_node.sh", "fetch_deb.sh"].map((s) => path.join(SOURCE_ROOT, "tests", "deploy", s)));
    const r = run("shellcheck", ["-s", "sh", ...scripts]);
    if (r.status === 127)
        throw new Error("shellcheck is not installed (tools/debian-packages.txt lists it)");
    if (r.status !== 0)
        throw new Error(r.stdout.trim());
}]);

await runChecks(checks);
