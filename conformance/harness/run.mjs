// run.mjs measures llama.cpp on every conformance case and writes (or, with
// --check, compares against) one golden JSON file per case.
//
//   node run.mjs [--driver server|library] [--engine DIR] [--cpu-variant NAME] [--check]
//                [--only REGEX] [--backend cpu|vulkan] [--limit N]
//                [--golden DIR] [--work DIR] [--no-estimate] [--missing]
//                [--cases FILE]
//
// Two drivers load a case. "server" (the default) runs llama-server itself,
// built from the pinned node-llama-cpp's llama.cpp source by
// conformance/engine.sh (or the binaries in --engine DIR), with exactly the
// flags headroom emits for the profile (serve.mjs), and writes
// testdata/server/<id>.json. "library" loads it through node-llama-cpp's
// library API in a fresh Node process (load.mjs) and writes
// testdata/golden/<id>.json. Each case: make the sparse GGUF
// (conformance/cmd/synthgen, all files in one Go process), load it, parse
// llama.cpp's log (parse.mjs), write the golden file. Cases run one at a
// time: the machines this runs on are small and shared, and two concurrent
// loads would also disturb each other's free-memory readings.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {execFileSync, spawnSync} from "node:child_process";
import {fileURLToPath} from "node:url";
import {caseInputs, compare, parsedLoad, serverRecord} from "./record.mjs";
import {serveOnce, serverArgs} from "./serve.mjs";
import {rpcServerBin, startRPCServers} from "./rpc.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");

const args = parseArgs(process.argv.slice(2));
const driver = args.driver ?? "server";
if (!["server", "library"].includes(driver))
    fail(`--driver must be server or library, not ${driver}`);
const goldenDir = path.resolve(args.golden ?? path.join(repo, "conformance/testdata", driver === "server" ? "server" : "golden"));
const workDir = path.resolve(args.work ?? path.join(os.tmpdir(), "headroom-conformance"));
fs.mkdirSync(goldenDir, {recursive: true});
fs.mkdirSync(workDir, {recursive: true});

// --cases FILE swaps in another case list (same exports as cases.mjs), for
// trying a new shape without touching the committed list.
const {cases: allCases, caseId} = await import(path.resolve(args.cases ?? path.join(here, "cases.mjs")));
let selected = allCases.map((c) => ({...c, id: caseId(c)}));
if (args.only)
    selected = selected.filter((c) => new RegExp(args.only).test(c.id));
if (args.backend)
    selected = selected.filter((c) => c.backend === args.backend);
if (args.missing)
    selected = selected.filter((c) => !fs.existsSync(path.join(goldenDir, c.id + ".json")));
if (args.limit)
    selected = selected.slice(0, +args.limit);
const dup = selected.map((c) => c.id).filter((id, i, all) => all.indexOf(id) !== i);
if (dup.length)
    fail(`duplicate case ids: ${dup.join(", ")}`);
if (selected.length === 0)
    fail("no cases selected");

// Build the synth generator once, then write every file the cases need.
const synthBin = path.join(workDir, "synthgen");
execFileSync("go", ["build", "-o", synthBin, "./conformance/cmd/synthgen"], {cwd: repo, stdio: "inherit"});
const specs = [...new Set(selected.flatMap((c) => [`${c.shape}:${c.quant}`, ...(c.draft ? [c.draft] : [])]))];
const files = JSON.parse(execFileSync(synthBin, ["-dir", path.join(workDir, "gguf"), ...specs], {cwd: repo, maxBuffer: 1 << 26}).toString());

const engineCommit = bundleCommit();
// --cpu-variant NAME makes node-llama-cpp's CPU backend the one ggml would
// pick on a CPU of that generation (haswell: AVX2, the features of the
// machines the library goldens were first measured on): ggml loads the
// best libggml-cpu-*.so the CPU runs, and on a CPU with AMX that variant
// keeps weights in an AMX buffer instead of CPU_REPACK. The others are
// moved aside for the run and put back when it ends.
if (args["cpu-variant"])
    hideCPUVariants(args["cpu-variant"]);
// The llama-server builds, one per backend the selected cases need.
const engines = {};
if (driver === "server")
    for (const backend of new Set(selected.map((c) => c.backend)))
        engines[backend] = serverEngine(backend);
