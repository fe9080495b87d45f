// Package synth writes GGUF files shaped like real models: the exact tensor
// names, shapes and quantization mix llama.cpp expects for an architecture,
// with real hyperparameters and a tokenizer of the real size, but with the
// weights left as a sparse hole. A "70B" file costs a few MiB of disk, and
// llama.cpp loads it (its buffer sizes depend on the header, not the weights),
// which is what the tests and the conformance harness need.
//
// The header alone is also a production input: package catalog plans every
// entry that has no locked file from the header Build makes for the
// entry's shape and quantization (catalog.DeriveModel), so a shape or
// recipe here is a size the catalog reports.
package synth

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Shape is the architecture and size of a decoder-only model. The top-level
// fields describe a dense llama-family transformer (llama, qwen2, qwen3,
// mistral3...); the optional parts add what other architectures have on top.
type Shape struct {
	Name       string // e.g. "Llama-3.1-70B"
	Arch       string // general.architecture
	Layers     int
	Embd       int
	Heads      int // 0 for attention-free models (mamba2)
	HeadsKV    int
	HeadDim    int // 0 = Embd/Heads
	FF         int
	Vocab      int
	CtxTrain   int
	RopeTheta  float32
	NormEps    float32
	TiedOutput bool // no output.weight: the embedding is reused
	QKNorm     bool // per-head q/k RMS norms (qwen3)
	QKVBias    bool // q/k/v biases (qwen2)
	// Tokenizer is "gpt2" (BPE with merges) or "llama" (SPM with byte tokens).
	Tokenizer string
	// TokenizerPre is tokenizer.ggml.pre for BPE vocabularies; empty picks
	// "llama-bpe" for llama and "qwen2" otherwise.
	TokenizerPre string
	// Specials places control tokens at fixed ids, where llama.cpp looks
	// them up by text (it requires <|endoftext|> in a Phi-3 vocabulary).
	Specials map[int]string
	Source   string // where the hyperparameters come from

	MoE *MoE // mixture of experts
	SWA *SWA // sliding-window attention on some layers
	MLA *MLA // multi-head latent attention (deepseek2)
	// DSA is DeepSeek Sparse Attention's lightning indexer (deepseek32).
	DSA  *DSA
	Conv *ShortConv // gated short convolutions instead of attention on some layers (lfm2)
	SSM  *SSM       // Mamba-2 state-space layers
	Rope *Rope      // rope scaling as written in the GGUF
	// AltUp adds Gemma 3n's per-layer embeddings, AltUp, Laurel and KV
	// sharing (gemma3n).
	AltUp *AltUp
	// Phi3 stores q, k and v as one attn_qkv tensor and gate and up as one
	// ffn_up of twice the width.
	Fused bool
	// AttnTemperature is mistral3's attention.temperature_scale (Llama 4
	// style scaling of queries with position); 0 leaves the key out.
	AttnTemperature float32
	// LayerNorm writes attention.layer_norm_epsilon (cohere2's plain layer
	// norm) instead of attention.layer_norm_rms_epsilon.
	LayerNorm bool
	// LogitScale is cohere2's and granite's logit_scale (required by both);
	// 0 leaves it out.
	LogitScale float32
	// EmbeddingScale, ResidualScale and AttentionScale are granite's
	// embedding_scale, residual_scale and attention.scale (the config's
	// multipliers); 0 leaves the key out.
	EmbeddingScale, ResidualScale, AttentionScale float32
	// RopeDim is rope.dimension_count where only part of each head is
	// rotated (gptneox: rotary_pct of the head); 0 leaves the
	// architecture's default.
	RopeDim int
	// SequentialResidual writes gptneox's use_parallel_residual false
	// (the FFN reads the attention's residual sum); Pythia's is true.
	SequentialResidual bool
	// AttnSoftcap and FinalSoftcap are gemma2's logit soft-capping values;
	// 0 leaves the keys out.
	AttnSoftcap, FinalSoftcap float32
	// Global describes Gemma 4's global-attention layers where they differ
	// from the sliding ones Heads, HeadsKV and HeadDim describe.
	Global *GlobalAttn
	// PLE is Gemma 4 E2B's and E4B's per-layer inputs; nil for none.
	PLE *PerLayerInputs
	// RopeSections is rope.dimension_sections, the multi-section RoPE's
	// split of the rotated dimensions (Qwen3.5's mrope_section padded to
	// four, as the converter writes it); nil leaves the key out.
	RopeSections []int32
	// Pooling is the pooling_type the converter wrote for an embedding or
	// reranking model ("mean", "cls", "last", "rank"); empty leaves the key
	// out, as for a generating model.
	Pooling string
	// ClsLabels are classifier.output_labels, as the converter writes
	// them from id2label; a reranker (Pooling "rank") has one row of
	// cls.output per label.
	ClsLabels []string
	// RerankPrompt is tokenizer.chat_template.rerank, the prompt
	// llama-server formats a query and a document with ({query},
	// {document}); empty leaves it out.
	RerankPrompt string
}

