// Package conformance holds measurements of the real llama.cpp engine and
// the types to read them. Each golden file under testdata/golden records one
// load of a synthetic GGUF (synth) under one serving profile, with
// every buffer llama.cpp allocated as its own log printed it.
//
// The files are written by the Node harness in harness/ (see regen.sh); this
// package only reads and checks them, so its tests need neither Node nor a
// network. A test that compares headroom's accountant with the engine loads
// the cases with Load and, for each, rebuilds the synth file's header with
// Case.Synth and predicts Figures.Buffers from it.
package conformance

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Case is one golden file.
type Case struct {
	Schema int    `json:"schema"`
	ID     string `json:"id"`
	Note   string `json:"note,omitempty"`
	Inputs Inputs `json:"inputs"`
	Engine Engine `json:"engine"`
	// Figures are what llama.cpp printed, parsed.
	Figures Figures `json:"figures"`
	// PrintInfo is llama.cpp's print_info block (hyperparameters as it read
	// them), key to value; a key printed more than once (EOG token) holds a
	// list.
	PrintInfo map[string]any `json:"print_info"`
	// Log holds the log lines the figures came from, verbatim.
	Log []string `json:"log"`
	// Estimate is node-llama-cpp's own prediction, NOT a measurement; nil
	// when it was not taken.
	Estimate *Estimate `json:"estimate"`

	// Path is the file the case was read from.
	Path string `json:"-"`
}

// Inputs say what was loaded and how.
type Inputs struct {
	Shape  string `json:"shape"` // synth shape name
	Arch   string `json:"arch"`
	Quant  string `json:"quant"` // synth recipe
	Source string `json:"source"`
	File   File   `json:"file"`
	// Profile is what the harness asked node-llama-cpp for. Figures.Context
	// holds what llama.cpp made of it.
	Profile Profile `json:"profile"`
	// Passed is what node-llama-cpp handed llama.cpp for that profile
	// (library loads only).
	Passed Passed `json:"passed_to_llama_cpp"`
	// Command is the flags llama-server ran with, besides -m, --host,
	// --port and the log verbosity (llama-server loads only): what headroom emits for
	// Profile (plan.Profile.Args).
	Command []string `json:"command,omitempty"`
}

// Passed holds the parameters node-llama-cpp gave its native addon, in its
// names. They differ from the profile: contextSize is the total over all
// sequences, padded up to a multiple of 256, and batchSize is one more than
// asked for SWA models without swaFullCache. n_ubatch is always n_batch.
type Passed struct {
	Model struct {
		GPULayers int  `json:"gpuLayers"`
		UseMmap   bool `json:"useMmap"`
	} `json:"model"`
	Context struct {
		ContextSize      int            `json:"contextSize"`
		BatchSize        int            `json:"batchSize"`
		Sequences        int            `json:"sequences"`
		FlashAttention   FlashAttention `json:"flashAttention"`
		KVCacheKeyType   int            `json:"kvCacheKeyType"` // ggml_type: 1 f16, 8 q8_0
		KVCacheValueType int            `json:"kvCacheValueType"`
		SWAFullCache     bool           `json:"swaFullCache"`
	} `json:"context"`
}

// File identifies the synthetic GGUF. HeaderSHA256 covers the header and
// its padding up to the data region, which is all llama.cpp reads of a
// sparse file; a change to the synth shape changes it.
type File struct {
	SizeBytes    int64  `json:"size_bytes"`
	HeaderBytes  int64  `json:"header_bytes"`
	HeaderSHA256 string `json:"header_sha256"`
	Tensors      int    `json:"tensors"`
	Params       uint64 `json:"params"`
}

