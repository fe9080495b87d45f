package graph

import (
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
)

// This file holds what llama.cpp's mixture-of-experts transformers share
// (qwen2moe, qwen3moe, gpt-oss and llama4, each in a file of its own):
// the check that a model holds exactly the tensors its graph reads, and
// the frame of the graph. Their attention is build_attn over a unified or
// an iswa (two-cache) KV cache; their FFN is build_moe_ffn (moe_ffn.go).

// moeArch is the family of one such architecture: what its file gives the
// check and the frame.
type moeArch struct {
	// iswa: two KV caches (sliding or chunked layers, and the others) with
	// their own inputs; build_attn then expands Q, K and V in that order.
	iswa bool
	// biases: Q, K and V biases in every layer, whether or not the first
	// has them.
	biases bool
	// ffnNorm is the name of the norm before the FFN.
	ffnNorm string
	// tensors lists what the graph reads in a layer besides attention
	// (the norm, the projections and their biases), has saying what the
	// layer holds; nil if the layer has none of the FFN layouts.
	tensors func(has func(string) bool) []string
	graph   graphFunc
}

// moeExperts are the routed experts' tensors and then more.
func moeExperts(more ...string) []string {
	return append([]string{"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"}, more...)
}

// moeWithShared are the routed and the shared experts' tensors and then
// more.
func moeWithShared(more ...string) []string {
	return moeExperts(append([]string{"ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"}, more...)...)
}

func (a moeArch) graphOf(m *arch.Model) graphFunc {
	if !moeDescribe(m, a) {
		return nil
	}
	return a.graph
}

// moeDescribe says whether the model is one a describes: every layer
// must hold exactly the tensors the architecture's graph reads, so a
// variant with anything else (merged gate_up experts, scales, rope
// factors, dense layers where llama.cpp has none) keeps the rough
// estimate.
func moeDescribe(m *arch.Model, a moeArch) bool {
	if m.MLA || m.NExpert <= 0 || m.NExpertUsed <= 0 || m.NExpertUsed > m.NExpert || len(m.Layers) == 0 || m.NHead <= 0 {
		return false
	}
	// gpt-oss always uses the iswa cache; llama4 only with chunked
	// attention (an explicit sliding_window of 0 selects llm_build_llama).
	if a.iswa && m.Window <= 0 {
		return false
	}
	if !a.iswa && m.Window > 0 {
		return false
	}
	shape := map[string][]uint64{}
	for _, t := range m.Tensors {
		if !t.Unused {
			shape[t.Name] = t.Shape
		}
	}
	// Tensors per block, counted once: each layer must hold exactly the
	// tensors its graph reads.
	perBlock := make([]int, len(m.Layers))
	for n := range shape {
		rest, ok := strings.CutPrefix(n, "blk.")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		if il, err := strconv.Atoi(num); err == nil && il >= 0 && il < len(perBlock) && strconv.Itoa(il) == num {
			perBlock[il]++
		}
	}
	headK := 0
	for il, l := range m.Layers {
		if l.Recurrent || l.Attention == arch.NoAttention || l.HeadsKV <= 0 || l.VDim <= 0 ||
			l.KDim%l.HeadsKV != 0 || l.VDim%l.HeadsKV != 0 || l.KDim != l.VDim {
			return false
		}
		if l.Attention == arch.Sliding && !a.iswa {
			return false
		}
		if headK == 0 {
			headK = l.KDim / l.HeadsKV
		}
		if l.KDim/l.HeadsKV != headK {
			return false
		}
		blk := blkName(il)
		want := moeLayerTensors(a, blk, shape)
		if want == nil {
			return false
		}
		for _, n := range want {
			if _, ok := shape[blk+n]; !ok {
				return false
			}
		}
		if perBlock[il] != len(want) {
			return false
		}
		q := shape[blk+"attn_q.weight"]
		if len(q) != 2 || int(q[1])%headK != 0 {
			return false
		}
	}
	for n := range shape {
		switch {
		case strings.HasPrefix(n, "blk."):
		case n == "token_embd.weight", n == "output_norm.weight", n == "output.weight":
		default:
			return false
		}
	}
	if _, ok := shape["token_embd.weight"]; !ok {
		return false
	}
	if _, ok := shape["output_norm.weight"]; !ok {
		return false
	}
	return true
}

