// record.mjs turns one llama-server load into a golden record: run.mjs
// does it for the loads it runs itself, gpu/import.mjs for the logs a
// borrowed GPU machine sends back (conformance/gpu), so both write the
// same schema from the same parse.
import {parseLog} from "./parse.mjs";

// caseInputs is what a golden file records of the case: the synth file
// and the profile as requested. context_size_per_seq is PER SEQUENCE (the
// driver multiplies it by the sequences); figures.context holds what
// llama.cpp actually used.
export function caseInputs(c, file) {
    return {
        shape: c.shape,
        arch: file.arch,
        quant: c.quant,
        source: file.source,
        file: {
            size_bytes: file.size_bytes, header_bytes: file.header_bytes, header_sha256: file.header_sha256,
            tensors: file.tensors, params: file.params
        },
        profile: {
            backend: c.backend, gpu_layers: c.gpuLayers, context_size_per_seq: c.contextSize, sequences: c.sequences,
            flash_attention: c.flashAttention, batch_size: c.batchSize, cache_type_k: c.cacheK, cache_type_v: c.cacheV,
            mmap: c.mmap, swa_full: c.swaFull ?? false,
            rpc_servers: c.rpc || undefined, tensor_split: c.tensorSplit, cpu_moe_layers: c.cpuMoE || undefined,
            embedding: c.embedding || undefined,
            draft: c.draft || undefined, spec: c.spec || undefined, draft_max: c.draftMax || undefined, cache_type_draft: c.cacheDraft || undefined
        }
    };
}

// The device names the GPU backends print: a layer on one of them proves
// the load reached the GPU it was meant for.
const DEVICE_PREFIX = {vulkan: "Vulkan", cuda: "CUDA"};

// parsedLoad parses a load's log and refuses one whose figures are
// incomplete or that never reached the GPU device it was meant for.
export function parsedLoad(c, lines) {
    const parsed = parseLog(lines, {gpu: c.backend !== "cpu" || !!c.rpc});
    if (parsed.errors.length)
        throw new Error(parsed.errors.join("\n"));
    const prefix = DEVICE_PREFIX[c.backend];
    if (prefix && c.gpuLayers > 0 && !parsed.figures.layers.some((l) => l.device.startsWith(prefix)))
        throw new Error(c.backend === "vulkan"
            ? "vulkan case but no layer went to a Vulkan device (is GGML_VK_VISIBLE_DEVICES set, is mesa-vulkan-drivers installed?)"
            : `${c.backend} case but no layer went to a ${prefix} device`);
    if (c.rpc && c.gpuLayers > 0 && !parsed.figures.layers.some((l) => l.device.startsWith("RPC")))
        throw new Error("rpc case but no layer went to an RPC device");
    return parsed;
}

// gpuDevices lists the GPUs the backends announced: Vulkan's
// "ggml_vulkan: 0 = NAME (...)" and CUDA's "  Device 0: NAME, compute
// capability X.Y, VMM: yes, VRAM: N MiB" (the memory CUDA reports).
export function gpuDevices(lines) {
    const out = [];
    for (const {text} of lines) {
        let m;
        if ((m = /^ggml_vulkan: \d+ = (.+?) \(/.exec(text)))
            out.push({name: m[1], total_bytes: null});
        else if ((m = /^\s*Device \d+: (.+?), compute capability [\d.]+, VMM: \w+, VRAM: (\d+) MiB$/.exec(text)))
            out.push({name: m[1], total_bytes: +m[2] * 1024 * 1024});
    }
    return out;
}

// serverRecord is the golden record of one llama-server load: the case
// and its synth file, the build (eng: version, built, nlcVersion,
// release, sourceCommit), the flags it ran with besides -m, --host,
// --port and -lv 5, and r, the load as serve.mjs returns it (lines,
// completion). servers are the rpc-servers of an RPC case.
export function serverRecord({c, file, eng, flags, r, servers = null}) {
    const parsed = parsedLoad(c, r.lines);
    const sysLine = r.lines.map((l) => l.text).find((t) => /(^|\s)system_info: /.test(t)) ?? "";
    return {
        schema: 1,
        id: c.id,
        note: c.note ?? undefined,
        inputs: {
            ...caseInputs(c, file),
            // The flags llama-server ran with, besides -m, --host, --port
            // and the log verbosity (-lv 5).
            command: flags
        },
        engine: {
            driver: "llama-server",
            version: eng.version,
            built_with: eng.built,
            node_llama_cpp: eng.nlcVersion,
            llama_cpp_repo: "ggml-org/llama.cpp",
            llama_cpp_release: eng.release,
            llama_cpp_source_commit: eng.sourceCommit,
            backend: c.backend,
            gpu_devices: gpuDevices(r.lines),
            system_info: (/CPU : .*$/.exec(sysLine)?.[0] ?? sysLine).trim(),
            // Each rpc-server's own banner: protocol version, the device it
            // serves and the memory that device reports.
            rpc_servers: servers ? servers.banners() : undefined
        },
        figures: parsed.figures,
        print_info: parsed.printInfo,
        log: parsed.kept,
        completion: r.completion,
        estimate: null
    };
}

// compare lists the figures that differ between a committed golden and a new
// measurement. The raw log and the estimate are not compared: the log holds
// the same figures, and the estimate is not the engine's behaviour.
export function compare(old, cur) {
    const diffs = [];
    const walk = (a, b, at) => {
        if (JSON.stringify(a) === JSON.stringify(b))
            return;
        if (a && b && typeof a === "object" && typeof b === "object") {
            for (const k of new Set([...Object.keys(a), ...Object.keys(b)]))
                walk(a[k], b[k], `${at}.${k}`);
            return;
        }
        diffs.push(`${at}: golden ${JSON.stringify(a)}, now ${JSON.stringify(b)}`);
    };
    walk(old.inputs, cur.inputs, "inputs");
    walk(old.engine?.llama_cpp_source_commit, cur.engine?.llama_cpp_source_commit, "engine.llama_cpp_source_commit");
    walk(old.figures, cur.figures, "figures");
    return diffs;
}
