// The checks of the Dockerfile that need no container builder: lint (dockerfile-utils), then
// the rules a reviewer (or hadolint) would hold it to, and what gpujobd itself needs. Each
// check returns a list of problems; test_dockerfile.mjs runs them on the real file and on
// deliberately broken copies.
import { existsSync } from "node:fs";
import path from "node:path";
import dockerignore from "@balena/dockerignore";
import { validate as lint } from "dockerfile-utils";
import { SOURCE_ROOT } from "./common.mjs";
import { copies, expand, instructions, labels, mesonOptions, parseDockerfile } from "./dockerfile.mjs";

const CUDA_IMAGE = /^nvidia\/cuda:(\d+\.\d+\.\d+)-cudnn-(devel|runtime)-ubuntu24\.04$/;
const REQUIRED_LABELS = ["title", "description", "version", "revision", "licenses"].map(
    (k) => "org.opencontainers.image." + k);

function finalStage(p) {
    return p.stages.at(-1);
}

function stageVars(p, stage) {
    const vars = { ...p.globalArgs };
    for (const [k, v] of Object.entries(stage.args))
        vars[k] = v ?? p.globalArgs[k];
    return vars;
}

function lintProblems(p) {
    return lint(p.text).map((d) => `line ${d.range.start.line + 1}: ${d.message}`);
}

function baseImages(p) {
    const problems = [];
    if (p.stages.length !== 2)
        return [`expected two stages (build, runtime), found ${p.stages.length}`];
    const [build, runtime] = p.stages.map((s) => s.image.match(CUDA_IMAGE));
    if (!build || build[2] !== "devel" || p.stages[0].name !== "build")
        problems.push(`the first stage must be nvidia/cuda:X.Y.Z-cudnn-devel-ubuntu24.04 AS build, not ${p.stages[0].image}`);
    if (!runtime || runtime[2] !== "runtime")
        problems.push(`the last stage must be nvidia/cuda:X.Y.Z-cudnn-runtime-ubuntu24.04, not ${p.stages[1].image}`);
    if (build && runtime && build[1] !== runtime[1])
        problems.push(`build (${build[1]}) and runtime (${runtime[1]}) CUDA versions differ`);
    if (runtime && !runtime[1].startsWith("13."))
        problems.push(`CUDA ${runtime[1]}: the service is built for CUDA 13`);
    return problems;
}

function pinnedImages(p) {
    const problems = [];
    for (const s of p.stages) {
        const m = s.image.match(/^([^@]+?)(?::([^:/@]+))?(@sha256:[0-9a-f]{64})?$/);
        if (!m || (!m[2] && !m[3]))
            problems.push(`FROM ${s.image}: no tag or digest`);
        else if (m[2] === "latest")
            problems.push(`FROM ${s.image}: 'latest' is not a pinned version`);
        if (s.image.includes("$"))
            problems.push(`FROM ${s.rawImage}: an argument without a default`);
    }
    return problems;
}

function nonRootUser(p) {
    const stage = finalStage(p);
    const users = instructions(stage, "USER");
    if (!users.length)
        return ["the runtime stage has no USER: the service would run as root"];
    const spec = users.at(-1).getArgumentsContent().trim();
    const [user, group] = spec.split(":");
    const problems = [];
    if (!/^\d+$/.test(user) || user === "0")
        problems.push(`USER ${spec}: a numeric uid other than 0 (Kubernetes' runAsNonRoot can only verify numbers)`);
    const runs = stage.runs.join("\n");
    if (!new RegExp(`useradd[^\\n]*--uid ${user}\\b`).test(runs))
        problems.push(`no 'useradd --uid ${user}' in the runtime stage (initdb needs a passwd entry)`);
    if (group && !new RegExp(`groupadd[^\\n]*--gid ${group}\\b`).test(runs))
        problems.push(`no 'groupadd --gid ${group}' in the runtime stage`);
    return problems;
}

function healthcheck(p) {
    const stage = finalStage(p);
    const hc = instructions(stage, "HEALTHCHECK").at(-1);
    if (!hc)
        return ["the runtime stage has no HEALTHCHECK"];
    const problems = [];
    if (hc.getSubcommand()?.getValue().toUpperCase() !== "CMD")
        problems.push("HEALTHCHECK NONE: the image must check itself");
    const flags = Object.fromEntries(hc.getFlags().map((f) => [f.getName(), f.getValue()]));
    if (!flags["start-period"])
        problems.push("HEALTHCHECK without --start-period: the first start runs initdb and the migrations");
    const cmd = hc.getArgumentsContent();
    const script = copies(stage).find((c) => c.sources.includes("deploy/docker/healthcheck.sh"));
    if (!script || !cmd.includes(script.dest))
        problems.push("HEALTHCHECK must run deploy/docker/healthcheck.sh as copied into the image");
    return problems;
}

