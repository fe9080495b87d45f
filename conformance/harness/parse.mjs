// parse.mjs turns llama.cpp's debug log of one load into the figures a golden
// file holds. It reads only what llama.cpp printed; nothing is derived or
// assumed, so a disagreement with headroom is always headroom's to explain.
//
// The log formats are the printf formats of llama.cpp's src/llama-model.cpp,
// llama-context.cpp, llama-kv-cache*.cpp and llama-memory-recurrent.cpp.

// Lines kept verbatim in the golden file: the ones figures come from, plus the
// placement and fallback lines that explain them.
const KEEP = [
    /^load_tensors: (layer +\d+ assigned|offload|\s*\S+ model buffer size)/,
    /^done_getting_tensors: /,
    /^llama_context: (n_seq_max|n_ctx|n_ctx_seq|n_batch|n_ubatch|flash_attn|kv_unified|causal_attn|n_rs_seq|n_outputs_max)\b/,
    /^llama_context: .*output buffer size/,
    /^llama_context: .*(Flash Attention|flash_attn|layer \d+ is assigned)/i,
    /^llama_kv_cache\w*: /,
    /^llama_memory\w*: /,
    /^sched_reserve: .*(compute buffer size|graph nodes|graph splits)/,
    /^~llama_context: .*compute buffer size/,
    /^llama_prepare_model_devices: /,
    /^ggml_vulkan: \d+ = /,
    // The CUDA devices and the memory each reports.
    /^ggml_cuda_init: found /,
    /^\s*Device \d+: .*, VRAM: \d+ MiB$/,
    /^print_info: (file size|model params|n_swa|is_swa_any|no_alloc|model type|file type)\b/
];

// Messages from node-llama-cpp itself (not llama.cpp); kept apart.
const NLC = /^(Resolved model gpu layers|Loading model for simulator session|Simulating (model|context) resource usage)/;

const BUFFER = /^(~?\w+):\s+(\S+)\s+(.+?) buffer size = +(-?\d+\.\d+) MiB$/;
const COMPUTE_EXACT = /^~llama_context:\s+(\S+) compute buffer size is +(\d+\.\d+) MiB, matches expectation of +(\d+\.\d+) MiB$/;
const COMPUTE_MISMATCH = /^~llama_context:\s+(\S+) compute buffer size of +(\d+\.\d+) MiB, does not match expectation of +(\d+\.\d+) MiB$/;
const KV_SIZE = /^(\w+): size = +(\d+\.\d+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)\/(\d+) seqs\), K \((\w+)\): +(\d+\.\d+) MiB, V \((\w+)\): +(\d+\.\d+) MiB$/;
const RS_SIZE = /^(\w+): size = +(\d+\.\d+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+) seqs +(\d+) rs_seq\), R \((\w+)\): +(\d+\.\d+) MiB, S \((\w+)\): +(\d+\.\d+) MiB(?:, P \((\w+)\): +(\d+\.\d+) MiB)?$/;
const CACHE_START = /^(\w+): creating +(.+?) (?:KV )?cache(?:, size = (\d+) cells)?$/;
const LAYER = /^load_tensors: layer +(\d+) assigned to device (\S+), is_swa = (\d+)$/;
const KV_LAYER = /^(\w+)(?::|,) layer +(\d+): dev = (\S+)$/;
const CTX_PARAM = /^llama_context: (\w+) += (.+)$/;
const PRINT_INFO = /^print_info: (\S.*?) += (.*)$/;

// The line before llama-server's speculative draft context is made.
const DRAFT = /^common_speculative_init_result: /;

const KIND = {model: "model", KV: "kv", RS: "rs", compute: "compute", output: "output"};