// moeLayerTensors lists the tensors the architecture's graph reads in one
// layer, or nil if the layer has none of its FFN layouts.
func moeLayerTensors(a moeArch, blk string, shape map[string][]uint64) []string {
	has := func(n string) bool { _, ok := shape[blk+n]; return ok }
	more := a.tensors(has)
	if more == nil {
		return nil
	}
	names := []string{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", a.ffnNorm}
	if has("attn_q.bias") || a.biases {
		names = append(names, "attn_q.bias", "attn_k.bias", "attn_v.bias")
	}
	return append(names, more...)
}

// moeLayers is the frame of a mixture-of-experts graph: for every layer
// the attention (from the normed input to the output projection), the
// last layer's output rows (unless rowsAfter: gpt-oss takes them after
// the last layer), the residual, and the FFN on its normed input.
func (b *gb) moeLayers(m *arch.Model, c Context, in batch, a moeArch, rowsAfter bool,
	attention func(il int, cur *tensor, kv *kvInputs) *tensor, ffn func(blk string, cur *tensor) *tensor) *tensor {
	full := b.kvCacheInputs(m, c, in.T, int64(c.NCtxSeq), "", fullLayers, true)
	swa := full
	if a.iswa {
		// llama4's chunked attention, sized like a sliding window
		full, swa = b.iswaInputs(m, c, in.T, swaCells(m, c))
	}
	inpL := in.inpL
	for il, l := range m.Layers {
		blk := blkName(il)
		kv := full
		if l.Attention == arch.Sliding {
			kv = swa
		}
		cur, resid := b.attentionOf(attention, il, blk, inpL, kv), inpL
		cur, resid = in.lastRows(b, il == len(m.Layers)-1 && !rowsAfter, cur, resid)
		ffnInp := b.Add(cur, resid)
		inpL = b.Add(ffn(blk, b.norm(ffnInp, blk+a.ffnNorm)), ffnInp)
	}
	return inpL
}

// ropedMoE is moeLayers with the attention of every architecture but
// llama4: RoPE on Q and K, and the per-head sinks where the model has
// them.
func (b *gb) ropedMoE(m *arch.Model, c Context, in batch, a moeArch, rowsAfter bool, ffn func(blk string, cur *tensor) *tensor) *tensor {
	rope := func(q, k *tensor) (*tensor, *tensor) { return b.Rope(q, in.pos, nil), b.Rope(k, in.pos, nil) }
	attention := func(il int, cur *tensor, kv *kvInputs) *tensor {
		var o attnOpts
		if sinks := blkName(il) + "attn_sinks.weight"; b.has(sinks) {
			o.sinks = b.weight(sinks)
		}
		return b.moeAttention(m, c, il, cur, kv, rope, o)
	}
	return b.moeLayers(m, c, in, a, rowsAfter, attention, ffn)
}

// attentionOf is attention on layer il's normed input.
func (b *gb) attentionOf(attention func(il int, cur *tensor, kv *kvInputs) *tensor, il int, blk string, inpL *tensor, kv *kvInputs) *tensor {
	return attention(il, b.norm(inpL, blk+"attn_norm.weight"), kv)
}

// moeAttention is a layer's self-attention from the normed input to the
// output projection: Q, K and V, their per-head norms where the model has
// them, qk (RoPE and whatever else the architecture does to Q and K) and
// build_attn.
func (b *gb) moeAttention(m *arch.Model, c Context, il int, cur *tensor, kv *kvInputs, qk func(q, k *tensor) (*tensor, *tensor), o attnOpts) *tensor {
	blk := blkName(il)
	s := layerShape(m, m.Layers[il], c, kv, cur.Ne()[1])
	s.heads = b.weight(blk + "attn_q.weight").Ne()[1] / s.headK
	q, k, v := b.qkv(blk, cur, s)
	if b.has(blk + "attn_q_norm.weight") {
		// per-head RMS norms before RoPE
		q, k = b.norm(q, blk+"attn_q_norm.weight"), b.norm(k, blk+"attn_k_norm.weight")
	}
	q, k = qk(q, k)
	return b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, o))
}