// MoE describes the expert layers. llama.cpp stores each layer's experts as
// three 3-D tensors (ffn_gate_exps, ffn_up_exps, ffn_down_exps) of shape
// {Embd, FF, Experts} / {FF, Embd, Experts}, plus an F32 router ffn_gate_inp.
type MoE struct {
	Experts int
	Used    int // experts per token
	FF      int // expert_feed_forward_length
	// Shared experts (deepseek2) are one dense FFN of Shared*FF columns.
	Shared int
	// LeadingDense layers at the start have a dense FFN of Shape.FF instead
	// of experts (deepseek2's first_k_dense_replace).
	LeadingDense int
	// Biases adds the router and expert biases of gpt-oss.
	Biases bool
	// NextN is nextn_predict_layers: the last NextN of Shape.Layers are
	// multi-token-prediction blocks (glm4moe), which llama.cpp skips unless
	// asked to load the MTP head.
	NextN int
	// Step is interleave_moe_layer_step (llama4); 0 leaves it out.
	Step int
	// SharedFF is expert_shared_feed_forward_length: qwen2moe's one shared
	// expert of this width, with a sigmoid gate ffn_gate_inp_shexp.
	SharedFF int
	// GatingFunc is expert_gating_func (1 softmax, 2 sigmoid); 0 leaves the
	// key out. WeightsScale is expert_weights_scale; 0 leaves it out.
	GatingFunc   int
	WeightsScale float32
	// WeightsNorm is expert_weights_norm (norm_topk_prob): the selected
	// experts' weights are divided by their sum. Groups and GroupsUsed
	// are expert_group_count and expert_group_used_count (DeepSeek V3's
	// n_group and topk_group): experts are chosen within the best groups.
	WeightsNorm        bool
	Groups, GroupsUsed int
}

// GlobalAttn is Gemma 4's global (full-attention) layers: their KV heads
// and head width (num_global_key_value_heads, global_head_dim), and
// whether K doubles as V (attention_k_eq_v: no attn_v tensor).
type GlobalAttn struct {
	HeadsKV, HeadDim int
	KEqV             bool
}

// PerLayerInputs are Gemma 4 E2B's and E4B's per-layer embeddings
// (hidden_size_per_layer_input) and shared KV: the last SharedKV layers
// have no K and V projections and read an earlier layer's cache, and
// with DoubleWide (use_double_wide_mlp) their FFN is twice as wide.
type PerLayerInputs struct {
	Embd, SharedKV int
	DoubleWide     bool
}

// SWA describes sliding-window attention.
type SWA struct {
	Window int // attention.sliding_window
	// Pattern is written as attention.sliding_window_pattern when non-zero.
	// Real Gemma 3 and gpt-oss files leave it out and rely on llama.cpp's
	// per-architecture default (6 and 2), and so do their shapes here.
	Pattern     int
	FreqBaseSWA float32 // rope.freq_base_swa; 0 leaves it out
	// PerLayer writes the pattern as one bool a layer (Gemma 4's
	// converter, from layer_types) instead of a period.
	PerLayer bool
}

// sliding reports whether layer il slides under the period pattern.
func (w *SWA) sliding(il int) bool { return w != nil && w.Pattern > 0 && il%w.Pattern < w.Pattern-1 }

// MLA describes DeepSeek-style multi-head latent attention as current
// converters write it: the cache holds one compressed KV row of
// KVLoraRank+RopeDim per token, shared by all heads.
type MLA struct {
	QLoraRank  int // 0: a plain attn_q (the "Lite" models)
	KVLoraRank int
	RopeDim    int // qk_rope_head_dim
	NopeDim    int // qk_nope_head_dim
	VDim       int // v_head_dim
}

// DSA describes DeepSeek Sparse Attention's lightning indexer: its own
// query heads (from the q LoRA) over one key head per token, which it keeps
// in a cache of its own, and the number of tokens it lets MLA attend to.
type DSA struct {
	Heads   int // index_n_heads
	HeadDim int // index_head_dim
	TopK    int // index_topk
}

// ShortConv describes LFM2's layers: AttnLayers use attention, the others a
// gated short convolution whose state cache holds LCache-1 columns.
type ShortConv struct {
	LCache     int
	AttnLayers []int
}

