// load.mjs runs ONE load of a synthetic GGUF in llama.cpp (through
// node-llama-cpp) and writes what llama.cpp logged to a JSON file.
//
//   node load.mjs JOB.json
//
// JOB.json: {modelPath, out, backend: "cpu"|"vulkan", gpuLayers, useMmap,
//            contextSize, sequences, flashAttention, batchSize,
//            kvCacheKeyType, kvCacheValueType, swaFullCache, estimate}
//
// Every case runs in its own process (run.mjs spawns this script) so that no
// state leaks between loads: node-llama-cpp keeps one backend per process,
// and a crashed or aborted llama.cpp takes only its own case with it.
import fs from "node:fs";
import {getLlama, LlamaLogLevel, readGgufFileInfo, GgufInsights, GgmlType} from "node-llama-cpp";

const job = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));

// phase tells the parser which step of the harness each log line belongs to.
// node-llama-cpp's simulator session (the no-alloc loads it runs inside
// loadModel to size things) lowers the log level to "error" while it runs, so
// its llama.cpp lines never reach this logger; the parser still refuses logs
// in which a figure appears twice, in case a later version leaks them.
let phase = "init";
const lines = [];
const logger = (level, message) => {
    for (const text of String(message).split("\n")) {
        if (text.trim() === "" || text.trim() === ".")
            continue;
        lines.push({phase, level: String(level), text});
    }
};

// drain waits until the log has been quiet for a while. llama.cpp logs from
// its own thread into a queue that Node empties between tasks, and
// node-llama-cpp filters each line against the log level in force WHEN IT IS
// DELIVERED; its simulator session raises that level to "error" while it
// runs. A line still queued when the next step starts a simulation is
// silently dropped (seen: a whole load's buffer lines). So every step waits
// for the queue to empty before the next one begins.
async function drain(quietMs = 300, maxMs = 20000) {
    const until = Date.now() + maxMs;
    for (;;) {
        const n = lines.length;
        await new Promise((resolve) => setTimeout(resolve, quietMs));
        if (lines.length === n || Date.now() > until)
            return;
    }
}

const result = {job, ok: false, error: null, engine: {}, lines, estimate: null, timings_ms: {}};
const t0 = Date.now();
const write = () => fs.writeFileSync(job.out, JSON.stringify(result));

try {
    const llama = await getLlama({
        gpu: job.backend === "vulkan" ? "vulkan" : false,
        build: "never",
        logLevel: LlamaLogLevel.debug,
        logger,
        // No VRAM/RAM padding: the harness wants llama.cpp's own decisions,
        // not node-llama-cpp's safety margins.
        vramPadding: 0,
        ramPadding: 0
    });
    result.engine = {
        node_llama_cpp: JSON.parse(fs.readFileSync(new URL("./node_modules/node-llama-cpp/package.json", import.meta.url), "utf8")).version,
        llama_cpp_release: llama.llamaCppRelease,
        build_type: llama.buildType,
        gpu: llama.gpu,
        system_info: llama.systemInfo,
        gpu_devices: llama.gpu ? await llama.getGpuDeviceNames() : [],
        vram: llama.gpu ? await llama.getVramState() : null
    };
    result.timings_ms.init = Date.now() - t0;

    // Record the parameters node-llama-cpp hands to its native addon, which
    // differ from what the caller asked for (it pads the context size and
    // adds 1 to the batch size of SWA models). The last context built in the
    // context phase is the real one; earlier ones are its simulator's.
    result.addon_calls = [];
    for (const cls of ["AddonModel", "AddonContext"]) {
        const Orig = llama._bindings[cls];
        llama._bindings[cls] = class extends Orig {
            constructor(...args) {
                super(...args);
                const {addonExports, onLoadProgress, ...opts} = args[1] ?? {};
                result.addon_calls.push({phase, cls, opts});
            }
        };
    }

    phase = "load";
    const tLoad = Date.now();
    const model = await llama.loadModel({
        modelPath: job.modelPath,
        gpuLayers: job.gpuLayers,
        useMmap: job.useMmap,
        ignoreMemorySafetyChecks: true,
        defaultContextFlashAttention: job.flashAttention
    });
    await drain();
    result.timings_ms.load = Date.now() - tLoad;

    phase = "context";
    const tCtx = Date.now();
    const ctxOptions = {
        contextSize: job.contextSize,
        sequences: job.sequences,
        flashAttention: job.flashAttention,
        batchSize: job.batchSize,
        ignoreMemorySafetyChecks: true
    };
    if (job.kvCacheKeyType)
        ctxOptions.experimentalKvCacheKeyType = job.kvCacheKeyType;
    if (job.kvCacheValueType)
        ctxOptions.experimentalKvCacheValueType = job.kvCacheValueType;
    if (job.swaFullCache != null)
        ctxOptions.swaFullCache = job.swaFullCache;
    const context = await model.createContext(ctxOptions);
    await drain();
    result.timings_ms.context = Date.now() - tCtx;

    // The compute-buffer lines can arrive after createContext resolves, and
    // the destructor prints a check of them: dispose, then give the log a
    // moment to drain before reading it.
    phase = "dispose";
    await context.dispose();
    await model.dispose();
    await drain(500);

    if (job.estimate) {
        // node-llama-cpp's own no-alloc estimate, kept apart from the
        // measurement: it is what `--fit` style probing sees, not what a load
        // allocates (it leaves out CPU_REPACK copies, for one).
        phase = "estimate";
        const tEst = Date.now();
        try {
            const insights = await GgufInsights.from(await readGgufFileInfo(job.modelPath), llama);
            const model = await insights.estimateModelResourceRequirementsV2({gpuLayers: job.gpuLayers, useMmap: job.useMmap});
            const context = await insights.estimateContextResourceRequirementsV2({
                contextSize: job.contextSize,
                modelGpuLayers: job.gpuLayers,
                batchSize: job.batchSize,
                sequences: job.sequences,
                flashAttention: job.flashAttention,
                swaFullCache: job.swaFullCache ?? false,
                kvCacheKeyType: job.kvCacheKeyType ? GgmlType[job.kvCacheKeyType] : undefined,
                kvCacheValueType: job.kvCacheValueType ? GgmlType[job.kvCacheValueType] : undefined,
                useMmap: job.useMmap
            });
            result.estimate = {model, context};
        } catch (err) {
            result.estimate = {error: String(err?.message ?? err)};
        }
        result.timings_ms.estimate = Date.now() - tEst;
    }
    phase = "done";
    await llama.dispose();
    result.ok = true;
} catch (err) {
    result.error = String(err?.stack ?? err);
}
result.timings_ms.total = Date.now() - t0;
write();
process.exit(0);
