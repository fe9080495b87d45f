// cases.mjs lists the conformance cases: a synth shape and recipe, and a
// serving profile to load it with. The id is derived from the fields, so a
// golden file's name says what it measured.
//
// Profile fields (node-llama-cpp's terms, which run.mjs passes through):
//   backend       "cpu" (CPU-only build, gpuLayers must be 0), "vulkan"
//                 (Mesa llvmpipe; gpuLayers 0..n_layer+1, 999 = all) or
//                 "cuda" (cudaCases only: a borrowed NVIDIA GPU, see
//                 conformance/gpu)
//   contextSize   PER SEQUENCE; llama.cpp gets contextSize*sequences
//   sequences     n_seq_max (node-llama-cpp never asks for a unified cache)
//   flashAttention true/false/"auto" (false + a quantized V cache is refused)
//   batchSize     n_batch; node-llama-cpp sets n_ubatch = n_batch
//   cacheK/cacheV "f16" or "q8_0"
//   mmap          true/false
//   swaFull       full-size SWA caches (node-llama-cpp's swaFullCache)
//   rpc           llama-server driver only: start this many rpc-servers on
//                 loopback ports and pass them with --rpc (CPU build; each
//                 server's device is its CPU backend); gpuLayers then
//                 counts layers on the rpc devices
//   tensorSplit   -ts, one figure per device in llama.cpp's order (the
//                 rpc devices, in --rpc order)
//   embedding     llama-server driver only: "on" (--embedding) or "rerank"
//                 (--rerank); the load is proven with /v1/embeddings or
//                 /v1/rerank instead of a completion
//   cpuMoE        --n-cpu-moe: the routed experts of the first cpuMoE
//                 layers stay in system memory (n_layer or more: all of
//                 them, what --cpu-moe does)
//   spec          llama-server driver only: --spec-type (draft-mtp); the
//                 draft context's figures are recorded apart (figures.draft)
//   draftMax      --spec-draft-n-max (llama.cpp's default 3 when absent)
//   cacheDraft    -ctkd and -ctvd, the draft context's cache types
//   draft         "shape:quant" of a synth draft model given with -md

import fs from "node:fs";

const base = {
    backend: "cpu", gpuLayers: 0, contextSize: 4096, sequences: 1, flashAttention: false,
    batchSize: 512, cacheK: "f16", cacheV: "f16", mmap: true, swaFull: false
};

export function caseId(c) {
    const ngl = c.gpuLayers >= 999 ? "all" : c.gpuLayers;
    const dev = c.rpc ? `rpc${c.rpc}n${ngl}.ts${c.tensorSplit.join("x")}`
        : c.backend === "cpu" ? "cpu" : c.backend === "cuda" ? `cuda${ngl}` : `vk${ngl}`;
    const parts = [
        c.shape, c.quant, dev, `c${c.contextSize}x${c.sequences}`,
        c.flashAttention === "auto" ? "faauto" : c.flashAttention ? "fa" : "nofa",
        `b${c.batchSize}`
    ];
    if (c.cacheK !== "f16" || c.cacheV !== "f16")
        parts.push(`k${c.cacheK}v${c.cacheV}`);
    if (!c.mmap)
        parts.push("nommap");
    if (c.swaFull)
        parts.push("swafull");
    if (c.cpuMoE)
        parts.push(`cpumoe${c.cpuMoE}`);
    if (c.embedding)
        parts.push(c.embedding === "rerank" ? "rerank" : "embd");
    if (c.draft)
        parts.push("md-" + c.draft.replace(":", "-"));
    if (c.spec)
        parts.push(c.spec.replace(/^draft-/, "") + (c.draftMax ? `n${c.draftMax}` : "") + (c.cacheDraft ? `k${c.cacheDraft}` : ""));
    return parts.join(".");
}

// sweep expands one shape over a list of profile overrides.
function sweep(shape, quant, profiles) {
    return profiles.map((p) => ({...base, shape, quant, ...p}));
}

const vk = (gpuLayers, extra = {}) => ({backend: "vulkan", gpuLayers, ...extra});