// Profile is a serving profile in node-llama-cpp's terms.
type Profile struct {
	Backend   string `json:"backend"`    // "cpu", "vulkan" or "cuda"
	GPULayers int    `json:"gpu_layers"` // llama.cpp's n_gpu_layers; 999 means all
	// ContextSizePerSeq is node-llama-cpp's contextSize, which is PER
	// SEQUENCE: llama.cpp was asked for n_ctx = ContextSizePerSeq*Sequences.
	ContextSizePerSeq int            `json:"context_size_per_seq"`
	Sequences         int            `json:"sequences"`
	FlashAttention    FlashAttention `json:"flash_attention"`
	// BatchSize is the requested n_batch; node-llama-cpp sets n_ubatch to
	// the same and adds 1 to both for SWA models (see Passed). Read the
	// values llama.cpp used from Figures.Context.
	BatchSize  int    `json:"batch_size"`
	CacheTypeK string `json:"cache_type_k"` // "f16" or "q8_0"
	CacheTypeV string `json:"cache_type_v"`
	MMap       bool   `json:"mmap"`
	SWAFull    bool   `json:"swa_full"`
	// RPCServers is how many rpc-servers (llama.cpp's RPC backend, each
	// on a loopback port of the measuring machine, serving its CPU) the
	// load used; their endpoints are the --rpc of Inputs.Command, and
	// GPULayers then counts layers on their devices. TensorSplit is the
	// -ts it ran with, one figure per device in llama.cpp's order.
	RPCServers  int       `json:"rpc_servers,omitempty"`
	TensorSplit []float64 `json:"tensor_split,omitempty"`
	// CPUMoE is llama-server's --n-cpu-moe: the routed experts of the
	// first CPUMoE layers stayed in system memory (all of them when it is
	// n_layer or more).
	CPUMoE int `json:"cpu_moe_layers,omitempty"`
	// Embedding is "on" for a server started with --embedding, "rerank"
	// for one started with --rerank; empty for a generating server.
	Embedding string `json:"embedding,omitempty"`
	// Spec is the --spec-type the server ran with (draft-mtp), DraftMax
	// its --spec-draft-n-max (0: llama.cpp's default) and
	// CacheTypeDraft its -ctkd and -ctvd ("": f16); the draft context's
	// figures are Figures.Draft.
	// Draft is the -md model, "shape:quant" of a synth file.
	Draft          string `json:"draft,omitempty"`
	Spec           string `json:"spec,omitempty"`
	DraftMax       int    `json:"draft_max,omitempty"`
	CacheTypeDraft string `json:"cache_type_draft,omitempty"`
}

// RPCEndpoints are the rpc-servers of an RPC load, in --rpc order, from
// the command it ran with; nil for other loads.
func (c *Case) RPCEndpoints() []string {
	cmd := c.Inputs.Command
	for i := 0; i+1 < len(cmd); i++ {
		if cmd[i] == "--rpc" {
			return strings.Split(cmd[i+1], ",")
		}
	}
	return nil
}

// NCtx is the total context the profile asks for (llama-server's -c):
// ContextSizePerSeq*Sequences. node-llama-cpp pads it up to a multiple of
// 256 before llama.cpp sees it (Passed.Context.ContextSize); every committed
// case uses sizes where the two agree.
func (p Profile) NCtx() int { return p.ContextSizePerSeq * p.Sequences }

// FlashAttention is "on", "off" or "auto". In JSON it is true, false or
// "auto", as node-llama-cpp takes it.
type FlashAttention string

// The flash-attention settings.
const (
	FlashOn   FlashAttention = "on"
	FlashOff  FlashAttention = "off"
	FlashAuto FlashAttention = "auto"
)

// UnmarshalJSON accepts true, false, "auto" and null (unset).
func (f *FlashAttention) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*f = FlashOn
	case "false":
		*f = FlashOff
	case `"auto"`:
		*f = FlashAuto
	case "null":
		// A llama-server case has no node-llama-cpp parameters.
		*f = ""
	default:
		return fmt.Errorf("flash_attention: want true, false or \"auto\", got %s", b)
	}
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (f FlashAttention) MarshalJSON() ([]byte, error) {
	switch f {
	case FlashOn:
		return []byte("true"), nil
	case FlashOff:
		return []byte("false"), nil
	case FlashAuto:
		return []byte(`"auto"`), nil
	case "":
		return []byte("null"), nil
	}
	return nil, fmt.Errorf("flash_attention: unknown value %q", string(f))
}

// The drivers that load a case: llama-server itself, or a library context
// made through node-llama-cpp.
const (
	DriverServer  = "llama-server"
	DriverLibrary = "node-llama-cpp"
)

// Engine identifies the llama.cpp that was measured.
type Engine struct {
	// Driver is DriverServer or DriverLibrary ("" in files written before
	// llama-server was measured: those are library loads).
	Driver string `json:"driver,omitempty"`
	// Version is llama-server's --version line (server loads).
	Version         string `json:"version,omitempty"`
	NodeLlamaCpp    string `json:"node_llama_cpp"`
	LlamaCppRepo    string `json:"llama_cpp_repo"`
	LlamaCppRelease string `json:"llama_cpp_release"`
	// LlamaCppSourceCommit is the HEAD of the llama.cpp source bundle that
	// node-llama-cpp ships with its binaries (a squashed commit: it names
	// the tree, not an upstream commit).
	LlamaCppSourceCommit string      `json:"llama_cpp_source_commit"`
	Backend              string      `json:"backend"`
	GPUDevices           []GPUDevice `json:"gpu_devices"`
	SystemInfo           string      `json:"system_info"`
	// RPCServers are the banners the rpc-servers of an RPC load printed:
	// protocol version and the device each served, with its memory.
	RPCServers []RPCServer `json:"rpc_servers,omitempty"`
}

