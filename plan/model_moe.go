package plan

import (
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file describes the graphs llama.cpp builds for its mixture-of-experts
// transformers: qwen2moe (src/models/qwen2moe.cpp), qwen3moe
// (src/models/qwen3moe.cpp), gpt-oss (src/models/openai-moe-iswa.cpp) and
// llama4 with chunked attention (src/models/llama-iswa.cpp). Their attention
// is llm_graph_context::build_attn over a unified or an iswa (two-cache)
// KV cache; their FFN is llm_graph_context::build_moe_ffn: router logits,
// probabilities, top-k selection with argsort and a view, get_rows of the
// selected weights, ggml_mul_mat_id over the selected experts and a sum of
// per-expert views.

// moeArch is what differs between the four architectures' graphs.
type moeArch struct {
	spec moeSpec
	// iswa: two KV caches (sliding or chunked layers, and the others) with
	// their own inputs; build_attn then expands Q, K and V in that order.
	iswa bool
	// oai: gpt-oss's attention sinks, post_attention_norm as the FFN norm,
	// and the output rows selected after the last layer.
	oai bool
	// llama4: no RoPE (and temperature tuning) on every fourth layer, an
	// unweighted RMS norm of Q and K after RoPE, a shared expert.
	llama4 bool
	// sharedGate: qwen2moe's shared expert behind a one-row sigmoid gate.
	sharedGate bool
}

// moeFamily returns the graph builder for a mixture-of-experts model of
// the kind a describes, nil for a model it does not describe.
func moeFamily(a moeArch) func(m *arch.Model) graphBuilder {
	return func(m *arch.Model) graphBuilder {
		if !moeDescribe(m, a) {
			return nil
		}
		return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
			return moeGraph(m, a, c, nTokens, b)
		}
	}
}

// moeDescribe says which graph the model gets, and whether this file
// describes it: every layer must hold exactly the tensors the
// architecture's graph reads, so a variant with anything else (merged
// gate_up experts, scales, rope factors, dense layers where llama.cpp has
// none) keeps the rough estimate.
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
		blk := "blk." + strconv.Itoa(il) + "."
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
	names := []string{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"}
	if has("attn_q.bias") || a.spec.expertBiases {
		names = append(names, "attn_q.bias", "attn_k.bias", "attn_v.bias")
	}
	if a.oai {
		names = append(names, "post_attention_norm.weight")
	} else {
		names = append(names, "ffn_norm.weight")
	}
	experts := []string{"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"}
	shared := []string{"ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"}
	switch {
	case a.sharedGate: // qwen2moe
		names = append(names, experts...)
		names = append(names, shared...)
		names = append(names, "ffn_gate_inp_shexp.weight")
	case a.spec.expertBiases: // gpt-oss
		names = append(names, "attn_output.bias", "attn_sinks.weight")
		names = append(names, experts...)
		names = append(names, "ffn_gate_inp.bias", "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias")
	case a.llama4:
		if has("ffn_gate_inp.weight") {
			names = append(names, experts...)
			names = append(names, shared...)
		} else {
			names = append(names, "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight")
		}
	default: // qwen3moe
		names = append(names, "attn_q_norm.weight", "attn_k_norm.weight")
		if !has("attn_q_norm.weight") {
			return nil
		}
		names = append(names, experts...)
	}
	return names
}