// SSM describes Mamba-2 layers.
type SSM struct {
	ConvKernel int
	Inner      int // d_inner
	State      int // d_state
	Groups     int // n_groups
	Heads      int // time_step_rank (n_heads)
	// Layers is the block kind of each layer of a hybrid model, one
	// character a layer, as Nemotron-H's hybrid_override_pattern writes
	// it: 'M' a Mamba-2 mixer, '*' attention, '-' an MLP alone. Empty for
	// pure Mamba (mamba2) and for falcon-h1, whose every layer has both.
	Layers string
	// AttnInterval is qwen3next's and qwen35's full_attention_interval: every
	// AttnInterval-th layer is gated attention, the others gated DeltaNet
	// (whose key heads are Groups and value heads Heads, each of State
	// elements). 0 leaves the key out.
	AttnInterval int
	// MTP is Qwen3.5's mtp_num_hidden_layers: multi-token-prediction
	// blocks the converter appends after Shape.Layers (block_count counts
	// them, nextn_predict_layers says how many), each a gated-attention
	// block with its FFN and the NextN projections. llama-server loads
	// none of their weights.
	MTP int
}

// Rope is rope scaling as written in the GGUF.
type Rope struct {
	Type        string // "linear" or "yarn"
	Factor      float32
	OrigCtx     int     // rope.scaling.original_context_length; 0 leaves it out
	YarnLogMul  float32 // rope.scaling.yarn_log_multiplier; 0 leaves it out
	YarnBetaFst float32 // rope.scaling.yarn_beta_fast; 0 leaves it out
	YarnBetaSlw float32 // rope.scaling.yarn_beta_slow; 0 leaves it out
}

// Names lists the built-in shape names, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(shapes))
}

// Lookup finds a built-in shape by name (case-insensitive). A Qwen3.5
// shape's name with "-mtp" after it is that shape as converters write it
// today, with its one multi-token-prediction block after the layers
// (mtp_num_hidden_layers 1 in every Qwen3.5 and 3.6 config).
func Lookup(name string) (Shape, bool) {
	name = strings.ToLower(name)
	if base, ok := strings.CutSuffix(name, mtpSuffix); ok {
		s, ok := shapes[base]
		if !ok || s.SSM == nil || (s.Arch != "qwen35" && s.Arch != "qwen35moe") {
			return Shape{}, false
		}
		ssm := *s.SSM
		ssm.MTP = 1
		s.SSM = &ssm
		s.Name += " with its MTP block"
		s.Source += "; with the one MTP block (mtp_num_hidden_layers 1) current conversions append"
		return s, true
	}
	if s, ok := shapes[name]; ok {
		return s, true
	}
	return firstLayers(name)
}

// firstLayers is a shape's name with "-<N>l" after it: the shape cut to
// its first N layers, a file llama-server loads in a few GiB where the
// whole model would not fit, for goldens of the largest models. Only
// shapes whose layers are all described by per-layer rules that survive
// the cut (no layer pattern strings, NextN blocks or shared KV) take it.
func firstLayers(name string) (Shape, bool) {
	cut := strings.LastIndex(name, "-")
	count, isLayers := strings.CutSuffix(name[cut+1:], "l")
	n, err := strconv.Atoi(count)
	if cut < 0 || !isLayers || err != nil {
		return Shape{}, false
	}
	s, found := shapes[name[:cut]]
	if !found || n <= 0 || n >= s.Layers || s.SSM != nil || s.Conv != nil || s.AltUp != nil ||
		s.PLE != nil || s.Global != nil || (s.MoE != nil && (s.MoE.NextN > 0 || n <= s.MoE.LeadingDense)) {
		return Shape{}, false
	}
	s.Name = fmt.Sprintf("%s (first %d of %d layers)", s.Name, n, s.Layers)
	s.Source += fmt.Sprintf("; cut to its first %d layers", n)
	s.Layers = n
	return s, true
}

// mtpSuffix names a Qwen3.5 shape with its MTP block (Lookup).
const mtpSuffix = "-mtp"

// Quant is a quantization recipe: which ggml type each tensor gets.
type Quant string

// The recipes synth knows. Each gives every tensor the type llama.cpp's
// quantizer gives it when it quantizes an F16 file without an importance
// matrix (recipe.go; checked against llama-quantize in docs/quantizer.md).
const (
	F16    Quant = "F16"
	Q8_0   Quant = "Q8_0"
	Q4_K_M Quant = "Q4_K_M"
	Q5_K_M Quant = "Q5_K_M"
	Q6_K   Quant = "Q6_K"
	// MXFP4_MOE is how gpt-oss ships: expert tensors in MXFP4, the other
	// matrices in Q8_0.
	MXFP4_MOE Quant = "MXFP4_MOE"
)

// fileType is general.file_type (enum llama_ftype) for each recipe.
var fileType = map[Quant]uint32{F16: 1, Q8_0: 7, Q4_K_M: 15, Q5_K_M: 17, Q6_K: 18, MXFP4_MOE: 38}

// ParseQuant accepts a recipe name, ignoring case.
func ParseQuant(s string) (Quant, error) {
	for q := range fileType {
		if strings.EqualFold(string(q), s) {
			return q, nil
		}
	}
	return "", fmt.Errorf("synth: unknown quantization %q (have F16, Q8_0, Q4_K_M, Q5_K_M, Q6_K, MXFP4_MOE)", s)
}