// RPCServer is one rpc-server's banner.
type RPCServer struct {
	Endpoint string   `json:"endpoint"`
	Lines    []string `json:"lines"`
}

// GPUDevice is a GPU as node-llama-cpp or the backend's own log named it;
// TotalBytes is the memory it reported (CUDA's "VRAM: N MiB"), 0 where
// none was read.
type GPUDevice struct {
	Name       string `json:"name"`
	TotalBytes int64  `json:"total_bytes"`
}

// Figures are llama.cpp's own numbers for one load.
type Figures struct {
	Context Context `json:"context"`
	// Layers is "layer N assigned to device X" for N = 0..n_layer; the
	// last one is the output layer.
	Layers  []Layer  `json:"layers"`
	Offload *Offload `json:"offload"` // nil on the CPU-only build
	// KVLayers is the per-layer placement of the KV cache and recurrent
	// state ("layer N: dev = X").
	KVLayers []MemoryLayer `json:"kv_layers"`
	KVCaches []KVCache     `json:"kv_caches"`
	RSCaches []RSCache     `json:"rs_caches"`
	// Buffers is every buffer-size line, in log order.
	Buffers []Buffer `json:"buffers"`
	// ComputeExact is the context destructor's check of each compute
	// buffer, printed with four decimals instead of two.
	ComputeExact []ComputeCheck `json:"compute_exact"`
	Graph        Graph          `json:"graph"`
	// Fallbacks are llama.cpp's "cannot be used with preferred buffer type"
	// notes: tensors that went to another buffer type than preferred.
	Fallbacks []string `json:"fallbacks"`
	// Draft is the speculative draft context's figures (its context,
	// caches, buffers and compute checks), logged after
	// common_speculative_init_result's line; nil without one.
	Draft *Figures `json:"draft,omitempty"`
}

// Context is the llama_context parameters block as llama.cpp printed it.
type Context struct {
	NSeqMax     int    `json:"n_seq_max"`
	NCtx        int    `json:"n_ctx"`
	NCtxSeq     int    `json:"n_ctx_seq"`
	NBatch      int    `json:"n_batch"`
	NUbatch     int    `json:"n_ubatch"`
	FlashAttn   string `json:"flash_attn"` // "enabled", "disabled" or "auto"
	KVUnified   bool   `json:"kv_unified"`
	CausalAttn  int    `json:"causal_attn"`
	NRsSeq      int    `json:"n_rs_seq"`
	NOutputsMax int    `json:"n_outputs_max"`
}

// Layer is one layer's device.
type Layer struct {
	Layer  int    `json:"layer"`
	Device string `json:"device"`
	IsSWA  bool   `json:"is_swa"`
}

// Offload is the "offloading ... layers to GPU" summary.
type Offload struct {
	OutputLayer     bool `json:"output_layer"`
	RepeatingLayers int  `json:"repeating_layers"`
	OffloadedLayers int  `json:"offloaded_layers"`
	TotalLayers     int  `json:"total_layers"`
}

// MemoryLayer places one layer's cache or state.
type MemoryLayer struct {
	Memory string `json:"memory"` // llama_kv_cache, llama_memory_recurrent...
	Cache  string `json:"cache"`  // "", "non-SWA", "SWA"...
	Layer  int    `json:"layer"`
	Device string `json:"device"`
}

// KVCache is one "size = ..." summary of a KV cache. Cache names it when a
// memory holds several ("non-SWA" and "SWA"); a plain cache has "".
type KVCache struct {
	Cache          string  `json:"cache"`
	CellsAnnounced *int    `json:"cells_announced,omitempty"`
	Memory         string  `json:"memory"`
	SizeMiB        float64 `json:"size_mib"`
	Cells          int     `json:"cells"`
	Layers         int     `json:"layers"`
	Seqs           int     `json:"seqs"`
	SeqsMax        int     `json:"seqs_max"`
	KType          string  `json:"k_type"`
	KMiB           float64 `json:"k_mib"`
	VType          string  `json:"v_type"`
	VMiB           float64 `json:"v_mib"`
	Printed        string  `json:"printed"`
}

