// tools.mjs is what the record-making scripts (fitparams.mjs,
// residency.mjs) share: their flags and the two Go programs they run,
// built once into a work folder that keeps the synthetic GGUFs between
// runs.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {execFileSync} from "node:child_process";
import {fileURLToPath} from "node:url";

export const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, "../..");

// flag reads "--name VALUE" from the command line, or gives dflt.
export function flag(name, dflt) {
    const argv = process.argv.slice(2);
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : dflt;
}

// buildTools builds synthgen and headroom into the work folder and
// writes the synthetic files of specs ("shape:QUANT"), returning
// {work, headroomBin, files} (files as synthgen reports them, by spec).
export function buildTools(specs) {
    const work = path.join(os.tmpdir(), "headroom-fitparams");
    fs.mkdirSync(work, {recursive: true});
    const synthBin = path.join(work, "synthgen");
    execFileSync("go", ["build", "-o", synthBin, "./conformance/cmd/synthgen"], {cwd: repo, stdio: "inherit"});
    const headroomBin = path.join(work, "headroom");
    execFileSync("go", ["build", "-o", headroomBin, "./cmd/headroom"], {cwd: repo, stdio: "inherit"});
    const files = JSON.parse(execFileSync(synthBin, ["-dir", path.join(work, "gguf"), ...specs], {cwd: repo, maxBuffer: 1 << 26}).toString());
    return {work, headroomBin, files};
}
