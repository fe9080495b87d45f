// Package builds holds what sets one llama.cpp build apart from another
// in headroom's accounting: the rules llama.cpp changed at a known build
// number, in one table, and the builds headroom measured, each with the
// number whose rules it has. Nothing else in the module names a commit.
package builds

// Rules are the accounting rules that differ between llama.cpp builds.
// Every boolean reads "from build N, llama.cpp does this": true is the
// newer behaviour, and the table in changes says N. The zero value is
// the oldest build the table covers, before every change; a caller that
// means "the build headroom defaults to" asks Default, and one that
// knows the build's number asks For.
type Rules struct {
	// OutIDs: from PR #6122 (b2540) the last layer computes only the rows
	// that are output (inp_out_ids and a get_rows of them); before it
	// every token's.
	OutIDs bool `json:"out_ids"`
	// QKVViews: build_gptneox takes Q, K and V as strided views of the
	// fused projection; early 2025's (build 4715) copied them out with
	// ggml_cont of 2-D views (gptneox.cpp).
	QKVViews bool `json:"qkv_views"`
	// OverrideCPUExtra: from b6049 ("when overriding to a CPU buffer,
	// consider the extra buffer types") a weight that -ot sends to the
	// CPU is placed like a CPU layer's weight; before it, in the CPU's own
	// buffer type (the mapped file under mmap, else plain CPU memory),
	// never a GPU's pinned host buffer or a repack buffer: a --no-mmap
	// load of build 5192 prints the overridden FFNs as "CPU model buffer"
	// beside the token embedding's "CUDA_Host model buffer".
	OverrideCPUExtra bool `json:"override_cpu_extra"`
	// KVSetRows: from PR #14959 (b6071) the KV cache is written with
	// ggml_set_rows; before it K and V were copied into views of the
	// cache at the write position with ggml_cpy (llm_build_kv_store; V
	// transposed on the way without flash attention), so those graphs have
	// no k_idxs and v_idxs inputs: a transposed V's indices are one per
	// element, n_embd_v_gqa x n_tokens I64 (16 MiB for Open LLaMA 7B's
	// 512-token micro-batch, 4096 wide).
	KVSetRows bool `json:"kv_set_rows"`
	// MetalReorder: from PR #15929 (build 6460) the Metal backend reorders
	// a split for concurrency (plan/ggml/metalorder.go); before it a split
	// ran in the order the scheduler cut it.
	MetalReorder bool `json:"metal_reorder"`
	// MetalMappedSpan: from PR #15995 (b6501) a Metal buffer over the
	// mapped file has the span's size. Before it
	// ggml_backend_metal_buffer_from_ptr moved its start down to a page
	// boundary and gave the buffer the grown size: the span plus its
	// start's offset into the page (16 KiB on Apple silicon).
	MetalMappedSpan bool `json:"metal_mapped_span"`
	// EmbdSelect: from PR #18898 (b7819) build_inp_embd makes both inputs
	// of a batch of tokens and ggml_build_forward_select keeps the lookup,
	// so the unused vector input (n_embd x n_tokens f32) is a leaf the
	// allocator places in the CPU's buffer and never frees; before it only
	// the token path was made.
	EmbdSelect bool `json:"embd_select"`
	// MaskF16: from PR #23764 (b9410) the KQ mask is made F16; before it,
	// F32 and, for flash attention, cast to F16 in the graph (ggml_cast).
	MaskF16 bool `json:"mask_f16"`
	// ReserveOutputsMax: from PR #23861 (b9460, "limit max outputs of
	// llama_context") the worst-case graph keeps n_outputs_max rows (one
	// per slot in llama-server); before it every token of the micro-batch
	// was an output (graph_reserve(n_tokens, n_seqs, n_tokens, ...)), so
	// the compute buffer of the device with the output layer held
	// n_ubatch rows of logits (392.75 MiB for gpt-oss at 512 tokens;
	// public logs of builds 5192 to 6699, docs/accuracy-public.md).
	ReserveOutputsMax bool `json:"reserve_outputs_max"`
	// CUDAReduceDeps: from PR #25952 (b10751) CUDA and ROCm fuse the MoE
	// weighted reduction and keep the experts' unweighted outputs and the
	// router weights alive until the per-expert sum ends
	// (plan/ggml/cudaopt.go).
	CUDAReduceDeps bool `json:"cuda_reduce_deps"`
	// CUDATopKDeps: ggml-cuda's graph_optimize keeps every node of a fused
	// top-k MoE selection (softmax or sigmoid, argsort, get_rows, the
	// weights' normalization and scale) and everything they read alive
	// until the node after the run (add_alloc_deps); before it only the
	// weighted reduction's.
	CUDATopKDeps bool `json:"cuda_topk_deps"`
	// MetalFusion: the Metal backend's graph optimizer packs the runs its
	// fusion table lists (norms with their MUL and ADD, ADD chains, the
	// top-k MoE selection, the MoE weighted reduction, ...) before it
	// reorders, counts every tensor of a packed run as written, and keeps
	// the sources of every run whose ops match a pattern alive until its
	// last node (ggml_metal_fusion_add_alloc_deps); before it only
	// ADD/NORM/RMS_NORM chains were packed (plan/ggml/metalfusion.go).
	MetalFusion bool `json:"metal_fusion"`
	// GDNNormAsRMS: from PR #28068 (b10829) the gated delta net's q and k
	// L2 norm is recorded as ggml_scale(ggml_rms_norm(x, eps/n),
	// 1/sqrt(n)) (build_gdn_l2_norm): two nodes for one (Qwen3-Next: 5059
	// -> 5131).
	GDNNormAsRMS bool `json:"gdn_norm_as_rms"`
	// VulkanFusion: ggml_vk_graph_optimize keeps the runs the Vulkan
	// backend fuses together (RMS_NORM+MUL+ADD, ROPE+VIEW+SET_ROWS, ...),
	// pulls a MUL after the UNARY it reads, and keeps a top-k MoE
	// selection's inputs alive until it ends (add_alloc_dep); the Vulkan
	// compute buffers follow that order (PRs #28024, #27220, #28422).
	VulkanFusion bool `json:"vulkan_fusion"`
	// SplitInputsGrow: from PR #28387 (b10834)
	// ggml_backend_sched_split_graph grows a split's input list instead
	// of starting a new split when it holds GGML_SCHED_MAX_SPLIT_INPUTS
	// (30) inputs.
	SplitInputsGrow bool `json:"split_inputs_grow"`
	// LoadMode: from PR #28334 (b10875) llama-server no longer takes
	// --no-mmap ("error: invalid argument"); loading without mapping is
	// --load-mode none, which builds shortly before it took beside the
	// deprecated flag.
	LoadMode bool `json:"load_mode"`
	// MlockLoads: from PR #26135 --mlock is --load-mode mlock, which loads
	// the weights into host buffers and locks those, where before it
	// locked the mapped file (mmap+mlock is the old meaning). The PR was
	// merged on 2026-07-26, after b10114 (issue #26110 reports that build
	// without it); b10809 (80fb11a) takes it so: "DEPRECATED: --mlock",
	// 11.6 MiB of file pages resident, and the 167.90 MiB CPU buffer of a
	// Qwen3-0.6B Q4_K_M the one buffer it tried to lock.
	MlockLoads bool `json:"mlock_loads"`
	// NextNWithoutKV: from PR #28630 (b10907) the NextN (multi-token
	// prediction) blocks get no KV cache in any architecture (llama_model's
	// memory filter skips il >= n_layer() when n_layer_nextn > 0); before
	// it glm4moe's stayed in the cache. Measured with llama-fit-params on
	// both sides: GLM-4.5-Air keeps 752 and 736 MiB of KV at 4096 cells.
	NextNWithoutKV bool `json:"nextn_without_kv"`
	// CheckpointsToCap: from PR #28302 (merged 2026-09-03) llama-server
	// erases a slot's context checkpoints of earlier tasks that lie within
	// -cms of a kept one only once the slot holds -ctxcp of them, so a
	// conversation keeps up to -ctxcp checkpoints per slot; before it
	// every new checkpoint erased them, and a slot held the near-end
	// checkpoints of its task and the spaced ones (plan/serving.go).
	CheckpointsToCap bool `json:"checkpoints_to_cap"`

	// What follows is not decided by a build's number: the host program
	// or its flags set it. The zero value is llama-server's of every
	// build in the table.

	// CtxPad is the cells a context is padded to; 0 is 256. Older builds
	// padded to 32 without flash attention (llama_kv_cache_get_padding),
	// as build 4715's public logs show (kv_size = 128 for -c 128).
	CtxPad int `json:"ctx_pad,omitempty"`
	// OutputRows is the rows of logits the output buffer holds where a
	// build sized it otherwise than one per sequence: before PR #6122 it
	// held n_batch. 0 is one per sequence.
	OutputRows int `json:"output_rows,omitempty"`
	// OutputEmbd: the output buffer holds an embedding row beside each
	// row of logits (llama_output_reserve with cparams.embeddings on, as
	// ollama's runner of 2024 made its contexts).
	OutputEmbd bool `json:"output_embd,omitempty"`
}
