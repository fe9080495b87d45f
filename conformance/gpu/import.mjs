// import.mjs turns what device.sh sent back from a GPU machine into golden
// records, the same schema run.mjs writes (harness/record.mjs), one per
// case measured: testdata/server-cuda/<id>.json by default.
//
//   node conformance/gpu/import.mjs [--golden DIR] [--compare DIR] [--work DIR] RESULTS...
//
// RESULTS are the cuda-results*.tar files (or folders holding them: the
// run tool's files_at). Each case's log is parsed as run.mjs parses a
// load it ran itself; its synth file is written here again and must have
// the header the machine loaded. The build is the one prepare.sh packed
// (source.env, inside the tar), named by its own --version. --compare DIR
// lists every figure that differs from DIR's record of the same id (a
// dry run of device.sh --cpu against testdata/server, say). A case that
// failed there, or whose log does not parse, is reported and written
// nowhere; the exit status is 1 if any was.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import {execFileSync} from "node:child_process";
import {fileURLToPath} from "node:url";
import {caseId, cudaCases} from "../harness/cases.mjs";
import {compare, serverRecord} from "../harness/record.mjs";
import {logLine, serverArgs} from "../harness/serve.mjs";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const {opts, inputs} = parseArgs(process.argv.slice(2));
if (inputs.length === 0)
    fail("name the cuda-results*.tar files (or their folder)");
const goldenDir = path.resolve(opts.golden ?? path.join(repo, "conformance/testdata/server-cuda"));
const workDir = path.resolve(opts.work ?? path.join(os.tmpdir(), "headroom-conformance"));

// Unpack every tar into one folder: later tars hold later cases.
const unpacked = fs.mkdtempSync(path.join(os.tmpdir(), "cuda-results-"));
process.on("exit", () => fs.rmSync(unpacked, {recursive: true, force: true}));
const tars = inputs.flatMap((p) => fs.statSync(p).isDirectory()
    ? fs.readdirSync(p).filter((f) => /^cuda-results(-\d+)?\.tar$/.test(f)).sort(byPart).map((f) => path.join(p, f))
    : [p]);
if (tars.length === 0)
    fail(`no cuda-results*.tar in ${inputs.join(", ")}`);
for (const t of tars)
    execFileSync("tar", ["-xf", t, "-C", unpacked]);

const env = readIf("env.txt");
const source = Object.fromEntries([...env.matchAll(/^(LLAMA_\w+|NODE_LLAMA_CPP)=(.*)$/gm)].map((m) => [m[1], m[2].trim()]));
if (!source.LLAMA_COMMIT)
    fail("env.txt names no llama.cpp source (LLAMA_COMMIT): is this device.sh's output?");
const versionText = readIf("version.txt");
const eng = {
    version: versionText.split("\n").find((l) => l.startsWith("version: "))?.trim(),
    built: versionText.split("\n").find((l) => l.startsWith("built with "))?.trim() ?? null,
    nlcVersion: source.NODE_LLAMA_CPP,
    release: source.LLAMA_RELEASE,
    sourceCommit: source.LLAMA_COMMIT
};
if (!eng.version)
    fail(`version.txt holds no version line: ${versionText.slice(0, 300)}`);
// nvidia-smi's CSV line for the GPU: its name, driver and memory, which
// the log's device lines do not all say.
const smiLines = (/^== nvidia-smi query\n([\s\S]*?)(?=^== |(?![\s\S]))/m.exec(env)?.[1] ?? "").trim().split("\n");
const gpuInfo = smiLines[0].startsWith("name,") && smiLines[1] ? smiLines[1].trim() : null;

const byId = new Map([...cudaCases.first, ...cudaCases.more].map((c) => [caseId(c), c]));
const metas = fs.readdirSync(unpacked).filter((f) => f.endsWith(".meta.json")).sort();
const local = new Map(); // spec -> synthgen's entry, written here
const synthBin = path.join(workDir, "synthgen");
fs.mkdirSync(workDir, {recursive: true});
execFileSync("go", ["build", "-o", synthBin, "./conformance/cmd/synthgen"], {cwd: repo, stdio: "inherit"});
fs.mkdirSync(goldenDir, {recursive: true});