// RSCache is the recurrent state summary.
type RSCache struct {
	Memory  string  `json:"memory"`
	SizeMiB float64 `json:"size_mib"`
	Cells   int     `json:"cells"`
	Layers  int     `json:"layers"`
	Seqs    int     `json:"seqs"`
	RSSeq   int     `json:"rs_seq"`
	RType   string  `json:"r_type"`
	RMiB    float64 `json:"r_mib"`
	SType   string  `json:"s_type"`
	SMiB    float64 `json:"s_mib"`
	Printed string  `json:"printed"`
}

// Buffer is one allocation as llama.cpp printed it.
type Buffer struct {
	// DeviceOrBufferType is llama.cpp's name for the buffer: CPU_Mapped,
	// CPU_REPACK, CPU, Vulkan0, Vulkan_Host...
	DeviceOrBufferType string `json:"device_or_buffer_type"`
	Kind               string `json:"kind"` // model, kv, rs, compute, output
	// Cache names the KV cache a kv buffer belongs to ("" for a plain
	// cache, "non-SWA"/"SWA" for the two caches of an iswa memory).
	Cache   string  `json:"cache"`
	MiB     float64 `json:"mib"`
	Printed string  `json:"printed"` // exactly as printed, two decimals
	Source  string  `json:"source"`  // the printing function
}

// Matches reports whether a buffer of the given size prints as this one:
// llama.cpp prints bytes/1024/1024 with %.2f, so one printed value covers a
// range of sizes (about 10 KiB wide).
func (b Buffer) Matches(bytes int64) bool {
	return strconv.FormatFloat(float64(bytes)/(1<<20), 'f', 2, 64) == b.Printed
}

// Bounds returns the range of byte sizes that print as this buffer.
func (b Buffer) Bounds() (lo, hi int64) {
	v, err := strconv.ParseFloat(b.Printed, 64)
	if err != nil {
		return 0, -1
	}
	lo = int64(math.Ceil((v - 0.005) * (1 << 20)))
	hi = int64(math.Floor((v + 0.005) * (1 << 20)))
	for lo > 0 && b.Matches(lo-1) {
		lo--
	}
	for !b.Matches(lo) && lo <= hi {
		lo++
	}
	for b.Matches(hi + 1) {
		hi++
	}
	for !b.Matches(hi) && hi >= lo {
		hi--
	}
	return max(lo, 0), hi
}

// ComputeCheck is the destructor's four-decimal view of a compute buffer.
type ComputeCheck struct {
	DeviceOrBufferType string  `json:"device_or_buffer_type"`
	MiB                float64 `json:"mib"`
	Printed            string  `json:"printed"`
	ExpectedMiB        float64 `json:"expected_mib"`
}

// Graph is the scheduler's summary of the worst-case graph.
type Graph struct {
	Nodes  int    `json:"nodes"`
	Splits string `json:"splits"`
}

// Estimate is node-llama-cpp's no-alloc estimate (GgufInsights), kept for
// comparison; it is not what llama.cpp allocates.
type Estimate struct {
	Label   string        `json:"label"`
	Model   EstimateBytes `json:"model"`
	Context EstimateBytes `json:"context"`
}

// EstimateBytes splits an estimate between host and device.
type EstimateBytes struct {
	CPURAMBytes  int64 `json:"cpu_ram_bytes"`
	GPUVRAMBytes int64 `json:"gpu_vram_bytes"`
}

// Server reports whether the case is a llama-server load.
func (c *Case) Server() bool { return c.Engine.Driver == DriverServer }

// BuffersOf returns the buffers of one kind, in log order.
func (c *Case) BuffersOf(kind string) []Buffer {
	var out []Buffer
	for _, b := range c.Figures.Buffers {
		if b.Kind == kind {
			out = append(out, b)
		}
	}
	return out
}

// PrintInfoInt reads an integer print_info entry (n_layer, n_swa...).
func (c *Case) PrintInfoInt(key string) (int, bool) {
	s, ok := c.PrintInfo[key].(string)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// decodeCase parses one golden file. Unknown fields are ignored, so the
// harness may record more of the log than this package names; validate
// checks that what it does name is there.
func decodeCase(data []byte) (*Case, error) {
	var c Case
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, err
	}
	return &c, nil
}