let failed = 0;
let drift = 0;
const t0 = Date.now();
for (const [i, c] of selected.entries()) {
    const file = files[`${c.shape}:${c.quant}`];
    const tCase = Date.now();
    process.stdout.write(`[${i + 1}/${selected.length}] ${c.id} ... `);
    let golden;
    try {
        golden = driver === "server" ? await measureServer(c, file) : measure(c, file);
    } catch (err) {
        failed++;
        console.log(`FAILED\n    ${String(err.message ?? err).split("\n").join("\n    ")}`);
        continue;
    }
    const dest = path.join(goldenDir, c.id + ".json");
    const secs = ((Date.now() - tCase) / 1000).toFixed(1);
    if (args.check) {
        const diffs = fs.existsSync(dest) ? compare(JSON.parse(fs.readFileSync(dest, "utf8")), golden) : ["no committed golden file"];
        if (diffs.length) {
            drift++;
            console.log(`DRIFT (${secs}s)\n    ${diffs.slice(0, 20).join("\n    ")}`);
        } else
            console.log(`same (${secs}s)`);
    } else {
        fs.writeFileSync(dest, JSON.stringify(golden, null, 2) + "\n");
        console.log(`ok (${secs}s) ${summary(golden)}`);
    }
}
const total = ((Date.now() - t0) / 1000).toFixed(0);
console.log(`${selected.length} cases in ${total}s: ${failed} failed` + (args.check ? `, ${drift} drifted` : ""));
process.exit(failed || drift ? 1 : 0);

function measure(c, file) {
    if (c.rpc || c.cpuMoE)
        throw new Error("rpc-servers and --n-cpu-moe are llama-server flags: measure this case with --driver server");
    const jobPath = path.join(workDir, "job.json");
    const outPath = path.join(workDir, "job.out.json");
    fs.rmSync(outPath, {force: true});
    const job = {
        modelPath: file.path, out: outPath, backend: c.backend, gpuLayers: c.gpuLayers, useMmap: c.mmap,
        contextSize: c.contextSize, sequences: c.sequences, flashAttention: c.flashAttention, batchSize: c.batchSize,
        kvCacheKeyType: c.cacheK.toUpperCase(), kvCacheValueType: c.cacheV.toUpperCase(), swaFullCache: c.swaFull,
        estimate: !args["no-estimate"]
    };
    fs.writeFileSync(jobPath, JSON.stringify(job));
    const env = {...process.env};
    if (c.backend === "vulkan")
        // Without this llama.cpp skips llvmpipe (a CPU-type Vulkan device)
        // and silently runs everything on the CPU backend.
        env.GGML_VK_VISIBLE_DEVICES = "0";
    const p = spawnSync(process.execPath, [path.join(here, "load.mjs"), jobPath], {env, encoding: "utf8", timeout: 600_000, maxBuffer: 1 << 26});
    if (!fs.existsSync(outPath))
        throw new Error(`load.mjs died (status ${p.status}, signal ${p.signal}): ${(p.stderr || p.stdout || "").slice(-2000)}`);
    const r = JSON.parse(fs.readFileSync(outPath, "utf8"));
    if (!r.ok)
        throw new Error(`llama.cpp refused the load: ${r.error}\n${r.lines.slice(-15).map((l) => l.text).join("\n")}`);
    const parsed = parsedLoad(c, r.lines);

    return {
        schema: 1,
        id: c.id,
        note: c.note ?? undefined,
        inputs: {
            ...caseInputs(c, file),
            // What node-llama-cpp actually handed its native addon (it pads
            // the context and adds 1 to the batch of SWA models).
            passed_to_llama_cpp: addonParams(r.addon_calls)
        },
        engine: {
            node_llama_cpp: r.engine.node_llama_cpp,
            llama_cpp_repo: r.engine.llama_cpp_release?.repo,
            llama_cpp_release: r.engine.llama_cpp_release?.release,
            llama_cpp_source_commit: engineCommit,
            backend: c.backend,
            gpu_devices: (r.engine.gpu_devices ?? []).map((name) => ({name, total_bytes: r.engine.vram?.total ?? null})),
            system_info: r.engine.system_info.trim()
        },
        figures: parsed.figures,
        print_info: parsed.printInfo,
        log: parsed.kept,
        estimate: r.estimate && !r.estimate.error ? {
            label: "node-llama-cpp GgufInsights V2 no-alloc estimate (estimateModelResourceRequirementsV2 + estimateContextResourceRequirementsV2). NOT a measurement: leaves out CPU_REPACK copies and rounds differently.",
            model: {cpu_ram_bytes: r.estimate.model.cpuRam, gpu_vram_bytes: r.estimate.model.gpuVram},
            context: {cpu_ram_bytes: r.estimate.context.cpuRam, gpu_vram_bytes: r.estimate.context.gpuVram}
        } : null
    };
}