// moeGraph describes the graph for one micro-batch of nTokens against a
// full cache, in the order ggml records it.
func moeGraph(m *arch.Model, a moeArch, c Context, nTokens int, b *gb) *ggml.Graph {
	b.G.KeepOrder()
	in := b.newBatch(m, c, nTokens)
	T, inpL, pos, outIDs := in.T, in.inpL, in.pos, in.outIDs
	var attnScale *tensor
	if a.llama4 {
		// Temperature tuning of the layers without RoPE
		// (build_inp_attn_scale): one factor per token.
		attnScale = b.Input("attn_scale", gguf.TypeF32, 1, 1, T)
	}
	full := b.kvCacheInputs(m, c, T, int64(c.NCtxSeq), "", fullLayers, true)
	swa := full
	if a.iswa {
		// llama4's chunked attention, sized like a sliding window
		full, swa = b.iswaInputs(m, c, T, swaCells(m, c))
	}
	for il, l := range m.Layers {
		blk := "blk." + strconv.Itoa(il) + "."
		inpSA := inpL
		kv := full
		if l.Attention == arch.Sliding {
			kv = swa
		}
		cur := b.moeAttention(m, a, c, il, b.norm(inpL, blk+"attn_norm.weight"), pos, attnScale, kv)
		if il == len(m.Layers)-1 && !a.oai {
			// Only the rows of the outputs go on (all of them in the
			// worst-case graph); gpt-oss selects them after the last layer.
			cur, inpSA = b.GetRows(cur, outIDs), b.GetRows(inpSA, outIDs)
		}
		ffnInp := b.Add(cur, inpSA)
		normName := blk + "ffn_norm.weight"
		if a.oai {
			normName = blk + "post_attention_norm.weight"
		}
		inpL = b.Add(b.moeLayerFFN(m, a, blk, b.norm(ffnInp, normName)), ffnInp)
	}
	if a.oai {
		// gpt-oss keeps every row to the end of the last layer, whose
		// output seeds a draft head (t_h_nextn): a graph output the
		// allocator never frees, whether or not a draft runs.
		inpL = b.GetRows(inpL.SetOutput(), outIDs)
	}
	return b.finish(b.output(m, inpL, b.norm))
}

// moeLayerFFN is a layer's FFN: the routed experts and the shared one,
// or a dense FFN (llama4's interleaved dense layers).
func (b *gb) moeLayerFFN(m *arch.Model, a moeArch, blk string, cur *tensor) *tensor {
	if !b.has(blk + "ffn_gate_inp.weight") {
		return b.ffn(blk, "", cur, ffnSwiGLU)
	}
	moe := b.moeFFN(m, blk, cur, a.spec)
	switch {
	case a.sharedGate:
		// qwen2moe: the shared expert scaled by sigmoid(x·g), computed as
		// silu(v)/v.
		sh := b.ffn(blk, "_shexp", cur, ffnSwiGLU)
		gin := b.MulMat(b.weight(blk+"ffn_gate_inp_shexp.weight"), cur)
		moe = b.Add(moe, b.Mul(sh, b.Div(b.Unary(gin), gin)))
	case a.llama4:
		moe = b.Add(moe, b.ffn(blk, "_shexp", cur, ffnSwiGLU))
	}
	return moe
}

// moeAttention is a layer's self-attention (build_attn with the KV cache,
// or its iswa variant) from the normed input to the output projection.
func (b *gb) moeAttention(m *arch.Model, a moeArch, c Context, il int, cur, pos, attnScale *tensor, kv *kvInputs) *tensor {
	blk := "blk." + strconv.Itoa(il) + "."
	s := layerShape(m, m.Layers[il], c, kv, cur.Ne()[1])
	s.heads = b.weight(blk + "attn_q.weight").Ne()[1] / s.headK
	q, k, v := b.qkv(blk, cur, s)
	if b.has(blk + "attn_q_norm.weight") {
		// qwen3moe: per-head RMS norms before RoPE
		q, k = b.norm(q, blk+"attn_q_norm.weight"), b.norm(k, blk+"attn_k_norm.weight")
	}
	// llama4 leaves RoPE out on every fourth layer (n_no_rope_layer_step)
	// and scales Q there instead.
	if !a.llama4 || (il+1)%4 != 0 {
		q, k = b.Rope(q, pos, nil), b.Rope(k, pos, nil)
		if a.llama4 {
			q, k = b.RMSNorm(q), b.RMSNorm(k) // Llama4TextL2Norm: no weight
		}
	} else if attnScale != nil {
		q = b.Mul(q, attnScale)
	}
	var o attnOpts
	if a.oai {
		o.sinks = b.weight(blk + "attn_sinks.weight")
	}
	return b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, o))
}
