// residency.mjs checks headroom's memory rule for system RAM against the
// real llama-server: it starts the CPU build inside a memory cgroup capped
// a little above and a little below what headroom says must stay resident,
// and below the anonymous buffers alone, and records for each run whether
// the load finished, whether a completion came back, how fast it was, and
// what the kernel saw (resident anonymous and file-backed pages, the
// cgroup's peak, the out-of-memory kills). conformance's TestResidency
// writes docs/residency.md from the record and holds headroom's verdicts
// to it.
//
//   node residency.mjs [--out FILE] [--only REGEX] [--engine DIR]
//
// With --only, the runs of the other models already in --out are kept
// (the big model's runs need the machine's memory to themselves).
//
// Needs root and a cgroup memory controller (v2's memory.max or v1's
// memory.limit_in_bytes); the runs of the big model take minutes each.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {execFileSync, spawnSync} from "node:child_process";
import {buildTools, flag, repo} from "./tools.mjs";
import {serveOnce} from "./serve.mjs";

const out = path.resolve(flag("--out", path.join(repo, "conformance/testdata/residency.json")));
const only = flag("--only", null);
const MiB = 1 << 20;

// Each model loads on the CPU with one slot; the limits are offsets from
// headroom's resident figure R and from its anonymous buffers A.
const models = [
    ["tinyllama-1.1b", "Q4_K_M", 4096],
    ["llama-3.1-8b", "Q4_K_M", 4096],
    ["qwen3-30b-a3b", "Q4_K_M", 4096]
].filter(([shape, quant]) => !only || new RegExp(only).test(`${shape}.${quant}`));
// The machine's whole RAM first (the speed to compare with); R and the
// 1024 MiB a plan leaves free; above R but below what charging the whole
// mapped span would ask; just
// below R, where the pages of tensors used in place compete with the
// anonymous buffers; below the anonymous buffers alone.
const limits = [
    ["unlimited", () => os.totalmem()],
    ["resident+1024", (r) => r.resident + 1024 * MiB],
    ["resident+256", (r) => r.resident + 256 * MiB],
    [(r) => `resident-${below(r)}`, (r) => r.resident - below(r) * MiB],
    ["anonymous-256", (r) => r.anonymous - 256 * MiB]
];

// below is how far under R the "just below" run goes, in MiB: 256, or
// halfway to A where the weights used in place take less than 512 MiB.
function below(r) {
    return Math.min(256, Math.floor((r.resident - r.anonymous) / MiB / 2));
}

// cgroup is a fresh memory cgroup with a hard limit: v2 where the unified
// hierarchy has the memory controller, else v1.
function cgroup(name, bytes) {
    const v2 = "/sys/fs/cgroup";
    if (fs.existsSync(path.join(v2, "cgroup.controllers")) && fs.readFileSync(path.join(v2, "cgroup.controllers"), "utf8").includes("memory")) {
        const dir = path.join(v2, name);
        fs.mkdirSync(dir, {recursive: true});
        fs.writeFileSync(path.join(dir, "memory.max"), String(bytes));
        fs.writeFileSync(path.join(dir, "memory.swap.max"), "0");
        return {
            dir, version: 2,
            stats: () => ({
                peak: readInt(path.join(dir, "memory.peak")),
                oom_kills: Number(/oom_kill (\d+)/.exec(read(path.join(dir, "memory.events")))?.[1] ?? 0),
                stat: pick(read(path.join(dir, "memory.stat")), ["anon", "file", "file_mapped"])
            })
        };
    }
    const dir = path.join(v2, "memory", name);
    fs.mkdirSync(dir, {recursive: true});
    fs.writeFileSync(path.join(dir, "memory.limit_in_bytes"), String(bytes));
    try {
        fs.writeFileSync(path.join(dir, "memory.memsw.limit_in_bytes"), String(bytes));
    } catch {
        // no swap accounting: there is no swap to fall back on either way
    }
    return {
        dir, version: 1,
        stats: () => ({
            peak: readInt(path.join(dir, "memory.max_usage_in_bytes")),
            oom_kills: Number(/oom_kill (\d+)/.exec(read(path.join(dir, "memory.oom_control")))?.[1] ?? 0),
            failcnt: readInt(path.join(dir, "memory.failcnt")),
            stat: pick(read(path.join(dir, "memory.stat")), ["rss", "cache", "mapped_file"])
        })
    };
}

function read(f) {
    try {
        return fs.readFileSync(f, "utf8");
    } catch {
        return "";
    }
}
const readInt = (f) => Number(read(f).trim() || 0);
function pick(text, keys) {
    const o = {};
    for (const l of text.split("\n")) {
        const [k, v] = l.split(" ");
        if (keys.includes(k))
            o[k] = Number(v);
    }
    return o;
}