// serverEngine finds the llama-server build for a backend: --engine DIR
// (a folder holding llama-server, for one backend) or conformance/engine.sh,
// which builds or reuses the pinned source's build and prints its folder.
function serverEngine(backend) {
    let dir = args.engine;
    if (!dir) {
        const p = spawnSync("bash", [path.join(repo, "conformance/engine.sh"), backend], {encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 1 << 24});
        if (p.status !== 0)
            fail(`conformance/engine.sh ${backend} failed (status ${p.status})`);
        dir = p.stdout.trim().split("\n").at(-1);
    }
    const bin = path.join(dir, "llama-server");
    if (!fs.existsSync(bin))
        fail(`no llama-server in ${dir}`);
    const version = spawnSync(bin, ["--version"], {encoding: "utf8"});
    const text = `${version.stdout}${version.stderr}`;
    const line = text.split("\n").find((l) => l.startsWith("version: "));
    if (!line)
        fail(`${bin} --version printed no version line: ${text.slice(0, 300)}`);
    // The node-llama-cpp release whose llama.cpp source the build is of
    // (engine.sh builds the pinned one's); its release name is
    // informative only.
    const nlcVersion = JSON.parse(fs.readFileSync(path.join(here, "package.json"), "utf8")).dependencies["node-llama-cpp"];
    let release = null;
    try {
        release = JSON.parse(fs.readFileSync(path.join(here, "node_modules/node-llama-cpp/llama/llama.cpp.info.json"), "utf8")).tag;
    } catch {
        // not installed: no release name
    }
    // Whether this build still takes --no-mmap, from its own help.
    const help = spawnSync(bin, ["--help"], {encoding: "utf8", maxBuffer: 1 << 24});
    const loadMode = !`${help.stdout}${help.stderr}`.includes("--no-mmap");
    const eng = {loadMode, bin, version: line.trim(), built: text.split("\n").find((l) => l.startsWith("built with "))?.trim() ?? null, nlcVersion, release, sourceCommit: engineCommit};
    // A build of engine.sh names its source in its stamp ("COMMIT backend
    // node-llama-cpp@VERSION recipe R"): a build of another release than
    // the pinned one is recorded as what it is.
    for (const stamp of [path.join(dir, ".built"), path.join(dir, "..", ".built")]) {
        const m = /^([0-9a-f]{40}) \S+ node-llama-cpp@(\S+) /.exec(fs.existsSync(stamp) ? fs.readFileSync(stamp, "utf8") : "");
        if (m) {
            if (m[2] !== nlcVersion) {
                // The installed package's tag names another release:
                // take the one engine.sh kept beside that release's bundle.
                const info = [path.join(path.dirname(stamp), ".."), path.join(path.dirname(stamp), "..", "..")]
                    .map((d) => path.join(d, `node-llama-cpp-${m[2]}.info.json`)).find((f) => fs.existsSync(f));
                eng.release = info ? JSON.parse(fs.readFileSync(info, "utf8")).tag : null;
                if (!eng.release)
                    fail(`${bin} is node-llama-cpp ${m[2]}'s llama.cpp, whose release tag is not beside its bundle (rerun conformance/engine.sh with --node-llama-cpp ${m[2]})`);
            }
            eng.sourceCommit = m[1];
            eng.nlcVersion = m[2];
            break;
        }
    }
    return eng;
}

