// Package plan places a model's tensors and caches on devices the way
// llama.cpp does and lists every buffer it would allocate.
package plan

import (
	"fmt"
	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/plan/graph"
	"math"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// FlashAttn is llama.cpp's -fa setting.
type FlashAttn string

// The -fa values.
const (
	FlashOn   FlashAttn = "on"
	FlashOff  FlashAttn = "off"
	FlashAuto FlashAttn = "auto"
)

// GPULayersAuto is -ngl auto (llama.cpp's -1): as many layers as the
// devices take, which without fit means all of them.
const GPULayersAuto = -1

// Profile is a serving configuration in llama-server's terms. Defaults
// gives llama-server's own values; a zero Ctx is the trained context and
// a zero Parallel one sequence, as resolveContext reads them.
type Profile struct {
	Ctx         int       `json:"ctx"`      // -c: total cells across sequences; 0 = trained context
	Parallel    int       `json:"parallel"` // -np
	KVUnified   bool      `json:"kv_unified"`
	Batch       int       `json:"batch"`  // -b
	UBatch      int       `json:"ubatch"` // -ub
	CacheK      string    `json:"cache_type_k"`
	CacheV      string    `json:"cache_type_v"`
	FlashAttn   FlashAttn `json:"flash_attn"`
	GPULayers   int       `json:"gpu_layers"` // -ngl; GPULayersAuto for auto
	TensorSplit []float64 `json:"tensor_split"`
	// Overrides are -ot's tensor buffer-type overrides, first match wins.
	Overrides []Override `json:"overrides"`
	Mmap      bool       `json:"mmap"`
	// Mlock locks the model's weights in RAM (--mlock): mapped, every
	// page from the file's start to the last weight used in place stays
	// resident; loaded, the CPU's and pinned host buffers are locked.
	Mlock       bool `json:"mlock,omitempty"`
	NoKVOffload bool `json:"no_kv_offload"`
	// SWAFull gives sliding-window layers a full-size cache (--swa-full).
	SWAFull bool `json:"swa_full"`
	// CPUMoE keeps the routed experts of the first CPUMoE layers in
	// system memory (--n-cpu-moe; all layers is --cpu-moe), whatever
	// device their layer is on: llama.cpp's override of
	// blk.N.ffn_(up|down|gate)_exps to the CPU buffer type.
	CPUMoE int `json:"cpu_moe_layers,omitempty"`
	// Companions are the projector and draft loaded beside the model; nil
	// for none.
	Companions *Companions `json:"companions,omitempty"`
	// Serving is what llama-server keeps past the load (-cram, -ctxcp,
	// -cms); nil is the program's default (ServingOf).
	Serving *Serving `json:"serving,omitempty"`
	// Pass are llama.cpp flags that change nothing headroom counts
	// (threads, the HTTP server, sampling, templates), with their values,
	// as llamaflags read them: Args writes them after the flags headroom
	// chose, so they reach llama-server unchanged.
	Pass []string `json:"pass_through,omitempty"`
	// Embedding is --embedding, --pooling and --rerank; nil for a
	// generating server.
	Embedding *Embedding `json:"embedding,omitempty"`
	// Spec is speculative decoding (--spec-type and the draft's
	// settings); nil for none.
	Spec *Speculative `json:"speculative,omitempty"`
	// loadOnly leaves out what the program keeps past the load
	// (SearchOptions.loadOnly).
	loadOnly bool
	// OutputsMax is llama.cpp's n_outputs_max: the most logit rows one
	// micro-batch yields, which sizes the compute graph's output rows.
	// 0 means the Program's rule: llama-server's and llama-cli's
	// (ServerOutputsMax), or n_batch for llama-completion and a library
	// context made with llama_context_default_params.
	OutputsMax int `json:"outputs_max,omitempty"`
	// Program is the llama.cpp program the profile is for; "" is
	// llama-server. It decides the output rows when OutputsMax is 0, and
	// the command line Command prints.
	Program Program `json:"-"`
	// Rules are the llama.cpp build's rules; nil is builds.Default(), the
	// newest build headroom measured.
	Rules *builds.Rules `json:"-"`
}

// rules are the rules the profile's build follows.
func (p Profile) rules() builds.Rules {
	if p.Rules == nil {
		return builds.Default()
	}
	return *p.Rules
}

// withRules gives the profile its build's rules once, so the many reads
// of them while accounting do not work the default out each time.
func (p Profile) withRules() Profile {
	r := p.rules()
	p.Rules = &r
	return p
}

// DraftTokens is llama-server's default --spec-draft-n-max
// (common_params_speculative_draft.n_max): with a draft type each slot's
// batch carries up to this many drafted tokens besides its own, each
// with logits.
const DraftTokens = 3

// ServerOutputsMax is the n_outputs_max llama-server gives its context
// (server_output_limits, common_speculative_get_output_limits): one
// output row per slot, and 1 + --spec-draft-n-max per slot with a draft
// type (a -md model without --spec-type drafts nothing), never more than
// n_batch; n_batch for an embedding server (--embedding, or a --pooling
// other than none), every prompt token being an output.
func (p Profile) ServerOutputsMax(nBatch int) int {
	if p.Embeds() || p.pooled() {
		return nBatch
	}
	perSlot := 1 + p.Spec.nMax()
	return max(1, min(nBatch, max(p.Parallel, 1)*perSlot))
}

// expertsOnCPU reports whether the profile's --n-cpu-moe keeps tensor t
// in system memory.
func (p Profile) expertsOnCPU(t arch.Tensor) bool {
	return t.Expert && t.Layer >= 0 && t.Layer < p.CPUMoE
}

// Defaults returns llama-server's defaults for an explicit -np 1 run with
// every layer offloaded.
func Defaults() Profile {
	return Profile{Parallel: 1, Batch: 2048, UBatch: 512, CacheK: "f16", CacheV: "f16",
		FlashAttn: FlashAuto, GPULayers: GPULayersAuto, Mmap: true, TensorSplit: []float64{}, Overrides: []Override{}}
}

func pad(x, n int) int { return (x + n - 1) / n * n }

// resolveContext applies llama_context's rules (src/llama-context.cpp):
// n_ctx defaults to the trained context and is padded to 256 (Rules.CtxPad
// for older builds); without a unified cache each sequence gets
// PAD(n_ctx/n_seq, 256) cells; the batch is capped by the context (not an
// encoder's: its attention is not causal) and the micro-batch by the
// batch. An embedding server (--embedding) lowers the batch to the
// micro-batch first (server.cpp) and, like --pooling, makes every prompt
// token an output (server_output_limits), and its graph pools.
func resolveContext(p Profile, m *arch.Model, flashSupported func(k, v gguf.GGMLType) bool) (graph.Context, error) {
	ctxTrain := m.CtxTrain
	c := graph.Context{CtxTrain: ctxTrain, NSeq: max(p.Parallel, 1), Unified: p.KVUnified, SWAFull: p.SWAFull}
	n := p.Ctx
	if n == 0 {
		n = ctxTrain
	}
	if n <= 0 {
		return c, fmt.Errorf("no context size: -c is 0 and the model has no trained context")
	}
	cells := 256
	if r := p.rules(); r.CtxPad > 0 {
		cells = r.CtxPad
	}
	c.NCtx = pad(n, cells)
	if c.Unified {
		c.NCtxSeq, c.NStream = c.NCtx, 1
	} else {
		c.NCtxSeq = pad(c.NCtx/c.NSeq, cells)
		c.NCtx = c.NCtxSeq * c.NSeq
		c.NStream = c.NSeq
	}
	batch, ubatch := p.Batch, p.UBatch
	if batch <= 0 {
		batch = 2048
	}
	if ubatch <= 0 {
		ubatch = 512
	}
	if p.Embeds() {
		batch = min(batch, ubatch)
	}
	c.NBatch = batch
	if !m.Encoder {
		c.NBatch = min(c.NCtx, batch)
	}
	c.NUBatch = min(c.NBatch, ubatch)
	c.Embeddings, c.Pooling = p.Embeds(), p.pooling(m)
	c.NRSSeq = p.Spec.rsSeq()
	c.NOutputsMax = p.OutputsMax
	switch {
	case c.NOutputsMax > 0:
	case p.Embeds() || p.pooled():
		c.NOutputsMax = p.ServerOutputsMax(batch)
	case !p.rules().ReserveOutputsMax || p.Program.BatchOutputs():
		c.NOutputsMax = c.NBatch
	default:
		c.NOutputsMax = p.ServerOutputsMax(c.NBatch)
	}
	var ok bool
	if c.TypeK, ok = CacheType(p.CacheK); !ok {
		return c, fmt.Errorf("unknown K cache type %q (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)", p.CacheK)
	}
	if c.TypeV, ok = CacheType(p.CacheV); !ok {
		return c, fmt.Errorf("unknown V cache type %q (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)", p.CacheV)
	}
	switch p.FlashAttn {
	case FlashOn:
		c.Flash = true
	case FlashOff:
	case FlashAuto, "":
		// Auto counts as on when the cache is created, so V is never
		// stored transposed; llama.cpp then turns it off where a layer's
		// device cannot run it (flashAuto), unless the V cache is
		// quantized, which makes it on outright (llama_init_from_model).
		c.Flash = true
		if info, _ := c.TypeV.Info(); !info.Quantized && flashSupported != nil {
			c.Flash = flashSupported(c.TypeK, c.TypeV)
		}
		c.VTrans = false
		return c, nil
	default:
		return c, fmt.Errorf("flash attention must be on, off or auto, not %q", p.FlashAttn)
	}
	info, _ := c.TypeV.Info()
	if info.Quantized && !c.Flash {
		return c, fmt.Errorf("a quantized V cache (%s) needs flash attention (-fa on)", p.CacheV)
	}
	c.VTrans = !c.Flash
	return c, nil
}

// CacheType maps -ctk/-ctv names to the types llama.cpp allows for caches.
func CacheType(name string) (gguf.GGMLType, bool) {
	if name == "" {
		return gguf.TypeF16, true
	}
	for _, t := range []gguf.GGMLType{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0,
		gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeIQ4_NL, gguf.TypeQ5_0, gguf.TypeQ5_1} {
		if info, _ := t.Info(); strings.EqualFold(info.Name, name) {
			return t, true
		}
	}
	return 0, false
}

// maxSplitDevices bounds a tensor split: llama.cpp has at most 16 devices
// (LLAMA_MAX_DEVICES); anything far longer is a mistake, not a machine.
const maxSplitDevices = 64

// ParseTensorSplit reads -ts as llama-server takes it: comma-separated
// non-negative shares, one per device in llama.cpp's order.
func ParseTensorSplit(s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) || len(out) >= maxSplitDevices {
			return nil, fmt.Errorf("want up to %d comma-separated non-negative numbers like 3,1, not %q", maxSplitDevices, s)
		}
		out = append(out, x)
	}
	return out, nil
}
