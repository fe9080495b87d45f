// Package graph replays the graphs llama.cpp reserves compute buffers
// for: the tensors each architecture's graph records for one micro-batch
// against a full cache, with ggml's types and shapes, in ggml's order, on
// the devices where the weights, caches and layers live. The shared
// blocks follow llm_graph_context (src/llama-graph.cpp), each family's
// file one of llama.cpp's src/models/*.cpp; plan/ggml allocates and
// schedules what they record.
package graph

import (
	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// Context is the serving profile as llama.cpp's context constructor
// resolves it: what the graphs are sized by.
type Context struct {
	NCtx     int // total cells, padded
	NCtxSeq  int // cells per sequence
	NSeq     int // n_seq_max
	NStream  int // KV streams: 1 if unified, else NSeq
	NBatch   int
	NUBatch  int
	Flash    bool // flash attention in effect
	TypeK    gguf.GGMLType
	TypeV    gguf.GGMLType
	VTrans   bool // V stored transposed (without flash attention)
	Unified  bool
	SWAFull  bool
	CtxTrain int
	// NOutputsMax is n_outputs_max: the reserve graph keeps
	// min(n_tokens, NOutputsMax) rows past the output selection.
	NOutputsMax int
	// Embeddings is cparams.embeddings (--embedding): the graph pools its
	// embedding by Pooling (arch.Pooling*) after the model's own nodes.
	Embeddings bool
	Pooling    int
	// NRSSeq is n_rs_seq: the recurrent snapshots kept per sequence
	// beside its state (an MTP draft's rollback), which the recurrent
	// memory and the gated delta net's output hold.
	NRSSeq int
}

// outputRows is how many rows the reserve graph of T tokens keeps past
// its output selection (llama_context::sched_reserve's n_outputs_pp).
func (c Context) outputRows(T int64) int64 {
	if c.NOutputsMax <= 0 {
		return T
	}
	return min(T, int64(c.NOutputsMax))
}

// SWACells is the size of a sliding-window cache for a window of that
// many tokens, which the KV buffers and the graphs' masks share: the
// window of every sequence a stream holds plus one micro-batch, padded to
// 256, at most the full cache; --swa-full makes it the full cache.
func (c Context) SWACells(window int) int {
	if c.SWAFull {
		return c.NCtxSeq
	}
	return pad(min(c.NCtxSeq, window*c.swaSeqs()+c.NUBatch), 256)
}

// swaSeqs is how many sequences' windows a sliding cache must hold: all of
// them when the cache is unified, else one per stream.
func (c Context) swaSeqs() int {
	if c.Unified {
		return c.NSeq
	}
	return 1
}

func pad(x, n int) int { return (x + n - 1) / n * n }

// Home is where the accountant placed a weight, and its real size.
type Home struct {
	Device string
	Bytes  int64
}

// Placement is where one graph's weights, caches and layers live, and
// what else sets its recording apart.
type Placement struct {
	// CPU is the host's device: the home of every weight without one in
	// Homes and of the caches of layers past KVDevices.
	CPU string
	// Homes are the weights' homes by GGUF name, for a graph split over
	// devices; nil on the CPU alone.
	Homes map[string]Home
	// KVDevices is each layer's KV cache (and recurrent state) device.
	KVDevices []string
	// LayerDevices is where each layer runs: its RoPE factors' copy and,
	// with PinNorms, its norms.
	LayerDevices []string
	// PinNorms: llama.cpp's graph callback pins each layer's norms to the
	// layer's device (cbNorm), as it does with the whole model offloaded
	// or a batch under 32 tokens.
	PinNorms bool
	// Rules are the llama.cpp build's, where its graphs differ.
	Rules builds.Rules
	// Arena holds the graph's tensors, its room reused from the arena's
	// last graph; nil for a fresh one.
	Arena *ggml.Arena
}

// Builder records the graph llama.cpp reserves for one micro-batch of
// nTokens against a full cache of c, with p's placement, in the order
// ggml records it. A graph recorded in an arena lives until the arena's
// next graph.
type Builder func(c Context, nTokens int, p Placement) *ggml.Graph