let written = 0, failed = 0, drift = 0;
for (const m of metas) {
    const meta = JSON.parse(fs.readFileSync(path.join(unpacked, m), "utf8"));
    const base = m.slice(0, -".meta.json".length);
    try {
        const c0 = byId.get(meta.id);
        if (!c0)
            throw new Error("not a case of cudaCases (was .gpu/cases.tsv made from another harness/cases.mjs?)");
        // device.sh --cpu ran it as a CPU load: record it as the CPU case
        // of that profile, never as a CUDA one.
        const c1 = meta.backend === "cpu" ? {...c0, backend: "cpu", gpuLayers: 0, cpuMoE: undefined} : c0;
        const c = {...c1, id: caseId(c1)};
        const want = serverArgs(c, {loadMode: false});
        if (JSON.stringify(want) !== JSON.stringify(meta.flags))
            throw new Error(`ran with ${JSON.stringify(meta.flags)}, the case's flags are now ${JSON.stringify(want)}`);
        if (!meta.ok)
            throw new Error(`failed there: ${meta.error}`);
        const file = synthFile(meta.spec);
        const there = JSON.parse(fs.readFileSync(path.join(unpacked, base + ".synth.json"), "utf8"))[meta.spec];
        if (there?.header_sha256 !== file.header_sha256)
            throw new Error(`the machine loaded a synth header ${there?.header_sha256}, synthgen writes ${file.header_sha256} here now`);
        const lines = logLines(zlib.gunzipSync(fs.readFileSync(path.join(unpacked, base + ".log.gz"))), meta.offsets ?? {});
        const rec = serverRecord({c, file, eng, flags: meta.flags, r: {lines, completion: meta.completion}});
        if (gpuInfo && c.backend === "cuda")
            rec.engine.nvidia_smi = {query: "name, driver_version, memory.total [MiB], memory.used [MiB], memory.free [MiB], compute_cap", answer: gpuInfo};
        const dest = path.join(goldenDir, c.id + ".json");
        fs.writeFileSync(dest, JSON.stringify(rec, null, 2) + "\n");
        written++;
        let note = "";
        if (opts.compare) {
            const other = path.join(opts.compare, c.id + ".json");
            if (!fs.existsSync(other))
                note = `; no ${c.id}.json in ${opts.compare}`;
            else {
                const diffs = compare(JSON.parse(fs.readFileSync(other, "utf8")), rec);
                if (diffs.length) {
                    drift++;
                    note = `; differs from ${opts.compare}:\n    ${diffs.slice(0, 20).join("\n    ")}`;
                } else
                    note = `; same figures as ${opts.compare}`;
            }
        }
        const t = meta.timings_ms ?? {};
        console.log(`${c.id}: written (ready ${(t.ready / 1000).toFixed(1)}s, total ${(t.total / 1000).toFixed(1)}s)${note}`);
    } catch (err) {
        failed++;
        console.log(`${meta.id ?? base}: NOT written: ${String(err.message ?? err).split("\n").join("\n    ")}`);
    }
}
console.log(`${metas.length} cases in ${tars.length} tar file(s): ${written} written to ${path.relative(process.cwd(), goldenDir) || "."}, ${failed} not` +
    (opts.compare ? `, ${drift} differ from ${opts.compare}` : "") + (gpuInfo ? `; GPU: ${gpuInfo}` : ""));
process.exit(failed || drift ? 1 : 0);

// logLines reads a log as serve.mjs does (its line filter and prefix
// parse), with serve.mjs's phases from the byte offsets serve1.py noted:
// "load" until the server answered /health, "serve" for the completion,
// "stop" once it was told to stop.
function logLines(buf, offsets) {
    const out = [];
    let at = 0;
    while (at < buf.length) {
        let end = buf.indexOf(0x0a, at);
        if (end < 0)
            end = buf.length;
        const l = buf.subarray(at, end).toString("utf8");
        const phase = offsets.stop != null && at >= offsets.stop ? "stop" : offsets.ready != null && at >= offsets.ready ? "serve" : "load";
        if (l.trim() !== "" && l.trim() !== ".")
            out.push(logLine(phase, l));
        at = end + 1;
    }
    return out;
}

// synthFile is synthgen's entry for a spec, the file written here (sparse)
// as run.mjs writes it, so the record's inputs.file is what this checkout
// makes.
function synthFile(spec) {
    if (!local.has(spec)) {
        const out = JSON.parse(execFileSync(synthBin, ["-dir", path.join(workDir, "gguf"), spec], {cwd: repo, maxBuffer: 1 << 26}).toString());
        local.set(spec, out[spec]);
    }
    return local.get(spec);
}

function readIf(name) {
    const p = path.join(unpacked, name);
    return fs.existsSync(p) ? fs.readFileSync(p, "utf8") : "";
}

function byPart(a, b) {
    const n = (f) => +(/-(\d+)\.tar$/.exec(f)?.[1] ?? 1);
    return n(a) - n(b);
}

function parseArgs(argv) {
    const opts = {};
    const inputs = [];
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (["--golden", "--compare", "--work"].includes(a))
            opts[a.slice(2)] = argv[++i];
        else if (a.startsWith("--"))
            fail(`unknown flag ${a}`);
        else
            inputs.push(a);
    }
    return {opts, inputs};
}

function fail(msg) {
    console.error("import.mjs: " + msg);
    process.exit(2);
}
