package synth

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
)

// The recipes mirror src/llama-quant.cpp of the llama.cpp the conformance
// suite measures (v0.4.0, as node-llama-cpp 3.21.1 ships it) for the file types
// synth writes, quantizing an F16 file with no importance matrix and no
// overrides. docs/quantizer.md records the comparison with llama-quantize
// and TestRecipesMatchQuantizer pins it.

// pending is a tensor whose type is not chosen yet.
type pending struct {
	name  string
	f32   bool // written in F32 by the converter and never quantized
	shape []uint64
}

// baseType is llama_ftype_get_default_type: what a tensor gets when no
// rule says otherwise.
var baseType = map[Quant]gguf.GGMLType{
	Q8_0: gguf.TypeQ8_0, Q4_K_M: gguf.TypeQ4_K, Q5_K_M: gguf.TypeQ5_K,
	Q6_K: gguf.TypeQ6_K, MXFP4_MOE: gguf.TypeMXFP4,
}

// QuantRules are llama-quantize's rules of an older llama.cpp where they
// differ from those synth follows, for reading a file that build made.
type QuantRules struct {
	// OwnQKV: a fused attn_qkv typed by a rule of its own, in every layer
	// alike (Q3_K_M and Q3_K_L: Q4_K, Q4_K_M: Q5_K, Q5_K_M: Q6_K), as
	// llama_tensor_get_type did while it matched tensors by name (build
	// 4715 of February 2025 shows it); later builds count attn_qkv among
	// the attention-V tensors (tensor_category), Q6_K on use_more_bits
	// layers only.
	OwnQKV bool `json:"own_qkv,omitempty"`
}

// types returns the type of every tensor of ts, in order, under recipe q
// and the older rules r.
func (q Quant) types(s Shape, ts []pending, r QuantRules) []gguf.GGMLType {
	out := make([]gguf.GGMLType, len(ts))
	if q == F16 {
		for i, p := range ts {
			out[i] = gguf.TypeF16
			if p.f32 {
				out[i] = gguf.TypeF32
			}
		}
		return out
	}
	st := newQuantState(q, s, ts)
	st.rules = r
	// llama.cpp types the tensors in the loader's order (weight_name_comparer:
	// by block number, the blocks after the tensors outside them, then by
	// name), and the attention-V and FFN-down rules count tensors in that
	// order, so the file's own order will not do.
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(blockOf(ts[a].name), blockOf(ts[b].name)), strings.Compare(ts[a].name, ts[b].name))
	})
	for _, i := range order {
		p := ts[i]
		switch {
		case p.f32:
			out[i] = gguf.TypeF32
		case !quantizable(p):
			// The converter's F16 stays.
			out[i] = gguf.TypeF16
		default:
			out[i] = fallback(st.pick(p), p.shape[0])
		}
	}
	return out
}

// quantState is what quantize_state_impl knows of the whole model while it
// types one tensor.
type quantState struct {
	q     Quant
	base  gguf.GGMLType
	rules QuantRules
	// tied: no output.weight, so token_embd is the output too and is typed
	// as one (has_tied_embeddings).
	tied bool
	// experts is hparams.n_expert; 8 experts (Mixtral) get their own bumps.
	experts int
	// layers is n_layer_all, against which FFN-down positions are judged.
	layers int
	// is70B is model.type == LLM_TYPE_70B, set by the architecture's
	// load_arch_hparams from the layer count.
	is70B bool
	// attnV counts attention-V-like tensors (n_attention_wv); attnVSeen
	// and ffnDownSeen are the running i_attention_wv and i_ffn_down.
	attnV, attnVSeen, ffnDownSeen int
}

func newQuantState(q Quant, s Shape, ts []pending) *quantState {
	st := &quantState{q: q, base: baseType[q], tied: true, layers: s.Layers}
	if s.MoE != nil {
		st.experts = s.MoE.Experts
	}
	// src/models/llama.cpp and qwen2.cpp: 80 layers make a 70B (for llama
	// only with grouped KV heads and without 8 experts).
	switch s.Arch {
	case "llama":
		st.is70B = s.Layers == 80 && s.Heads != s.HeadsKV && st.experts != 8
	case "qwen2":
		st.is70B = s.Layers == 80
	}
	// init_quantize_state_counters counts by name alone, over every tensor.
	for _, p := range ts {
		switch c := category(p.name); {
		case c == catOutput:
			st.tied = false
		case c.attnVLike():
			st.attnV++
		}
	}
	return st
}