function entrypoint(p) {
    const stage = finalStage(p);
    const ep = instructions(stage, "ENTRYPOINT").at(-1);
    if (!ep)
        return ["the runtime stage has no ENTRYPOINT"];
    const words = ep.getJSONStrings?.().map((s) => s.getJSONValue()) ?? [];
    if (!words.length)
        return ["ENTRYPOINT must be the exec (JSON) form: the shell form does not pass signals on"];
    const problems = [];
    if (words[0] !== "/usr/bin/tini" || words[1] !== "--")
        problems.push(`ENTRYPOINT ${JSON.stringify(words)}: tini first (PID 1 reaps the embedded PostgreSQL's orphans)`);
    const script = copies(stage).find((c) => c.sources.includes("deploy/docker/entrypoint.sh"));
    if (!script || words.at(-1) !== script.dest)
        problems.push("ENTRYPOINT must end with deploy/docker/entrypoint.sh as copied into the image");
    if (!stage.apt.includes("tini"))
        problems.push("tini is not installed in the runtime stage");
    return problems;
}

function requiredLabels(p) {
    const stage = finalStage(p);
    const have = labels(stage, stageVars(p, stage));
    return REQUIRED_LABELS.filter((k) => !have[k]).map((k) => `LABEL ${k} is missing`);
}

function aptHygiene(p) {
    const problems = [];
    for (const s of p.stages)
        for (const run of s.runs) {
            if (!/apt-get install/.test(run))
                continue;
            const one = run.replace(/\\\n/g, " ").replace(/\s+/g, " ").slice(0, 60);
            if (!/apt-get update/.test(run))
                problems.push(`'${one}...': apt-get update belongs in the same RUN as install`);
            if (!/--no-install-recommends/.test(run))
                problems.push(`'${one}...': install with --no-install-recommends`);
            if (!/rm -rf \/var\/lib\/apt\/lists\/\*/.test(run))
                problems.push(`'${one}...': remove /var/lib/apt/lists/* in the same RUN`);
            if (/apt-get (dist-)?upgrade/.test(run))
                problems.push(`'${one}...': no apt-get upgrade: the base image's version is the pinned one`);
        }
    return problems;
}

function contextCopies(p, ctx) {
    const ig = dockerignore({ ignorecase: false }).add(ctx.dockerignore);
    const problems = [];
    for (const s of p.stages)
        for (const c of copies(s)) {
            if (c.from)
                continue;
            for (const src of c.sources) {
                if (src === ".")
                    continue;
                if (!existsSync(path.join(SOURCE_ROOT, src)))
                    problems.push(`COPY ${src}: no such file in the tree`);
                else if (ig.ignores(src))
                    problems.push(`COPY ${src}: .dockerignore leaves it out of the build context`);
            }
        }
    return problems;
}

function copiesFromBuild(p) {
    const build = p.stages.find((s) => s.name === "build");
    const problems = [];
    for (const c of copies(finalStage(p))) {
        if (!c.from)
            continue;
        if (c.from !== "build") {
            problems.push(`COPY --from=${c.from}: only the build stage is copied from`);
            continue;
        }
        for (const src of c.sources) {
            const copiedThere = copies(build).some((bc) => path.posix.join(bc.dest, path.posix.basename(src)) === src);
            const ninja = build.runs.some((r) => {
                const m = r.match(/ninja -C (\S+) (\S+)/);
                return m && path.posix.join(m[1], m[2]) === src;
            });
            if (!copiedThere && !ninja)
                problems.push(`COPY --from=build ${src}: the build stage neither copies nor builds it`);
        }
    }
    return problems;
}

function dockerignoreRules(p, ctx) {
    const ig = dockerignore({ ignorecase: false }).add(ctx.dockerignore);
    const problems = [];
    for (const local of [".git/HEAD", "var/pg/PG_VERSION", "var/admin.key", "build/service/gpujobd",
        "build-cuda/build.ninja", ".debs/libfoo.deb", "tests/deploy/node_modules/yaml/package.json"])
        if (!ig.ignores(local))
            problems.push(`.dockerignore lets ${local} into the build context`);
    for (const f of ctx.trackedFiles)
        if (!path.posix.basename(f).startsWith(".git") && ig.ignores(f))
            problems.push(`.dockerignore leaves the tracked file ${f} out of the build context`);
    return problems;
}

