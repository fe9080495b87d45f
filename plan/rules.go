package plan

// Rules are the accounting rules that differ between llama.cpp builds.
// The zero value is the build the accounting was measured against
// (80fb11a); engine.KnownEngines says which build sets which rule, and
// each field says the commit where llama.cpp changed.
type Rules struct {
	// NextNWithoutKV: from de3ff81, the NextN (multi-token prediction)
	// blocks get no KV cache in any architecture (llama_model's memory
	// filter skips il >= n_layer() when n_layer_nextn > 0); 80fb11a left
	// glm4moe's in the cache (llama.cpp PR #28630 is the closest change
	// found; it lists architectures, where de3ff81's rule is general). Measured with llama-fit-params of both
	// builds: GLM-4.5-Air keeps 752 and 736 MiB of KV at 4096 cells.
	NextNWithoutKV bool `json:"nextn_without_kv,omitempty"`
	// LoadMode: de3ff81's llama-server no longer takes --no-mmap ("error:
	// invalid argument"); loading without mapping is --load-mode none,
	// which 80fb11a already takes beside the deprecated --no-mmap
	// (llama.cpp PR #28334, release b10875, removed the flag).
	LoadMode bool `json:"load_mode,omitempty"`
	// VulkanFusion: from de3ff81, ggml_vk_graph_optimize keeps the runs
	// the Vulkan backend fuses together (RMS_NORM+MUL+ADD, ROPE+VIEW+
	// SET_ROWS, ...), pulls a MUL after the UNARY it reads, and keeps a
	// top-k MoE selection's inputs alive until it ends (add_alloc_dep):
	// the Vulkan compute buffers follow that order (llama.cpp PRs #28024,
	// RMS_NORM fusions; #27220, UNARY+MUL; #28422, top-k MoE).
	VulkanFusion bool `json:"vulkan_fusion,omitempty"`
	// CUDATopKDeps: from de3ff81, ggml-cuda's graph_optimize keeps every
	// node of a fused top-k MoE selection (softmax or sigmoid, argsort,
	// get_rows, the weights' normalization and scale) and everything they
	// read alive until the node after the run (add_alloc_deps); 80fb11a's
	// adds only the weighted reduction's.
	CUDATopKDeps bool `json:"cuda_topk_deps,omitempty"`
	// NoCUDAReduceDeps: builds before llama.cpp PR #25952 (September
	// 2026) do not keep the MoE experts' unweighted outputs and router
	// weights alive until the per-expert sum ends on CUDA and ROCm; from
	// it (80fb11a and later) the backend fuses the weighting and the sum
	// and asks the scheduler to (plan/ggml/cudaopt.go).
	NoCUDAReduceDeps bool `json:"no_cuda_reduce_deps,omitempty"`
	// MetalFusion: from de3ff81, the Metal backend's graph optimizer packs
	// the runs its fusion table lists (norms with their MUL and ADD, ADD
	// chains, the top-k MoE selection, the MoE weighted reduction, ...)
	// before it reorders, counts every tensor of a packed run as written,
	// and keeps the sources of every run whose ops match a pattern alive
	// until its last node (ggml_metal_fusion_add_alloc_deps); 80fb11a's
	// packs ADD/NORM/RMS_NORM chains only (plan/ggml/metalfusion.go).
	MetalFusion bool `json:"metal_fusion,omitempty"`
	// NoMetalReorder: builds before llama.cpp PR #15929 (September 2025)
	// ran a Metal split in the order the scheduler cut it; from it the
	// backend reorders for concurrency (plan/ggml/metalorder.go).
	NoMetalReorder bool `json:"no_metal_reorder,omitempty"`
	// MetalMappedOffset: builds before llama.cpp PR #15995 (September
	// 2025) made a Metal buffer over the mapped file in
	// ggml_backend_metal_buffer_from_ptr, which moved its start down to a
	// page boundary and gave the buffer the grown size: the span plus its
	// start's offset into the page (16 KiB on Apple silicon). Later builds
	// map the same pages but give the buffer the span's size.
	MetalMappedOffset bool `json:"metal_mapped_offset,omitempty"`
	// KVCopy: builds before llama.cpp PR #14959 (August 2025) made
	// ggml_set_rows the KV cache's write (PR #14285 had added it behind
	// LLAMA_SET_ROWS) copied K and V into views of the cache at the write
	// position with
	// ggml_cpy (llm_build_kv_store; V transposed on the way without flash
	// attention), so their graphs have no k_idxs and v_idxs inputs: a
	// transposed V's indices are one per element, n_embd_v_gqa x n_tokens
	// I64 (16 MiB for Open LLaMA 7B's 512-token micro-batch, 4096 wide).
	KVCopy bool `json:"kv_copy,omitempty"`
	// QKVCont: early 2025's build_gptneox (build 4715 of February 2025)
	// copied Q, K and V out of the fused projection with ggml_cont of
	// 2-D views, where later builds take strided views (gptneox.cpp).
	QKVCont bool `json:"qkv_cont,omitempty"`
	// NoOutIDs: builds before llama.cpp PR #6122 (March 2024) computed
	// the last layer for every token: no inp_out_ids and no get_rows of
	// the rows that are output.
	NoOutIDs bool `json:"no_out_ids,omitempty"`
	// NoEmbdSelect: builds before llama.cpp PR #18898 (January 2026) made
	// only the token path of build_inp_embd for a batch of tokens; from it
	// both inputs are made and ggml_build_forward_select keeps the lookup,
	// so the unused vector input (n_embd x n_tokens f32) is a leaf the
	// allocator places in the CPU's buffer and never frees.
	NoEmbdSelect bool `json:"no_embd_select,omitempty"`
	// MaskCast: builds before llama.cpp PR #23764 (May 2026) made the KQ
	// mask F32 and, for flash attention, cast it to F16 in the graph
	// (ggml_cast); from it the mask is made F16.
	MaskCast bool `json:"mask_cast,omitempty"`
	// SplitInputsGrow: from de3ff81, ggml_backend_sched_split_graph grows
	// a split's input list instead of starting a new split when it holds
	// GGML_SCHED_MAX_SPLIT_INPUTS (30) inputs (llama.cpp PR #28387).
	SplitInputsGrow bool `json:"split_inputs_grow,omitempty"`
	// GDNNormAsRMS: from de3ff81, the gated delta net's q and k L2 norm
	// is recorded as ggml_scale(ggml_rms_norm(x, eps/n), 1/sqrt(n))
	// (build_gdn_l2_norm, llama.cpp PR #28068): two nodes for one
	// (Qwen3-Next: 5059 -> 5131).
	GDNNormAsRMS bool `json:"gdn_norm_as_rms,omitempty"`
	// OverrideCPUPlain: builds before llama.cpp b6049 ("when overriding
	// to a CPU buffer, consider the extra buffer types") loaded a weight
	// that -ot sends to the CPU (--n-cpu-moe came later) into the CPU's
	// own buffer type: the mapped file under mmap, else plain CPU memory,
	// never a GPU's pinned host buffer or a repack buffer. A --no-mmap
	// load of build 5192 prints the overridden FFNs as "CPU model buffer"
	// beside the token embedding's "CUDA_Host model buffer".
	OverrideCPUPlain bool `json:"override_cpu_plain,omitempty"`
	// ReserveAllOutputs: builds before llama.cpp PR #23861 (b9460, June
	// 2026, "limit max outputs of llama_context") reserved the worst-case
	// graph with every token of the micro-batch an output
	// (graph_reserve(n_tokens, n_seqs, n_tokens, ...)), where later
	// llama-servers keep n_outputs_max rows (one per slot): the compute
	// buffer of the device with the output layer holds n_ubatch rows of
	// logits (392.75 MiB for gpt-oss at 512 tokens; public logs of builds
	// 5192 to 6699, docs/accuracy-public.md).
	ReserveAllOutputs bool `json:"reserve_all_outputs,omitempty"`
	// CtxPad is the cells a context is padded to; 0 is 256, the rule of
	// every build measured here. Older builds padded to 32 without flash
	// attention (llama_kv_cache_get_padding), as build 4715's public logs
	// show (kv_size = 128 for -c 128).
	CtxPad int `json:"ctx_pad,omitempty"`
	// OutputRows is the rows of logits the output buffer holds where a
	// build sized it otherwise than one per sequence: before llama.cpp PR
	// #6122 (March 2024) it held n_batch. 0 is one per sequence.
	OutputRows int `json:"output_rows,omitempty"`
	// OutputEmbd: the output buffer holds an embedding row beside each
	// row of logits (llama_output_reserve with cparams.embeddings on, as
	// ollama's runner of 2024 made its contexts).
	OutputEmbd bool `json:"output_embd,omitempty"`
}