// pick is llama_tensor_get_type_impl for the file types synth knows.
func (st *quantState) pick(p pending) gguf.GGMLType {
	c := category(p.name)
	kMix := st.q == Q4_K_M || st.q == Q5_K_M
	switch {
	case c == catOutput || (st.tied && c == catTokenEmbd):
		// The output matrix gets Q6_K, or Q8_0 when its rows do not fit the
		// recipe's blocks; a Q8_0 file keeps Q8_0; MXFP4_MOE uses Q8_0.
		switch {
		case st.q == MXFP4_MOE, p.shape[0]%blockSize(st.base) != 0:
			return gguf.TypeQ8_0
		case st.base != gguf.TypeQ8_0:
			return gguf.TypeQ6_K
		}
		return st.base
	case st.q == MXFP4_MOE:
		// Expert tensors (3-D) in MXFP4, every other matrix in Q8_0.
		if len(p.shape) > 2 && p.shape[2] > 1 {
			return gguf.TypeMXFP4
		}
		return gguf.TypeQ8_0
	case c == catTokenEmbd:
		return st.base
	case c == catAttnQKV && st.rules.OwnQKV:
		// The old rule neither reads nor moves the attention-V count.
		switch st.q {
		case Q4_K_M:
			return gguf.TypeQ5_K
		case Q5_K_M:
			return gguf.TypeQ6_K
		}
		return st.base
	case c.attnVLike():
		// attn_v, attn_qkv and attn_kv_b: more bits on use_more_bits
		// positions among the attention-V tensors (not the layers: a
		// hybrid's attention layers are counted on their own).
		typ := st.base
		if kMix && useMoreBits(st.attnVSeen, st.attnV) {
			typ = gguf.TypeQ6_K
		}
		if st.is70B && typ == gguf.TypeQ4_K {
			typ = gguf.TypeQ5_K
		}
		if st.experts == 8 {
			typ = gguf.TypeQ8_0
		}
		st.attnVSeen++
		return typ
	case c == catAttnK:
		if st.experts == 8 {
			return gguf.TypeQ8_0
		}
	case c == catFFNDown:
		// With experts the layer is read from the name; without, it is the
		// count of FFN-down tensors so far, judged against all layers, so
		// a model without an FFN in every layer (Nemotron-H) gets its
		// bumps at other layers than its neighbours.
		layer := st.ffnDownSeen
		if st.experts > 1 {
			layer = blockOf(p.name)
		}
		st.ffnDownSeen++
		if kMix && useMoreBits(layer, st.layers) {
			return gguf.TypeQ6_K
		}
	case c == catAttnOutput:
		if st.experts == 8 && st.q == Q4_K_M {
			return gguf.TypeQ5_K
		}
	}
	return st.base
}

// useMoreBits is llama.cpp's use_more_bits: the first and last eighth, and
// every third position between.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// fallback is tensor_type_fallback: a type whose blocks do not divide the
// row length is replaced by a 32-block type of about the same size, and F16
// when even that does not fit.
func fallback(t gguf.GGMLType, cols uint64) gguf.GGMLType {
	if cols%blockSize(t) == 0 {
		return t
	}
	switch t {
	case gguf.TypeQ4_K:
		t = gguf.TypeQ5_0
	case gguf.TypeQ5_K:
		t = gguf.TypeQ5_1
	case gguf.TypeQ6_K:
		t = gguf.TypeQ8_0
	}
	if cols%blockSize(t) != 0 {
		return gguf.TypeF16
	}
	return t
}

func blockSize(t gguf.GGMLType) uint64 {
	info, ok := t.Info()
	if !ok {
		panic(fmt.Sprintf("synth: recipe type %v unknown to gguf", t))
	}
	return info.BlockSize
}

// quantizable is tensor_allows_quantization for the tensors synth writes:
// matrices whose names end in "weight", except norms, routers, and the
// small tensors llama.cpp keeps as converted (Mamba and LFM2 convolution
// kernels, Gemma 3n's AltUp, Laurel and per-layer projection).
func quantizable(p pending) bool {
	dims := 0
	for i, d := range p.shape {
		if d > 1 {
			dims = i + 1
		}
	}
	if dims < 2 || !strings.HasSuffix(p.name, "weight") {
		return false
	}
	for _, keep := range []string{"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel",
		"per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight"} {
		if strings.Contains(p.name, keep) {
			return false
		}
	}
	return true
}

// tensorCategory is llama.cpp's tensor_category, found from the name the
// same way (tensor_get_category): by substring, first match wins.
type tensorCategory int

const (
	catOther tensorCategory = iota
	catOutput
	catTokenEmbd
	catAttnQKV
	catAttnKVB
	catAttnV
	catAttnK
	catAttnQ
	catAttnOutput
	catFFNUp
	catFFNGate
	catFFNDown
)

// categoryNames is tensor_get_category's order of substring tests.
var categoryNames = []struct {
	sub string
	cat tensorCategory
}{
	{"attn_qkv.weight", catAttnQKV}, {"attn_kv_b.weight", catAttnKVB}, {"attn_v.weight", catAttnV},
	{"attn_k.weight", catAttnK}, {"attn_q.weight", catAttnQ}, {"attn_output.weight", catAttnOutput},
	{"ffn_up", catFFNUp}, {"ffn_gate", catFFNGate}, {"ffn_down", catFFNDown},
}

func category(name string) tensorCategory {
	switch name {
	case "output.weight":
		return catOutput
	case "token_embd.weight", "per_layer_token_embd.weight":
		return catTokenEmbd
	}
	for _, c := range categoryNames {
		if strings.Contains(name, c.sub) {
			return c.cat
		}
	}
	return catOther
}

// attnVLike is category_is_attn_v: the tensors the attention-V rule bumps.
// It catches attn_qkv before the Q4_K_M/Q5_K_M rule meant for the fused
// QKV (Q5_K/Q6_K) can, so that rule never fires.
func (c tensorCategory) attnVLike() bool {
	return c == catAttnV || c == catAttnQKV || c == catAttnKVB
}

// blockOf is the block number of a "blk.N." name, -1 for the others, as
// the loader's sscanf(name, "blk.%d.") leaves it.
func blockOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	n, digits := 0, 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		n = n*10 + int(rest[digits]-'0')
		digits++
	}
	if digits == 0 {
		return -1
	}
	return n
}