function dataDirectory(p) {
    const stage = finalStage(p);
    const env = {};
    for (const ins of instructions(stage, "ENV"))
        for (const prop of ins.getProperties())
            env[prop.getName()] = prop.getValue();
    const dir = env.GPUJOBD_DATA_DIR;
    if (!dir)
        return ["ENV GPUJOBD_DATA_DIR is not set in the runtime stage"];
    const problems = [];
    const user = instructions(stage, "USER").at(-1)?.getArgumentsContent().trim().split(":")[0];
    const runs = stage.runs.join("\n");
    if (!new RegExp(`install -d -o ${user} -g \\d+ -m 07[0-5]0 ${dir}\\b`).test(runs))
        problems.push(`the data directory ${dir} is not created for uid ${user} (install -d -o ${user} ... ${dir})`);
    const volumes = instructions(stage, "VOLUME").flatMap((v) => v.getJSONStrings?.().map((s) => s.getJSONValue()) ?? []);
    if (!volumes.includes(dir))
        problems.push(`VOLUME ${dir} is missing: a plain docker run would keep the database in the container layer`);
    const workdir = instructions(stage, "WORKDIR").at(-1)?.getArgumentsContent().trim();
    if (workdir !== dir)
        problems.push(`WORKDIR ${workdir} is not the data directory ${dir}`);
    const listen = env.GPUJOBD_LISTEN ?? "";
    const port = listen.split(":").at(-1);
    if (!listen.startsWith("0.0.0.0:"))
        problems.push(`GPUJOBD_LISTEN=${listen}: a container listens on all interfaces`);
    const exposed = instructions(stage, "EXPOSE").map((e) => e.getArgumentsContent().trim());
    if (!exposed.includes(port))
        problems.push(`EXPOSE ${exposed.join(" ")} does not include the listen port ${port}`);
    return problems;
}

function gpuArchitectures(p) {
    const opts = mesonOptions(p);
    const arch = opts.find((o) => o.startsWith("-Dgpu_arch="))?.split("=")[1];
    const problems = [];
    if (!opts.includes("-Dcuda=enabled"))
        problems.push("MESON_OPTIONS must have -Dcuda=enabled (auto would quietly build a CPU-only image)");
    if (!opts.some((o) => o.startsWith("-Dcudnn_dir=")))
        problems.push("MESON_OPTIONS must name -Dcudnn_dir (the ONNX runtime's CUDA backend)");
    const want = ["80", "86", "89", "90"];
    const have = (arch ?? "").split(",");
    for (const a of want)
        if (!have.includes(a))
            problems.push(`-Dgpu_arch=${arch}: sm_${a} is missing`);
    const stage = finalStage(p);
    const label = labels(stage, stageVars(p, stage))["io.gpujobd.gpu-arch"] ?? "";
    const ptx = Math.max(...have.filter((a) => /^\d+$/.test(a)).map(Number));
    const expected = [...have.map((a) => `sm_${a}`), `compute_${ptx}`].join(",");
    if (label !== expected)
        problems.push(`LABEL io.gpujobd.gpu-arch="${label}" does not say what -Dgpu_arch=${arch} builds ("${expected}")`);
    return problems;
}

function embeddedPostgres(p) {
    const stage = finalStage(p);
    const problems = [];
    if (!stage.apt.some((pkg) => /^postgresql-\d+$/.test(pkg)))
        problems.push("no postgresql-N package in the runtime stage: the embedded default needs initdb and postgres");
    if (!stage.runs.some((r) => /create_main_cluster = false/.test(r)))
        problems.push("postgresql-common would create a cluster of its own at install (create_main_cluster = false)");
    return problems;
}

function stopSignal(p) {
    const s = instructions(finalStage(p), "STOPSIGNAL").at(-1)?.getArgumentsContent().trim();
    return s && s !== "SIGTERM" ? [`STOPSIGNAL ${s}: gpujobd drains on SIGTERM`] : [];
}

/** Every check: [name, (parsed, context) => problems]. */
export const DOCKERFILE_CHECKS = [
    ["lint (dockerfile-utils)", lintProblems],
    ["CUDA 13 + cuDNN bases, devel to build, runtime to run", baseImages],
    ["base images pinned, never latest", pinnedImages],
    ["runs as a numeric non-root user it creates", nonRootUser],
    ["HEALTHCHECK runs the healthcheck script", healthcheck],
    ["ENTRYPOINT: tini, then the entrypoint script", entrypoint],
    ["OCI labels", requiredLabels],
    ["apt-get: update, no recommends, lists removed", aptHygiene],
    ["COPY sources are in the build context", contextCopies],
    ["COPY --from=build sources are made there", copiesFromBuild],
    [".dockerignore: local state out, tracked files in", dockerignoreRules],
    ["data directory, ENV, VOLUME, WORKDIR, EXPOSE agree", dataDirectory],
    ["kernels for sm_80/86/89/90 + PTX, cuDNN", gpuArchitectures],
    ["PostgreSQL for the embedded default", embeddedPostgres],
    ["STOPSIGNAL", stopSignal],
];

/** Runs every check on a Dockerfile's text; returns [{name, problems}]. */
export function checkDockerfile(text, ctx) {
    const parsed = parseDockerfile(text);
    return DOCKERFILE_CHECKS.map(([name, fn]) => {
        try {
            return { name, problems: fn(parsed, ctx) };
        } catch (e) {
            return { name, problems: [e.message] };
        }
    });
}

export { expand };