// procStatus reads the resident set of a process in bytes.
function procStatus(pid) {
    const o = {};
    for (const l of read(`/proc/${pid}/status`).split("\n")) {
        const m = /^(VmRSS|VmHWM|RssAnon|RssFile):\s+(\d+) kB/.exec(l);
        if (m)
            o[m[1]] = Number(m[2]) * 1024;
    }
    return o;
}

const {headroomBin, files} = buildTools(models.map(([s, q]) => `${s}:${q}`));
const engine = flag("--engine", null) ?? execFileSync("bash", [path.join(repo, "conformance/engine.sh"), "cpu"], {stdio: ["ignore", "pipe", "inherit"]}).toString().trim();
const bin = path.join(engine, "llama-server");
const version = spawnSync(bin, ["--version"], {encoding: "utf8"});

const record = {
    note: "llama-server under a memory cgroup, run by conformance/harness/residency.mjs; NOT edited by hand",
    engine: version.stdout.concat(version.stderr).split("\n").find((l) => l.startsWith("version: ")),
    machine: {cpus: os.cpus().length, ram_bytes: os.totalmem(), kernel: os.release()},
    runs: []
};
if (only && fs.existsSync(out)) {
    const old = JSON.parse(fs.readFileSync(out, "utf8"));
    if (old.engine === record.engine)
        record.runs = old.runs.filter((r) => !new RegExp(only).test(`${r.shape}.${r.quant}`));
}
for (const [shape, quant, ctx] of models) {
    const file = files[`${shape}:${quant}`];
    const args = ["-c", String(ctx), "-np", "1", "-ngl", "0", "--fit", "off", "-fa", "on"];
    // fit exits 1 for a profile that does not fit, with the verdict in its JSON.
    const ran = spawnSync(headroomBin, ["fit", file.path, ...args, "--json"]);
    if (ran.status !== 0 && ran.status !== 1) throw new Error(`headroom fit failed: ${ran.stderr}`);
    const fit = JSON.parse(ran.stdout.toString());
    const ram = fit.domains.find((d) => d.id === "ram");
    const anonymous = fit.buffers.filter((b) => b.buffer_type !== "CPU_Mapped").reduce((n, b) => n + b.bytes, 0);
    const mapped = fit.buffers.find((b) => b.buffer_type === "CPU_Mapped");
    const figures = {resident: ram.required, anonymous, mapped_span: mapped?.bytes ?? 0, mapped_resident: mapped?.resident_bytes ?? mapped?.bytes ?? 0};
    for (const [named, at] of limits) {
        const name = typeof named === "function" ? named(figures) : named;
        const limit = at(figures);
        const cg = cgroup(`headroom-residency-${process.pid}`, limit);
        spawnSync("sync");
        fs.writeFileSync("/proc/sys/vm/drop_caches", "3");
        const t0 = Date.now();
        const res = await serveOnce({
            bin, modelPath: file.path, args, env: process.env, timeoutMs: 900_000, nPredict: 16,
            wrap: ["sh", "-c", `echo $$ > ${cg.dir}/cgroup.procs && exec "$0" "$@"`],
            probe: async (pid) => ({...procStatus(pid), cgroup: cg.stats()})
        });
        const stats = cg.stats(); // after the stop: the peak and the kills
        const run = {
            shape, quant, ctx, parallel: 1, args, limit_name: name, limit_bytes: limit,
            headroom: figures,
            loaded: res.timings_ms.ready !== undefined,
            answered: res.ok,
            tokens_per_second: res.completion?.timings?.predicted_per_second ?? null,
            error: res.error, exit: res.exit, process: res.probe ?? null, cgroup: stats,
            // llama.cpp's own account, printed as it stops
            breakdown: res.lines.filter((l) => l.text.includes("memory_breakdown_print")).map((l) => l.text.replace(/^.*memory_breakdown_print: /, "")),
            seconds: +((Date.now() - t0) / 1000).toFixed(1)
        };
        fs.rmdirSync(cg.dir);
        record.runs.push(run);
        console.log(`${shape} ${quant} ${name} (${(limit / MiB).toFixed(0)} MiB): loaded ${run.loaded}, answered ${run.answered}, ${run.tokens_per_second?.toFixed(1) ?? "-"} tok/s, oom kills ${stats.oom_kills}, ${run.seconds}s${run.error ? " — " + run.error : ""}`);
        fs.writeFileSync(out, JSON.stringify(record, null, 2) + "\n");
    }
}
console.log(`wrote ${out}`);
