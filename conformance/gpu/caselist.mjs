// caselist.mjs writes the CUDA case list (harness/cases.mjs cudaCases) as
// plain tab-separated lines for device.sh, which runs where there is no
// Node: one line per case, in the order to measure them.
//
//   node conformance/gpu/caselist.mjs --synthgen BIN --work DIR > cases.tsv
//
// Columns: case id, synth spec (shape:QUANT), the file's size in bytes,
// and the llama-server flags (space-separated; none holds a space) that
// headroom emits for the profile, as serve.mjs renders them. synthgen
// writes the sparse files into DIR/gguf to learn their sizes: the cases
// after cudaCases.first run smallest file first, so a run cut short has
// measured the most profiles, and device.sh checks its disk with them.
import path from "node:path";
import {execFileSync} from "node:child_process";
import {fileURLToPath} from "node:url";
import {caseId, cudaCases} from "../harness/cases.mjs";
import {serverArgs} from "../harness/serve.mjs";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const argv = process.argv.slice(2);
const arg = (name) => {
    const i = argv.indexOf(name);
    if (i < 0 || i + 1 >= argv.length) {
        console.error(`caselist.mjs: ${name} is required (usage: --synthgen BIN --work DIR)`);
        process.exit(2);
    }
    return argv[i + 1];
};
const synthgen = arg("--synthgen");
const work = arg("--work");

const all = [...cudaCases.first, ...cudaCases.more];
const specs = [...new Set(all.map((c) => `${c.shape}:${c.quant}`))];
const files = JSON.parse(execFileSync(synthgen, ["-dir", path.join(work, "gguf"), ...specs], {cwd: repo, maxBuffer: 1 << 26}).toString());
const size = (c) => files[`${c.shape}:${c.quant}`].size_bytes;
// Array.prototype.sort is stable: cases of one file keep cases.mjs's order.
const ordered = [...cudaCases.first, ...[...cudaCases.more].sort((a, b) => size(a) - size(b))];

const ids = new Set();
const out = ["# id\tspec\tsize_bytes\tflags (written by conformance/gpu/caselist.mjs from harness/cases.mjs)"];
for (const c of ordered) {
    const id = caseId(c);
    if (ids.has(id))
        throw new Error(`duplicate case id ${id}`);
    ids.add(id);
    // 80fb11a, the build device.sh makes, still takes --no-mmap.
    const flags = serverArgs(c, {loadMode: false});
    if (flags.some((f) => /\s/.test(f)))
        throw new Error(`${id}: a flag holds white space: ${JSON.stringify(flags)}`);
    out.push([id, `${c.shape}:${c.quant}`, size(c), flags.join(" ")].join("\t"));
}
process.stdout.write(out.join("\n") + "\n");