export function parseLog(lines, {gpu = false} = {}) {
    const errors = [];
    const f = newFigures();
    const printInfo = {};
    const kept = [];
    const nlc = [];
    const checks = [];
    // cur is the context the lines describe: the target's, then from
    // common_speculative_init_result's line the speculative draft
    // context's (its own figures, f.draft), which llama-server makes on
    // the -md model or on the target's MTP head.
    let cur = f;
    let cache = ""; // the cache being created, for iswa and other multi-cache memories
    let seen = new Set();

    for (const {phase, text} of lines) {
        if (NLC.test(text)) {
            nlc.push(text);
            continue;
        }
        if (phase === "estimate")
            continue;
        if (KEEP.some((re) => re.test(text)) || DRAFT.test(text))
            kept.push(text);

        let m;
        if (DRAFT.test(text) && cur === f) {
            cur = f.draft = newFigures();
            cache = "";
            seen = new Set();
        } else if ((m = PRINT_INFO.exec(text))) {
            // Some keys (EOG token) repeat by design; the load-identity keys
            // appear once per load, so a repeat means a second load leaked in
            // (a -md draft model's own come after the draft line).
            const [key, value] = [m[1], m[2].trim()];
            if (cur !== f) {
                (cur.print_info ??= {})[key] = value;
            } else if (key in printInfo) {
                if (["no_alloc", "arch", "file size", "n_layer"].includes(key))
                    errors.push(`print_info key ${key} printed twice: a second (simulated?) load leaked into the log`);
                printInfo[key] = [].concat(printInfo[key], value);
            } else
                printInfo[key] = value;
        } else if ((m = LAYER.exec(text))) {
            cur.layers.push({layer: +m[1], device: m[2], is_swa: m[3] === "1"});
        } else if ((m = /^load_tensors: offloading output layer to GPU$/.exec(text))) {
            (cur.offload ??= {}).output_layer = true;
        } else if ((m = /^load_tensors: offloading (\d+) repeating layers to GPU$/.exec(text))) {
            (cur.offload ??= {}).repeating_layers = +m[1];
            cur.offload.output_layer ??= false;
        } else if ((m = /^load_tensors: offloaded (\d+)\/(\d+) layers to GPU$/.exec(text))) {
            (cur.offload ??= {}).offloaded_layers = +m[1];
            cur.offload.total_layers = +m[2];
        } else if (/^done_getting_tensors: /.test(text)) {
            cur.fallbacks.push(text.replace(/^done_getting_tensors: /, ""));
        } else if ((m = CACHE_START.exec(text))) {
            cache = m[2].trim().replace(/\s+/g, " ");
            cur.kv_caches.push({cache, cells_announced: m[3] == null ? null : +m[3]});
        } else if ((m = KV_LAYER.exec(text))) {
            cur.kv_layers.push({memory: m[1], cache: m[1].startsWith("llama_kv_cache") ? cache : "", layer: +m[2], device: m[3]});
        } else if ((m = COMPUTE_EXACT.exec(text)) || (m = COMPUTE_MISMATCH.exec(text))) {
            checks.push({device_or_buffer_type: m[1], mib: +m[2], printed: m[2], expected_mib: +m[3]});
        } else if ((m = BUFFER.exec(text))) {
            const phrase = m[3].trim();
            const kind = KIND[phrase] ?? phrase.toLowerCase().replace(/\s+/g, "_");
            if (!Object.values(KIND).includes(kind))
                errors.push(`unknown buffer kind ${JSON.stringify(phrase)} in: ${text}`);
            const memCache = kind === "kv" ? cache : "";
            const key = `${kind}/${memCache}/${m[2]}`;
            const b = {device_or_buffer_type: m[2], kind, cache: memCache, mib: +m[4], printed: m[4], source: m[1]};
            if (seen.has(key)) {
                // The draft context's scheduler is reserved again once its
                // backend samplers are attached; the buffer is the last
                // reserve's (a reserve never shrinks it).
                const i = cur.buffers.findIndex((x) => `${x.kind}/${x.cache}/${x.device_or_buffer_type}` === key);
                if (cur !== f && kind === "compute")
                    cur.buffers[i] = b;
                else
                    errors.push(`buffer ${key} printed twice: a second (simulated?) load leaked into the log`);
                continue;
            }
            seen.add(key);
            cur.buffers.push(b);
        } else if ((m = KV_SIZE.exec(text))) {
            const c = lastOpen(cur.kv_caches, cache);
            Object.assign(c, {
                memory: m[1], size_mib: +m[2], cells: +m[3], layers: +m[4], seqs: +m[5], seqs_max: +m[6],
                k_type: m[7], k_mib: +m[8], v_type: m[9], v_mib: +m[10], printed: text.replace(/^\w+: /, "")
            });
        } else if ((m = RS_SIZE.exec(text))) {
            cur.rs_caches.push({
                memory: m[1], size_mib: +m[2], cells: +m[3], layers: +m[4], seqs: +m[5], rs_seq: +m[6],
                r_type: m[7], r_mib: +m[8], s_type: m[9], s_mib: +m[10],
                ...(m[11] ? {p_type: m[11], p_mib: +m[12]} : {}), printed: text.replace(/^\w+: /, "")
            });
        } else if ((m = /^sched_reserve: graph nodes += (\d+)$/.exec(text))) {
            cur.graph.nodes = +m[1];
        } else if ((m = /^sched_reserve: graph splits = (.+)$/.exec(text))) {
            cur.graph.splits = m[1];
        } else if ((m = CTX_PARAM.exec(text))) {
            const [, key, raw] = m;
            if (key in cur.context)
                errors.push(`llama_context ${key} printed twice: a second context leaked into the log`);
            cur.context[key] = /^-?\d+(\.\d+)?$/.test(raw) ? +raw : raw === "true" ? true : raw === "false" ? false : raw;
        }
    }

    for (const x of f.draft ? [f, f.draft] : [f]) {
        // Caches whose size line never came (or plain, single-cache memories
        // without a "creating" line) are normalised: every entry has a size.
        x.kv_caches = x.kv_caches.filter((c) => c.size_mib != null || c.cells_announced != null);
        for (const c of x.kv_caches)
            if (c.cells_announced == null)
                delete c.cells_announced;
    }
    assignChecks(f, checks, errors);

    if (printInfo.no_alloc != null && printInfo.no_alloc !== "0")
        errors.push(`the recorded load has no_alloc = ${printInfo.no_alloc}: it is a simulation, not a load`);
    for (const [name, x] of f.draft ? [["", f], ["draft ", f.draft]] : [["", f]]) {
        for (const want of ["n_ctx", "n_ctx_seq", "n_batch", "n_ubatch", "flash_attn", "kv_unified"])
            if (!(want in x.context))
                errors.push(`${name}llama_context ${want} missing from the log`);
        if (!x.buffers.some((b) => b.kind === "compute"))
            errors.push(`no ${name}compute buffer line in the log (did the context finish before the log was read?)`);
        for (const c of x.kv_caches) {
            if (c.size_mib == null) {
                errors.push(`${name}KV cache ${JSON.stringify(c.cache)} announced but its size line is missing`);
                continue;
            }
            const bufs = x.buffers.filter((b) => b.kind === "kv" && b.cache === c.cache);
            const sum = bufs.reduce((a, b) => a + b.mib, 0);
            if (Math.abs(sum - c.size_mib) > 0.01 * Math.max(1, bufs.length))
                errors.push(`${name}KV cache ${JSON.stringify(c.cache)}: buffers sum to ${sum.toFixed(2)} MiB, size line says ${c.size_mib}`);
        }
    }
    if (!f.buffers.some((b) => b.kind === "model"))
        errors.push("no model buffer line in the log");

    // Completeness: a line lost between llama.cpp and the logger must fail
    // the case, never produce a golden file with a buffer missing.
    const nLayer = +(printInfo.n_layer_all ?? printInfo.n_layer);
    if (nLayer && f.layers.length !== nLayer + 1)
        errors.push(`${f.layers.length} "layer assigned to device" lines, want n_layer+1 = ${nLayer + 1}`);
    if (gpu && !(f.offload && "offloaded_layers" in f.offload))
        errors.push("no \"offloaded N/M layers\" line on a GPU build");

    return {figures: f, printInfo, kept, nlc, errors};
}

