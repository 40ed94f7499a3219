// The image's packages, checked on Debian 12 without Ubuntu's archive: the Dockerfile installs
// exactly the packages of deploy/docker/ubuntu-noble-packages.txt, each with a Debian 12
// equivalent that exists (apt-cache); the build's libraries come from the build stage's
// packages, and every shared library gpujobd needs (DT_NEEDED) from a runtime-stage package or
// from the CUDA + cuDNN base. The noble names themselves: deploy/docker/check-noble-packages.sh.
import { existsSync, readFileSync, readdirSync, realpathSync } from "node:fs";
import path from "node:path";
import { BUILD_ROOT, SOURCE_ROOT, assertNone, run, runChecks, runOk } from "./lib/common.mjs";
import { parseDockerfile } from "./lib/dockerfile.mjs";

const TABLE = path.join(SOURCE_ROOT, "deploy", "docker", "ubuntu-noble-packages.txt");
const GPUJOBD = process.env.GPUJOBD || path.join(BUILD_ROOT, "service", "gpujobd");
// Sonames the nvidia/cuda:*-cudnn-runtime base provides (not Debian's packages).
const CUDA_BASE = /^lib(cudart|cufft|cublas|cublasLt|cudnn[a-z_]*|nvrtc|nvJitLink)\.so\.\d+$/;
// Libraries of every Ubuntu image (libc6, libgcc-s1: essential).
const SYSTEM_PACKAGES = new Set(["libc6", "libgcc-s1"]);

function readTable() {
    const rows = [];
    const problems = [];
    readFileSync(TABLE, "utf8").split("\n").forEach((line, i) => {
        if (!line.trim() || line.trim().startsWith("#"))
            return;
        const [stage, noble, bookworm, ...why] = line.trim().split(/\s+/);
        if (!["build", "runtime"].includes(stage) || !noble || !bookworm || !why.length)
            problems.push(`line ${i + 1}: expected 'build|runtime NOBLE BOOKWORM WHY...'`);
        rows.push({ stage, noble, bookworm });
    });
    return { rows, problems };
}

const table = readTable();
const parsed = parseDockerfile();
const stagePackages = {
    build: parsed.stages.find((s) => s.name === "build")?.apt ?? [],
    runtime: parsed.stages.at(-1).apt,
};
const bookwormOf = (stage) => new Set(table.rows.filter((r) => r.stage === stage).map((r) => r.bookworm));

/** The Debian packages that own files (one dpkg -S for all): for each file, the path as given
 * (a -dev package's symlink) first, then the file it resolves to; each as /usr/lib/... and
 * /lib/... (merged /usr has both). Returns Map file -> package or null. */
function owners(files) {
    const swap = (p) => (p.startsWith("/usr/lib/") ? p.slice(4) : p.startsWith("/lib/") ? "/usr" + p : p);
    const candidates = new Map(files.map((f) => {
        const real = realpathSync(f);
        return [f, [...new Set([f, swap(f), real, swap(real)])]];
    }));
    const all = [...new Set([...candidates.values()].flat())];
    const owned = new Map();
    for (const m of run("dpkg", ["-S", ...all]).stdout.matchAll(/^([^\s:,]+)(?::[^\s:]+)?: (\/\S+)$/gm))
        owned.set(m[2], m[1]);
    return new Map(files.map((f) => [f, candidates.get(f).map((c) => owned.get(c)).find(Boolean) ?? null]));
}

function aptListsPresent() {
    const dir = "/var/lib/apt/lists";
    return existsSync(dir) && readdirSync(dir).some((f) => f.endsWith("_Packages"));
}

/** Direct Depends (every alternative) of the packages, as a set with the packages themselves. */
function withDirectDepends(packages) {
    const out = new Set(packages);
    const text = runOk("apt-cache", ["depends", "--no-recommends", "--no-suggests", "--no-conflicts",
        "--no-breaks", "--no-replaces", "--no-enhances", ...packages]);
    for (const m of text.matchAll(/^\s*\|?Depends: <?([^\s>]+)>?/gm))
        out.add(m[1].replace(/:any$/, ""));
    return out;
}

/** Problems of the build's libraries against the Debian packages `build` brings. */
function buildLibraryProblems(build) {
    const deps = JSON.parse(runOk("meson", ["introspect", "--dependencies", BUILD_ROOT]));
    const allowed = withDirectDepends([...build]);
    const libs = deps.flatMap((d) => (d.link_args ?? [])
        .filter((a) => a.startsWith("/") && /\.so(\.|$)/.test(a) && !a.includes("/cuda"))
        .map((a) => [d.name, a]));
    const pkgs = owners(libs.map(([, a]) => a));
    const problems = [];
    for (const [name, lib] of libs) {
        const pkg = pkgs.get(lib);
        if (!pkg)
            problems.push(`${name}: ${lib} belongs to no Debian package`);
        else if (!allowed.has(pkg))
            problems.push(`${name}: ${lib} comes from ${pkg}, which no build-stage package brings`);
    }
    if (libs.length < 10)
        problems.push(`only ${libs.length} libraries found in ${BUILD_ROOT}'s dependencies`);
    return problems;
}

