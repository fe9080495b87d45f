// fitparams.mjs runs llama.cpp's own fit (the llama-fit-params program
// that conformance/engine.sh builds beside llama-server) on the planned
// models, on the CPU build and on the Vulkan build over Mesa llvmpipe, and
// records what it printed together with the machine it saw (headroom hw
// --json, asking the same build for its devices), so that headroom's plan
// for the same machine can be set beside it (conformance's
// TestLlamaFitParams writes docs/fit-params.md from the record).
//
//   node fitparams.mjs [--out FILE] [--only REGEX] [--backends cpu,vulkan]
//
// llama-fit-params prints "-c N -ngl N [-ts ...] [-ot ...]" on stdout when
// its fit succeeds; a failure (or an abort inside llama.cpp) is recorded
// with its last log lines.
import fs from "node:fs";
import path from "node:path";
import {execFileSync, spawnSync} from "node:child_process";
import {buildTools, flag, repo} from "./tools.mjs";

const out = path.resolve(flag("--out", path.join(repo, "conformance/testdata/fitparams.json")));
const only = flag("--only", null);
const backends = flag("--backends", "cpu,vulkan").split(",");

// The models of harness/planned.json (headroom plan's own picks for the
// llvmpipe machine) and the slots they were planned with, plus two models
// that do not fit this machine's RAM whole.
const models = [
    ["tinyllama-1.1b", "Q4_K_M", 1], ["tinyllama-1.1b", "Q4_K_M", 4], ["llama-3.2-1b", "Q8_0", 1],
    ["qwen3-0.6b", "Q8_0", 2], ["qwen2.5-0.5b", "Q8_0", 1], ["llama-3.1-8b", "Q4_K_M", 1],
    ["gemma-3-1b", "Q8_0", 2], ["lfm2-1.2b", "Q4_K_M", 1], ["gemma-3n-e2b", "Q8_0", 1],
    ["qwen3-30b-a3b", "Q4_K_M", 1], ["llama-3.1-70b", "Q4_K_M", 1]
].filter(([shape, quant, np]) => !only || new RegExp(only).test(`${shape}.${quant}.np${np}`));

const {headroomBin, files} = buildTools([...new Set(models.map(([s, q]) => `${s}:${q}`))]);

const record = {
    note: "llama-fit-params of conformance/engine.sh's builds, run by conformance/harness/fitparams.mjs; NOT edited by hand",
    runs: []
};
for (const backend of backends) {
    const dir = execFileSync("bash", [path.join(repo, "conformance/engine.sh"), backend], {stdio: ["ignore", "pipe", "inherit"]}).toString().trim();
    const env = {...process.env};
    if (backend === "vulkan")
        env.GGML_VK_VISIBLE_DEVICES = "0";
    const version = spawnSync(path.join(dir, "llama-server"), ["--version"], {encoding: "utf8", env});
    const machine = JSON.parse(execFileSync(headroomBin, ["hw", "--json", "--llama-server", path.join(dir, "llama-server")], {env}).toString());
    for (const [shape, quant, np] of models) {
        const file = files[`${shape}:${quant}`];
        const argv = ["-m", file.path, "-np", String(np), "-fa", "on"];
        const t0 = Date.now();
        const p = spawnSync(path.join(dir, "llama-fit-params"), argv, {encoding: "utf8", env, timeout: 600_000, maxBuffer: 1 << 26});
        const stdout = (p.stdout ?? "").trim();
        const lines = (p.stderr ?? "").split("\n").filter((l) => l.trim() !== "");
        const ok = p.status === 0 && /^-c \d+ -ngl -?\d+/.test(stdout.split("\n").at(-1) ?? "");
        const run = {
            shape, quant, parallel: np, backend, args: argv.slice(2), status: ok ? "ok" : "failed",
            printed: ok ? stdout.split("\n").at(-1) : null,
            exit: p.status, signal: p.signal,
            error: ok ? null : lines.filter((l) => /error|abort|failed|cannot/i.test(l)).slice(-3).join(" | ") || lines.slice(-3).join(" | "),
            seconds: +((Date.now() - t0) / 1000).toFixed(1)
        };
        record.runs.push(run);
        console.log(`${backend} ${shape} ${quant} -np ${np}: ${run.status} ${run.printed ?? run.error} (${run.seconds}s)`);
    }
    record[backend] = {engine: version.stdout.concat(version.stderr).split("\n").find((l) => l.startsWith("version: ")), machine};
}
fs.writeFileSync(out, JSON.stringify(record, null, 2) + "\n");
console.log(`wrote ${out}`);