// newFigures is one context's figures, empty.
function newFigures() {
    return {context: {}, layers: [], offload: null, kv_layers: [], kv_caches: [], rs_caches: [], buffers: [], compute_exact: [], graph: {}, fallbacks: []};
}

// assignChecks gives each destructor check of a compute buffer to the
// context whose compute buffer on that device it rounds to (the target's
// and the draft's are destroyed in an order of llama-server's choosing),
// and fails the case where a compute buffer has none.
function assignChecks(f, checks, errors) {
    const sets = f.draft ? [f, f.draft] : [f];
    for (const ck of checks) {
        const x = sets.find((x) => x.buffers.some((b) => b.kind === "compute" && b.device_or_buffer_type === ck.device_or_buffer_type &&
            Math.abs(b.mib - ck.mib) <= 0.00505 && x.compute_exact.filter((c) => c.device_or_buffer_type === ck.device_or_buffer_type).length === 0));
        (x ?? f).compute_exact.push(ck);
    }
    for (const [name, x] of f.draft ? [["", f], ["draft ", f.draft]] : [["", f]]) {
        const computeLines = x.buffers.filter((b) => b.kind === "compute").length;
        if (x.compute_exact.length !== computeLines)
            errors.push(`${name}${computeLines} compute buffer lines but ${x.compute_exact.length} destructor checks: the log was cut short`);
    }
}

// lastOpen finds the cache entry a size line belongs to: the last one created
// under the current name that has no size yet, or a new entry for memories
// that print no "creating" line (a plain llama_kv_cache).
function lastOpen(caches, name) {
    for (let i = caches.length - 1; i >= 0; i--)
        if (caches[i].cache === name && caches[i].size_mib == null)
            return caches[i];
    const c = {cache: name};
    caches.push(c);
    return c;
}