/** Problems of gpujobd's DT_NEEDED libraries against the Debian packages `runtime` installs. */
function runtimeLibraryProblems(runtime) {
    const needed = runOk("readelf", ["-d", GPUJOBD]).match(/\(NEEDED\).*\[(.*)\]/g)
        .map((l) => l.match(/\[(.*)\]/)[1]);
    const resolved = Object.fromEntries([...runOk("ldd", [GPUJOBD]).matchAll(/^\s*(\S+) => (\/\S+)/gm)]
        .map((m) => [m[1], m[2]]));
    const problems = [];
    const wanted = needed.filter((n) => !n.startsWith("ld-linux"));
    for (const soname of wanted.filter((n) => !resolved[n]))
        problems.push(`${soname}: ldd does not resolve it here`);
    const pkgs = owners(wanted.filter((n) => resolved[n]).map((n) => resolved[n]));
    for (const soname of wanted.filter((n) => resolved[n])) {
        const file = resolved[soname];
        const pkg = pkgs.get(file);
        if (!pkg && CUDA_BASE.test(soname))
            continue;
        if (!pkg)
            problems.push(`${soname} (${file}) belongs to no Debian package and is not CUDA's`);
        else if (!runtime.has(pkg) && !SYSTEM_PACKAGES.has(pkg))
            problems.push(`${soname} comes from ${pkg}, which the runtime stage does not install`);
    }
    return problems;
}

function without(set, name) {
    const out = new Set(set);
    if (!out.delete(name))
        throw new Error(`${name} is not in the table`);
    return out;
}

const checks = [
    ["the table is well formed", () => assertNone(table.problems, "ubuntu-noble-packages.txt")],

    ["the Dockerfile installs exactly the table's packages, stage by stage", () => {
        const problems = [];
        for (const stage of ["build", "runtime"]) {
            const listed = new Set(table.rows.filter((r) => r.stage === stage).map((r) => r.noble));
            const installed = new Set(stagePackages[stage]);
            for (const p of installed)
                if (!listed.has(p))
                    problems.push(`${stage} stage installs ${p}, which the table does not list`);
            for (const p of listed)
                if (!installed.has(p))
                    problems.push(`the table lists ${p} (${stage}), which the Dockerfile does not install`);
        }
        if (!stagePackages.build.length || !stagePackages.runtime.length)
            problems.push("found no apt-get install in one of the stages");
        assertNone(problems, "Dockerfile vs table");
    }],

    ["every Debian 12 equivalent exists (apt-cache show)", () => {
        if (!aptListsPresent()) {
            if (process.getuid() !== 0)
                throw new Error("no apt package lists here: run apt-get update as root");
            runOk("apt-get", ["update", "-qq"]);
        }
        const names = [...new Set(table.rows.map((r) => r.bookworm))];
        // One apt-cache call for all: it prints a Package: stanza for each one it knows.
        const shown = new Set([...run("apt-cache", ["show", "--no-all-versions", ...names]).stdout
            .matchAll(/^Package: (\S+)$/gm)].map((m) => m[1]));
        const missing = names.filter((n) => !shown.has(n));
        assertNone(missing.map((n) => `${n}: apt-cache knows no such package`), "Debian 12 equivalents");
    }],

    ["the build's libraries come from the build stage's packages",
        () => assertNone(buildLibraryProblems(bookwormOf("build")), "build dependencies")],

    ["every library gpujobd needs comes from a runtime package or the CUDA base",
        () => assertNone(runtimeLibraryProblems(bookwormOf("runtime")), `shared libraries of ${GPUJOBD}`)],

    // The two checks above can fail: without one package, each names what is missing.
    ["a build stage without libexpat1-dev is caught", () => {
        const p = buildLibraryProblems(without(bookwormOf("build"), "libexpat1-dev"));
        if (!p.some((x) => x.includes("libexpat")))
            throw new Error("no problem reported: " + JSON.stringify(p));
    }],
    ["a runtime stage without libgomp1 is caught", () => {
        const p = runtimeLibraryProblems(without(bookwormOf("runtime"), "libgomp1"));
        if (!p.some((x) => x.startsWith("libgomp.so.1")))
            throw new Error("no problem reported: " + JSON.stringify(p));
    }],
];

await runChecks(checks);