// rpc is a load over llama.cpp's RPC backend: servers rpc-servers on this
// machine, layers split over them by tensorSplit.
const rpc = (servers, tensorSplit, gpuLayers, extra = {}) => ({backend: "cpu", rpc: servers, tensorSplit, gpuLayers, ...extra});

// The many-profile sweeps run on small files (a few hundred MiB), where a
// CPU load takes seconds; the big shapes get a few profiles for scale.
const denseSweep = [
    {contextSize: 512},
    {contextSize: 4096},
    {contextSize: 8192},
    {contextSize: 32768},
    {contextSize: 4096, sequences: 4},
    {contextSize: 4096, sequences: 4, flashAttention: true},
    {contextSize: 4096, flashAttention: true},
    {contextSize: 4096, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"},
    {contextSize: 4096, cacheK: "q8_0"},
    {contextSize: 4096, batchSize: 2048},
    {contextSize: 4096, mmap: false},
    vk(0),
    vk(4),
    vk(8, {flashAttention: true}),
    vk(999),
    vk(999, {flashAttention: true, sequences: 4}),
    vk(4, {mmap: false})
];

const scaleSweep = [
    {contextSize: 8192},
    vk(4),
    vk(8, {flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"})
];

// SWA models: the SWA cache size depends on n_ubatch and sequences, and
// swaFull turns it off.
const swaSweep = [
    {contextSize: 512},
    {contextSize: 4096},
    {contextSize: 32768},
    {contextSize: 4096, sequences: 4},
    {contextSize: 4096, sequences: 4, flashAttention: true},
    {contextSize: 4096, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"},
    {contextSize: 4096, batchSize: 2048},
    {contextSize: 4096, swaFull: true},
    vk(4),
    vk(999),
    vk(999, {flashAttention: true, sequences: 4}),
    vk(999, {flashAttention: "auto"})
];

// Recurrent models: the state is per sequence, independent of context.
const recurrentSweep = [
    {contextSize: 4096},
    {contextSize: 32768},
    {contextSize: 4096, sequences: 4},
    {contextSize: 4096, flashAttention: true},
    {contextSize: 4096, mmap: false},
    vk(4),
    vk(999, {sequences: 4})
];

// Files of 10-18 GiB run on the Vulkan backend only: on the CPU-only
// backend their Q4_K/MXFP4 experts would be repacked into as much anonymous
// memory again, more than these machines can spare. (MXFP4 is repacked even
// with the Vulkan backend at gpuLayers 0; the golden files show it.)
const bigMoE = [
    vk(0),
    vk(4, {contextSize: 8192, flashAttention: true}),
    vk(8, {contextSize: 4096, sequences: 2})
];

// Embedding and reranking models, as their plans serve them.
const embd = (extra = {}) => ({embedding: "on", ...extra});
const rerank = (extra = {}) => ({embedding: "rerank", ...extra});

export const cases = [
    ...sweep("bge-small-en-v1.5", "Q8_0", [embd({contextSize: 512}), embd({contextSize: 512, sequences: 4, flashAttention: true}),
        embd({contextSize: 2048, batchSize: 1024})]),
    ...sweep("all-minilm-l6-v2", "Q8_0", [embd({contextSize: 512, sequences: 2})]),
    ...sweep("nomic-embed-text-v1.5", "Q8_0", [embd({contextSize: 2048}), embd({contextSize: 2048, sequences: 2, flashAttention: true})]),
    ...sweep("qwen3-embedding-0.6b", "Q8_0", [embd({contextSize: 4096}), embd({contextSize: 8192, sequences: 2, flashAttention: true})]),
    ...sweep("qwen3-reranker-0.6b", "Q8_0", [rerank({contextSize: 4096}), rerank({contextSize: 4096, sequences: 4, flashAttention: true})]),
    ...sweep("tinyllama-1.1b", "Q4_K_M", denseSweep),
    ...sweep("qwen2.5-0.5b", "Q8_0", denseSweep.filter((_, i) => i % 2 === 0)),
    ...sweep("llama-3.2-1b", "Q8_0", [
        {contextSize: 4096},
        {contextSize: 4096, sequences: 4, flashAttention: true},
        vk(4),
        vk(999, {flashAttention: true})
    ]),
    ...sweep("qwen3-0.6b", "Q8_0", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true},
        vk(999),
        vk(8, {flashAttention: true})
    ]),
    ...sweep("llama-3.1-8b", "Q4_K_M", scaleSweep),
    ...sweep("qwen3-8b", "Q4_K_M", [{contextSize: 8192, flashAttention: true}, vk(4)]),
    ...sweep("qwen2.5-7b", "Q4_K_M", [{contextSize: 4096}]),
    ...sweep("phi-3-mini-4k", "Q4_K_M", [
        {contextSize: 4096},
        {contextSize: 4096, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"},
        vk(8)
    ]),
    ...sweep("ministral-3-3b", "Q4_K_M", [
        {contextSize: 4096},
        vk(4, {flashAttention: true}),
        vk(8, {contextSize: 16384})
    ]),
    ...sweep("gemma-3-1b", "Q8_0", swaSweep),
    ...sweep("gemma-3-4b", "Q4_K_M", [{contextSize: 8192}, vk(8, {flashAttention: true})]),
    ...sweep("lfm2-350m", "Q8_0", recurrentSweep),
    ...sweep("lfm2-1.2b", "Q4_K_M", [{contextSize: 4096}, vk(8)]),
    ...sweep("mamba2-130m", "Q8_0", recurrentSweep.filter((p) => p.flashAttention !== true)),
    ...sweep("qwen3-30b-a3b", "Q4_K_M", bigMoE),
    ...sweep("gpt-oss-20b", "MXFP4_MOE", bigMoE),
    // A q8_0 cache, written and read through Hadamard rotations (one cache;
    // and gpt-oss's two, whose sliding one has 64-wide heads).
    ...sweep("qwen3-30b-a3b", "Q4_K_M", [vk(4, {contextSize: 8192, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"})]),
    ...sweep("gpt-oss-20b", "MXFP4_MOE", [vk(4, {contextSize: 8192, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"})]),
    // and MLA's latent cache (576-wide rows, K rotated only).
    ...sweep("deepseek-v2-lite", "Q4_K_M", [vk(4, {contextSize: 8192, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"})]),
    ...sweep("glm-4.5-air", "Q8_0", [vk(4, {contextSize: 8192, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"})]),
    ...sweep("deepseek-v2-lite", "Q4_K_M", bigMoE),

    // More profiles for the first architectures.
    ...sweep("qwen3-0.6b", "Q8_0", [
        {contextSize: 32768},
        {contextSize: 4096, sequences: 4},
        {contextSize: 4096, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"},
        vk(4, {sequences: 2}),
        vk(999, {flashAttention: true, sequences: 4, mmap: false})
    ]),
    ...sweep("llama-3.2-1b", "Q8_0", [
        {contextSize: 16384, flashAttention: true},
        {contextSize: 4096, sequences: 2, cacheK: "q8_0"},
        vk(8, {contextSize: 8192}),
        vk(999, {sequences: 4})
    ]),
    ...sweep("lfm2-1.2b", "Q4_K_M", [
        {contextSize: 4096, sequences: 4, flashAttention: true},
        vk(999, {flashAttention: true})
    ]),
    ...sweep("gemma-3-4b", "Q4_K_M", [{contextSize: 4096, sequences: 2, flashAttention: true}, vk(999)]),
    ...sweep("phi-3-mini-4k", "Q4_K_M", [{contextSize: 4096, sequences: 2}, vk(999, {flashAttention: true})]),
    ...sweep("qwen2.5-7b", "Q4_K_M", [vk(8, {flashAttention: true})]),

    // Gemma 2 (SWA 4096 on every other layer), OLMo 2, Command R7B (SWA on
    // three of four layers), Qwen1.5-MoE (shared expert).
    ...sweep("gemma-2-2b", "Q8_0", [
        {contextSize: 4096},
        {contextSize: 8192},
        {contextSize: 4096, sequences: 4},
        {contextSize: 4096, sequences: 4, flashAttention: true},
        {contextSize: 4096, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"},
        {contextSize: 8192, swaFull: true},
        vk(4),
        vk(999),
        vk(999, {flashAttention: true, sequences: 4})
    ]),
    ...sweep("olmo-2-1b", "Q8_0", [
        {contextSize: 4096},
        {contextSize: 4096, sequences: 4, flashAttention: true},
        {contextSize: 2048, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"},
        {contextSize: 4096, mmap: false},
        vk(4),
        vk(999),
        vk(999, {flashAttention: true, sequences: 4})
    ]),
    ...sweep("command-r7b", "Q8_0", [
        {contextSize: 4096},
        {contextSize: 16384, sequences: 2, flashAttention: true},
        {contextSize: 8192, swaFull: true},
        vk(4),
        vk(8, {flashAttention: true})
    ]),
    ...sweep("qwen1.5-moe-a2.7b", "Q4_K_M", bigMoE),

    // Granite 3 (llama with embedding, residual and logit multipliers, tied
    // embeddings): the architecture added by one registry line, one builder
    // file, one arch entry and one synth shape.
    ...sweep("granite-3.3-2b", "Q4_K_M", [
        {contextSize: 4096},
        {contextSize: 4096, flashAttention: true},
        {contextSize: 4096, sequences: 4},
        vk(4)
    ]),

    // GPT-NeoX (Pythia: layer norms and projections with biases, fused
    // QKV, partial NEOX RoPE, parallel residual, GELU FFN, untied output).
    ...sweep("pythia-1.4b", "Q4_K_M", [
        {contextSize: 4096},
        {contextSize: 4096, flashAttention: true},
        {contextSize: 4096, sequences: 4},
        {contextSize: 4096, cacheK: "q8_0"},
        {contextSize: 4096, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"},
        vk(4),
        vk(4, {flashAttention: true})
    ]),

    // Hybrid Mamba-2 / attention: a KV cache for the attention layers and
    // recurrent state for the Mamba layers (both, on every Falcon-H1 layer).
    ...sweep("granite-4.0-h-micro", "Q8_0", recurrentSweep),
    ...sweep("nemotron-h-4b", "Q8_0", recurrentSweep),
    ...sweep("falcon-h1-0.5b", "Q8_0", recurrentSweep),

    // Gated DeltaNet / gated attention hybrid with 512 experts (Qwen3-Next):
    // a 53 GiB sparse file in Q5_K_M, whose K-quants the CPU backend does
    // not repack on x86 (Q4_K experts would be, into 36 GiB of anonymous
    // memory: seen, the load fails). Two layers and the output are as much
    // as llvmpipe's 2 GiB hold.
    ...sweep("qwen3-next-80b-a3b", "Q5_K_M", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true},
        {contextSize: 4096, sequences: 2},
        vk(0, {contextSize: 8192}),
        vk(2, {flashAttention: true}),
        {contextSize: 8192, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"}
    ]),

    // MiniMax-M2: 62 layers of 256 sigmoid-routed experts, norms over the
    // whole Q and K projections, RoPE on half of each head; a 151 GiB
    // sparse Q5_K_M file, whose K-quants x86's CPU backend does not repack.
    ...sweep("minimax-m2", "Q5_K_M", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true},
        {contextSize: 4096, sequences: 2, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"}
    ]),

    // DeepSeek V3.2: V3's MLA and 256 experts with DeepSeek Sparse
    // Attention's lightning indexer, whose keys have a cache of their own
    // (128 a token and layer, in the cache's type). Its first 5 of 61
    // layers (3 dense, 2 of experts, the last with the output rows only):
    // a 17.7 GiB sparse Q5_K_M file, where the whole model's 460 GiB would
    // page far more than the warm-up's experts in.
    ...sweep("deepseek-v3.2-5l", "Q5_K_M", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true},
        {contextSize: 4096, sequences: 2, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"}
    ]),

    // Qwen3.5 / 3.6 dense: Qwen3-Next's gated DeltaNet / gated attention
    // layers with a dense FFN and four position rows a token (multi-section
    // RoPE). The 0.8B has as many key heads as value heads; the 27B (a
    // 19 GiB sparse Q5_K_M file, not repacked on x86) has three value
    // heads a key head, which the fused delta-net op broadcasts.
    ...sweep("qwen3.5-0.8b", "Q8_0", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true},
        {contextSize: 4096, sequences: 4},
        {contextSize: 8192, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"},
        {contextSize: 4096, mmap: false},
        vk(8),
        vk(999, {flashAttention: true, sequences: 2})
    ]),
    // The same file as converted today, with its MTP block, drafting with
    // it (--spec-type draft-mtp): the head's weights loaded, n_max
    // recurrent snapshots per sequence and a drafted output row per slot
    // in the target context, and a draft context of the MTP layer's own
    // cache, one output row a sequence and graph_mtp's compute buffer.
    ...sweep("qwen3.5-0.8b-mtp", "Q8_0", [
        {contextSize: 4096, spec: "draft-mtp"},
        {contextSize: 4096, sequences: 2, spec: "draft-mtp"},
        {contextSize: 8192, flashAttention: true, spec: "draft-mtp"},
        {contextSize: 4096, sequences: 4, flashAttention: true, spec: "draft-mtp", draftMax: 6, cacheDraft: "q8_0"},
        {contextSize: 8192, sequences: 2, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0", spec: "draft-mtp"},
        {contextSize: 4096, mmap: false, spec: "draft-mtp"},
        {contextSize: 4096, batchSize: 1024, spec: "draft-mtp", draftMax: 2},
        {contextSize: 4096}
    ]),
    // A draft model (-md): one draft context beside the target's, with
    // the target's cells and sequences and one output row a sequence;
    // with --spec-type draft-simple each slot's drafted tokens are
    // output rows of the target, without it the draft is loaded and
    // never asked.
    ...sweep("qwen3-8b", "Q4_K_M", [
        {contextSize: 4096, sequences: 2, draft: "qwen3-0.6b:Q8_0", spec: "draft-simple"},
        {contextSize: 8192, flashAttention: true, draft: "qwen3-0.6b:Q8_0", spec: "draft-simple", draftMax: 8, cacheDraft: "q8_0"},
        {contextSize: 4096, draft: "qwen3-0.6b:Q8_0"}
    ]),
    ...sweep("qwen3.5-35b-a3b-mtp", "Q5_K_M", [
        {contextSize: 4096, flashAttention: true, spec: "draft-mtp"},
        {contextSize: 8192, sequences: 2, spec: "draft-mtp"}
    ]),
    ...sweep("qwen3.5-27b", "Q5_K_M", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true, sequences: 2},
        vk(2, {flashAttention: true})
    ]),
    // Gemma 4 31B: five sliding layers (16 KV heads of 256) to one global
    // (4 KV heads of 512, K doubling as V), proportional RoPE through a
    // rope_freqs table, final soft-capping (a 20 GiB sparse Q5_K_M file).
    // The Vulkan load takes about 9 minutes on llvmpipe.
    ...sweep("gemma-4-31b", "Q5_K_M", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true, sequences: 2},
        vk(3, {flashAttention: true})
    ]),
    // Gemma 4 E2B and E4B: per-layer embeddings (a table of 256 values a
    // layer for every token, projected and gated into each layer) and
    // the last 20 (18) layers attending over earlier layers' caches with
    // no K or V of their own; E2B's shared layers have an FFN twice as
    // wide.
    ...sweep("gemma-4-e2b", "Q8_0", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true, sequences: 2},
        {contextSize: 32768, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"},
        {contextSize: 4096, mmap: false}
    ]),
    ...sweep("gemma-4-e4b", "Q4_K_M", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true, sequences: 2, batchSize: 1024}
    ]),
    // Gemma 4 26B-A4B: the 31B's layers, smaller, with a dense MLP beside
    // 128 routed experts on every layer, routed on their own norm, the
    // experts' gate and up merged, scaled per expert (a 16 GiB sparse
    // Q4_K_M file, its experts repacked on x86).
    ...sweep("gemma-4-26b-a4b", "Q4_K_M", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true, sequences: 2},
        {contextSize: 4096, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0", batchSize: 1024}
    ]),
    // Qwen3.5 / 3.6 35B-A3B: the same layers with 256 routed experts and a
    // gated shared expert (a 23 GiB sparse Q5_K_M file).
    ...sweep("qwen3.5-35b-a3b", "Q5_K_M", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true, sequences: 2},
        vk(2, {flashAttention: true})
    ]),

    // Big MoE with a skipped NextN block (GLM-4.5-Air) and with chunked
    // attention (Llama 4 Scout): sparse files of 110+ GiB, Vulkan only, and
    // Q8_0: their expert tensors exceed llvmpipe's 128 MiB limit and fall
    // back to the CPU list, where Q4_K experts would be repacked into 35-43
    // GiB of anonymous memory (seen: the load fails), Q8_0 ones are not.
    ...sweep("glm-4.5-air", "Q8_0", bigMoE),
    ...sweep("llama-4-scout", "Q8_0", bigMoE),

    // Q5_K_M and Q6_K recipes; qwen2.5-0.5b's 896-wide rows take the
    // quantizer's fallbacks (Q5_K -> Q5_1, Q6_K -> Q8_0).
    ...sweep("tinyllama-1.1b", "Q5_K_M", [{contextSize: 4096}, vk(8)]),
    ...sweep("qwen2.5-0.5b", "Q6_K", [{contextSize: 4096}, vk(999)]),
    ...sweep("qwen2.5-0.5b", "Q5_K_M", [{contextSize: 4096}]),
    ...sweep("llama-3.2-1b", "Q6_K", [{contextSize: 4096, flashAttention: true}]),

    // Gemma 3n E2B: a KV cache in the first 20 of 30 layers only (the last
    // 10 read layers 18 and 19's), four sliding layers to one global, and a
    // 2 GiB per-layer token embedding that stays on the CPU.
    ...sweep("gemma-3n-e2b", "Q8_0", [
        {contextSize: 4096},
        {contextSize: 8192, flashAttention: true},
        {contextSize: 4096, sequences: 2},
        vk(8),
        vk(999),
        {contextSize: 8192, flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"},
        // The loader creates the tied output before the embedding: without
        // mmap the embedding is loaded twice.
        {contextSize: 4096, flashAttention: true, mmap: false}
    ]),

    // Over llama.cpp's RPC backend: two or three rpc-servers on loopback
    // ports, every layer on them (pipeline parallelism: the scheduler keeps
    // four copies of every input) or some left on this machine's CPU.
    ...sweep("qwen3-0.6b", "Q8_0", [
        rpc(2, [1, 1], 999),
        rpc(2, [1, 1], 999, {flashAttention: true}),
        rpc(2, [3, 1], 20),
        rpc(3, [1, 1, 1], 999, {contextSize: 8192, flashAttention: true}),
        rpc(2, [1, 1], 999, {mmap: false})
    ]),
    ...sweep("llama-3.2-1b", "Q8_0", [
        rpc(2, [1, 1], 999, {sequences: 4}),
        rpc(2, [2, 1], 999, {flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"})
    ]),
    ...sweep("tinyllama-1.1b", "Q4_K_M", [rpc(2, [1, 1], 12)]),
    ...sweep("gemma-3-1b", "Q8_0", [
        rpc(2, [1, 1], 999),
        rpc(2, [1, 1], 999, {flashAttention: true, sequences: 4})
    ]),
    ...sweep("gemma-2-2b", "Q8_0", [rpc(3, [1, 1, 1], 999, {flashAttention: true})]),
    ...sweep("qwen1.5-moe-a2.7b", "Q4_K_M", [rpc(2, [1, 1], 999, {flashAttention: true})]),

    // Routed experts kept in system memory (--n-cpu-moe; llama-server
    // only), every other layer on Vulkan0: with a full micro-batch the
    // GPU's offload_op (the same rule as CUDA's) takes the expert
    // multiplications whose stacked weights it can bind, copying them
    // into its compute buffer; llvmpipe binds 128 MiB at most, which
    // Qwen1.5-MoE's expert stacks fit and gpt-oss-20b's do not.
    ...sweep("qwen1.5-moe-a2.7b", "Q4_K_M", [vk(999, {cpuMoE: 24}), vk(999, {cpuMoE: 12, flashAttention: true})]),
    ...sweep("gpt-oss-20b", "MXFP4_MOE", [vk(999, {cpuMoE: 24})]),

    // Profiles that headroom plan chose for the llvmpipe machine
    // (conformance/testdata/llvmpipe-machine.json); planned_test.go writes
    // planned.json and checks each has a golden, i.e. the real engine loaded
    // the model with exactly those flags.
    ...JSON.parse(fs.readFileSync(new URL("./planned.json", import.meta.url), "utf8"))
        .map(({flags, ...c}) => c)
];

// CUDA cases, measured on a borrowed NVIDIA GPU (conformance/gpu, which
// reads them through gpu/caselist.mjs). Such a machine is lent for
// minutes, so the list is in the order a run cut short should keep: first
// what the Vulkan set cannot show (no 128 MiB binding limit, so every
// layer offloads whole; CUDA's own compute and pinned host buffers; routed
// experts kept in system memory with --n-cpu-moe, which node-llama-cpp
// never passed), then every Vulkan profile again on CUDA0, which
// caselist.mjs puts smallest file first, so the 100+ GiB files come last.
const cuda = (gpuLayers, extra = {}) => ({backend: "cuda", gpuLayers, ...extra});
const q8cache = {flashAttention: true, cacheK: "q8_0", cacheV: "q8_0"};

const cudaFirst = [
    ...sweep("tinyllama-1.1b", "Q4_K_M", [
        cuda(999),
        cuda(4),
        cuda(0),
        cuda(999, {flashAttention: true, sequences: 4}),
        cuda(999, {mmap: false}),
        cuda(999, q8cache),
        // a q8_0 K cache without flash attention (V stays f16)
        cuda(999, {cacheK: "q8_0"})
    ]),
    ...sweep("qwen3-0.6b", "Q8_0", [cuda(999, {flashAttention: true}), cuda(999, {contextSize: 4096, batchSize: 2048})]),
    // Sliding-window caches (Gemma 3: five of six layers; Gemma 2: every
    // other one), flash attention off and on.
    ...sweep("gemma-3-1b", "Q8_0", [cuda(999), cuda(999, {flashAttention: true, sequences: 4}), cuda(999, {swaFull: true})]),
    ...sweep("gemma-2-2b", "Q8_0", [cuda(999, {flashAttention: true})]),
    // Recurrent state and hybrids.
    ...sweep("lfm2-350m", "Q8_0", [cuda(999)]),
    ...sweep("mamba2-130m", "Q8_0", [cuda(999)]),
    ...sweep("falcon-h1-0.5b", "Q8_0", [cuda(999, {flashAttention: true})]),
    ...sweep("llama-3.1-8b", "Q4_K_M", [cuda(999, q8cache), cuda(999)]),
    // Mixtures of experts, their routed experts in system memory for all
    // layers (--cpu-moe's placement) or the first half, and all on the GPU.
    ...sweep("gpt-oss-20b", "MXFP4_MOE", [cuda(999, {cpuMoE: 24}), cuda(999, {cpuMoE: 12, flashAttention: true}), cuda(999)]),
    ...sweep("qwen3-30b-a3b", "Q4_K_M", [cuda(999, {cpuMoE: 48}), cuda(999, {cpuMoE: 24, ...q8cache}), cuda(999)]),
    ...sweep("qwen1.5-moe-a2.7b", "Q4_K_M", [cuda(999, {cpuMoE: 24}), cuda(999, {cpuMoE: 12, flashAttention: true})]),
    ...sweep("deepseek-v2-lite", "Q4_K_M", [cuda(999, {cpuMoE: 27}), cuda(999, {contextSize: 8192, ...q8cache}), cuda(999)]),
    ...sweep("granite-4.0-h-micro", "Q8_0", [cuda(999)]),
    ...sweep("qwen3-next-80b-a3b", "Q5_K_M", [cuda(999, {cpuMoE: 48, flashAttention: true}), cuda(999, {cpuMoE: 24})]),
    ...sweep("gemma-3n-e2b", "Q8_0", [cuda(999, {flashAttention: true})])
];

// first keeps its order; caselist.mjs sorts more by file size.
const cudaFirstIds = new Set(cudaFirst.map(caseId));
export const cudaCases = {
    first: cudaFirst,
    more: cases.filter((c) => c.backend === "vulkan" && !c.rpc)
        .map((c) => ({...c, backend: "cuda"}))
        .filter((c) => !cudaFirstIds.has(caseId(c)))
};
