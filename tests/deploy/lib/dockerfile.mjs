// What the Dockerfile says, read with dockerfile-ast (the parser of VS Code's Dockerfile
// language server): its stages, build arguments, the packages each stage installs with apt-get,
// the meson options, COPY sources.
import { readFileSync } from "node:fs";
import path from "node:path";
import { DockerfileParser } from "dockerfile-ast";
import { SOURCE_ROOT } from "./common.mjs";

export const DOCKERFILE = path.join(SOURCE_ROOT, "Dockerfile");

/** Replaces ${NAME} and $NAME with values from vars (build arguments' defaults). */
export function expand(text, vars) {
    return text.replace(/\$\{(\w+)\}|\$(\w+)/g, (m, a, b) => (vars[a ?? b] ?? m));
}

/** The words of a RUN's shell text after `apt-get install` up to the next `&&`, minus options. */
export function aptInstalls(shellText) {
    const words = shellText.replace(/\\\n/g, " ").split(/\s+/).filter(Boolean);
    const packages = [];
    for (let i = 0; i < words.length; i++) {
        if (words[i] !== "apt-get" || words[i + 1] !== "install")
            continue;
        for (let j = i + 2; j < words.length && !["&&", "||", ";", "|"].includes(words[j]); j++)
            if (!words[j].startsWith("-"))
                packages.push(words[j]);
    }
    return packages;
}

export function parseDockerfile(text = readFileSync(DOCKERFILE, "utf8")) {
    const df = DockerfileParser.parse(text);
    const globalArgs = {};
    const stages = [];
    let stage = null;
    for (const ins of df.getInstructions()) {
        const keyword = ins.getKeyword();
        if (keyword === "FROM") {
            const args = ins.getArguments().map((a) => a.getValue());
            stage = {
                from: ins, image: expand(ins.getImage() ?? "", globalArgs), name: ins.getBuildStage() ?? null,
                args: {}, instructions: [], apt: [], runs: [],
            };
            stage.rawImage = args[0];
            stages.push(stage);
            continue;
        }
        if (keyword === "ARG") {
            const p = ins.getProperty();
            const target = stage ? stage.args : globalArgs;
            if (p) target[p.getName()] = p.getValue() ?? globalArgs[p.getName()] ?? null;
        }
        if (!stage)
            continue;
        stage.instructions.push(ins);
        if (keyword === "RUN") {
            const shell = ins.getArgumentsContent() ?? "";
            stage.runs.push(shell);
            stage.apt.push(...aptInstalls(shell));
        }
    }
    return { text, df, globalArgs, stages };
}

/** The instructions of a stage with this keyword. */
export function instructions(stage, keyword) {
    return stage.instructions.filter((i) => i.getKeyword() === keyword);
}

/** A stage's LABELs as {key: value}, with build arguments expanded. */
export function labels(stage, vars) {
    const out = {};
    for (const ins of instructions(stage, "LABEL"))
        for (const p of ins.getProperties())
            out[p.getName()] = expand(p.getValue() ?? "", vars);
    return out;
}

/** The meson options the build stage passes: its MESON_OPTIONS argument's default, split. */
export function mesonOptions(parsed) {
    const build = parsed.stages.find((s) => s.name === "build");
    const value = build?.args.MESON_OPTIONS;
    if (!value)
        throw new Error("the build stage has no ARG MESON_OPTIONS with a default");
    return value.split(/\s+/).filter(Boolean);
}

/** COPY instructions as {from, sources, dest}. */
export function copies(stage) {
    return instructions(stage, "COPY").map((ins) => {
        const words = ins.getArguments().map((a) => a.getValue());
        return { from: ins.getFromFlag()?.getValue() ?? null, sources: words.slice(0, -1), dest: words.at(-1) };
    });
}