async function measureServer(c, file) {
    const eng = engines[c.backend];
    const env = {...process.env};
    if (c.backend === "vulkan")
        env.GGML_VK_VISIBLE_DEVICES = "0";
    const flags = serverArgs(c, {loadMode: eng.loadMode, draftPath: c.draft && files[c.draft].path});
    let servers = null;
    if (c.rpc) {
        servers = await startRPCServers(rpcServerBin(path.dirname(eng.bin)), c.rpc, {env});
        // headroom's flags end with --rpc (plan/flags.go rpcFlags).
        flags.push("--rpc", servers.endpoints.join(","));
    }
    let r;
    try {
        r = await serveOnce({bin: eng.bin, modelPath: file.path, args: flags, env});
    } finally {
        await servers?.stop();
    }
    if (!r.ok)
        throw new Error(`llama-server: ${r.error}\n${r.lines.slice(-15).map((l) => l.text).join("\n")}`);
    return serverRecord({c, file, eng, flags, r, servers});
}

// addonParams picks the real load's and the real context's parameters out
// of the recorded addon constructor calls: the simulator's model loads carry
// noAlloc, and its context comes before the real one. The thread count is
// left out: it depends on the machine and sizes nothing.
function addonParams(calls = []) {
    const model = calls.filter((c) => c.cls === "AddonModel" && !c.opts.noAlloc).at(-1)?.opts;
    const context = calls.filter((c) => c.cls === "AddonContext" && c.phase === "context").at(-1)?.opts;
    if (!model || !context)
        throw new Error("could not find the addon parameters of the real load");
    const {threads, ...ctx} = context;
    return {model, context: ctx};
}

function summary(g) {
    const by = {};
    for (const b of g.figures.buffers)
        by[b.kind] = (by[b.kind] ?? []).concat(`${b.device_or_buffer_type}=${b.printed}`);
    return Object.entries(by).map(([k, v]) => `${k}[${v.join(" ")}]`).join(" ");
}

function hideCPUVariants(keep) {
    const moved = [];
    const restore = () => {
        for (const [from, to] of moved.splice(0))
            fs.renameSync(to, from);
    };
    for (const pkg of ["linux-x64", "linux-x64-vulkan"]) {
        const bins = path.join(here, "node_modules/@node-llama-cpp", pkg, "bins", pkg);
        if (!fs.existsSync(bins))
            continue;
        const aside = path.join(bins, ".variants-aside");
        fs.mkdirSync(aside, {recursive: true});
        const variants = fs.readdirSync(bins).filter((f) => /^libggml-cpu-.+\.so$/.test(f));
        if (!variants.includes(`libggml-cpu-${keep}.so`))
            fail(`no CPU variant ${keep} in ${bins} (have ${variants.join(", ")})`);
        for (const f of variants)
            if (f !== `libggml-cpu-${keep}.so`) {
                moved.push([path.join(bins, f), path.join(aside, f)]);
                fs.renameSync(path.join(bins, f), path.join(aside, f));
            }
    }
    process.on("exit", restore);
    for (const sig of ["SIGINT", "SIGTERM"])
        process.on(sig, () => {
            restore();
            process.exit(130);
        });
    console.log(`CPU backend limited to ${keep} (${moved.length} other variants moved aside for this run)`);
}

// bundleCommit names the llama.cpp source node-llama-cpp's binaries were built
// from: the HEAD of the git bundle it ships (a squashed commit, so it
// identifies the tree, not an upstream commit).
function bundleCommit() {
    const bundle = path.join(here, "node_modules/node-llama-cpp/llama/gitRelease.bundle");
    try {
        return execFileSync("git", ["bundle", "list-heads", bundle]).toString().trim().split(/\s+/)[0] || null;
    } catch {
        return null;
    }
}

function parseArgs(argv) {
    const out = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (!a.startsWith("--"))
            fail(`unexpected argument ${a}`);
        const key = a.slice(2);
        if (["check", "no-estimate", "missing"].includes(key))
            out[key] = true;
        else if (["only", "backend", "limit", "golden", "work", "cases", "driver", "engine", "cpu-variant"].includes(key))
            out[key] = argv[++i];
        else
            fail(`unknown flag ${a}`);
    }
    return out;
}

function fail(msg) {
    console.error("run.mjs: " + msg);
    process.exit(2);
}
