// The Dockerfile's meson options are ones this source tree accepts: `meson setup` with exactly
// MESON_OPTIONS (-Dcuda=disabled instead of enabled where no nvcc is found) into a scratch
// directory, then `meson introspect --buildoptions` must show each value as given, and a CUDA
// setup must compile device code for each -Dgpu_arch entry plus PTX of the highest.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { SOURCE_ROOT, buildDir, run, runChecks } from "./lib/common.mjs";
import { mesonOptions, parseDockerfile } from "./lib/dockerfile.mjs";

const dockerOptions = mesonOptions(parseDockerfile());
const haveNvcc = run("nvcc", ["--version"]).status === 0;
const options = haveNvcc ? dockerOptions : dockerOptions.map((o) => (o === "-Dcuda=enabled" ? "-Dcuda=disabled" : o));
const scratch = mkdtempSync(path.join(buildDir(), "meson-setup-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));

function setup(dir, opts) {
    return run("meson", ["setup", dir, SOURCE_ROOT, ...opts], { env: { ...process.env, CCACHE_DISABLE: "1" } });
}

const checks = [
    [`meson setup ${options.join(" ")}`, () => {
        const r = setup(path.join(scratch, "ok"), options);
        if (r.status !== 0)
            throw new Error((r.stdout + r.stderr).trim().split("\n").slice(-15).join("\n"));
    }],

    ["each option reads back as the Dockerfile gives it", () => {
        const r = run("meson", ["introspect", "--buildoptions", path.join(scratch, "ok")]);
        if (r.status !== 0)
            throw new Error(r.stderr);
        const have = Object.fromEntries(JSON.parse(r.stdout).map((o) => [o.name, o.value]));
        const problems = [];
        for (const opt of options) {
            const m = opt.match(/^-D([^=]+)=(.*)$/);
            if (!m) {
                problems.push(`${opt}: not a -Dname=value option`);
                continue;
            }
            const [, name, value] = m;
            if (!(name in have))
                problems.push(`${name}: meson has no such option`);
            else if (String(have[name]) !== value)
                problems.push(`${name}: meson reads '${have[name]}', the Dockerfile gives '${value}'`);
        }
        if (problems.length)
            throw new Error(problems.join("; "));
    }],

    ["-Dgpu_arch: device code for each entry, PTX of the highest", () => {
        if (!haveNvcc)
            return "skip: no nvcc here, so the setup above was CPU-only";
        const arch = options.find((o) => o.startsWith("-Dgpu_arch=")).split("=")[1].split(",");
        const ninja = readFileSync(path.join(scratch, "ok", "build.ninja"), "utf8");
        const flags = new Set(ninja.match(/-gencode=arch=compute_\w+,code=\w+/g) ?? []);
        const want = arch.map((a) => `-gencode=arch=compute_${a},code=sm_${a}`);
        const ptx = Math.max(...arch.filter((a) => /^\d+$/.test(a)).map(Number));
        want.push(`-gencode=arch=compute_${ptx},code=compute_${ptx}`);
        const missing = want.filter((f) => !flags.has(f));
        const extra = [...flags].filter((f) => !want.includes(f));
        if (missing.length || extra.length)
            throw new Error(`missing ${JSON.stringify(missing)}, unexpected ${JSON.stringify(extra)}`);
    }],

    // The setup above could only pass if wrong options fail: two that must.
    ["an option meson does not have is refused", () => {
        const r = setup(path.join(scratch, "bad1"), [...options, "-Dgpu_arches=90"]);
        if (r.status === 0 || !/gpu_arches/.test(r.stdout + r.stderr))
            throw new Error("meson setup accepted -Dgpu_arches=90");
    }],
    ["a -Dgpu_arch that is no compute capability is refused, naming it", () => {
        if (!haveNvcc)
            return "skip: -Dgpu_arch is read only when CUDA is enabled";
        const r = setup(path.join(scratch, "bad2"), options.map((o) => (o.startsWith("-Dgpu_arch=") ? "-Dgpu_arch=80,sm_90" : o)));
        if (r.status === 0 || !/"sm_90" is not a compute capability/.test(r.stdout + r.stderr))
            throw new Error("meson setup accepted -Dgpu_arch=80,sm_90, or said nothing about it");
    }],
];

await runChecks(checks);
