package plan

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// moeNorm is build_norm with LLM_NORM_RMS and a weight: ggml_rms_norm and
// ggml_mul, both of which may run in place.
func (b *gb) moeNorm(x, weight *gtensor) *gtensor {
	n := b.f32("norm", opInplace, x.layout.ne, x)
	return b.f32("norm_w", opInplace, x.layout.ne, n, weight)
}

// moeDenseFFN is build_ffn with a SwiGLU of parallel gate and up
// projections: a shared expert (suffix "_shexp") or a dense layer.
func (b *gb) moeDenseFFN(blk, suffix string, cur *gtensor, T int64, w func(string) *gtensor) *gtensor {
	upW := w(blk + "ffn_up" + suffix + ".weight")
	ff := upW.layout.ne[1]
	embd := cur.layout.ne[0]
	up := b.f32("ffn_up"+suffix, opOther, [4]int64{ff, T}, upW, cur)
	gate := b.f32("ffn_gate"+suffix, opOther, [4]int64{ff, T}, w(blk+"ffn_gate"+suffix+".weight"), cur)
	act := b.f32("ffn_swiglu"+suffix, opOther, [4]int64{ff, T}, gate, up)
	return b.f32("ffn_down"+suffix, opOther, [4]int64{embd, T}, w(blk+"ffn_down"+suffix+".weight"), act)
}

// moeExperts is build_moe_ffn: it returns the sum of the selected
// experts' outputs, [n_embd, n_tokens], and records the nodes in
// llama.cpp's order (the weights first, then the experts, then the views
// of each expert's rows, then the adds).
func (b *gb) moeExperts(m *arch.Model, a moeArch, blk string, cur *gtensor, T int64, w func(string) *gtensor) *gtensor {
	nExp := int64(m.NExpert)
	nUsed := int64(m.NExpertUsed)
	embd := cur.layout.ne[0]
	logits := b.f32("ffn_moe_logits", opOther, [4]int64{nExp, T}, w(blk+"ffn_gate_inp.weight"), cur)
	if a.expertBiases {
		logits = b.f32("ffn_moe_logits_biased", opInplace, logits.layout.ne, logits, w(blk+"ffn_gate_inp.bias"))
	}
	// Softmax or sigmoid over all experts (both may run in place); with
	// SOFTMAX_WEIGHT the logits themselves are the probabilities.
	probs := logits
	if a.gating != moeSoftmaxWeight {
		probs = b.f32("ffn_moe_probs", opInplace, logits.layout.ne, logits)
	}
	// llama4 selects on the raw logits and weighs with their sigmoid.
	selFrom := probs
	if a.gating == moeSigmoid {
		selFrom = logits
	}
	// ggml_argsort_top_k: a full descending argsort and a view of its
	// first n_expert_used columns.
	argsort := b.tensor("ffn_moe_argsort", gguf.TypeI32, opOther, [4]int64{nExp, T}, selFrom)
	selected := b.view("ffn_moe_topk", argsort, [4]int64{nUsed, T})
	selected.layout.typ = gguf.TypeI32
	probs3 := b.view("ffn_moe_probs_3d", probs, [4]int64{1, nExp, T})
	weights := b.f32("ffn_moe_weights", opOther, [4]int64{1, nUsed, T}, probs3, selected)
	if a.gating == moeSoftmaxWeight {
		w2 := b.view("ffn_moe_weights_2d", weights, [4]int64{nUsed, T})
		sm := b.f32("ffn_moe_weights_softmax", opInplace, [4]int64{nUsed, T}, w2)
		weights = b.view("ffn_moe_weights_3d", sm, [4]int64{1, nUsed, T})
	}
	if a.normW {
		w2 := b.view("ffn_moe_weights_2d", weights, [4]int64{nUsed, T})
		sum := b.f32("ffn_moe_weights_sum", opOther, [4]int64{1, T}, w2)
		sum = b.f32("ffn_moe_weights_sum_clamped", opInplace, sum.layout.ne, sum)
		norm := b.f32("ffn_moe_weights_norm", opInplace, [4]int64{nUsed, T}, w2, sum)
		weights = b.view("ffn_moe_weights_3d", norm, [4]int64{1, nUsed, T})
	}
	// Expanded early so that the top-k fusion can see it.
	b.g.expand(weights)
	x := b.view("ffn_moe_in_3d", cur, [4]int64{embd, 1, T})
	if a.llama4 {
		// The weights multiply the input, repeated per selected expert.
		rep := b.f32("ffn_moe_repeat", opOther, [4]int64{embd, nUsed, T}, x)
		x = b.f32("ffn_moe_weighted_in", opInplace, rep.layout.ne, rep, weights)
	}
	mmid := func(name, wname string, in *gtensor) *gtensor {
		ww := w(blk + wname + ".weight")
		t := b.f32(name, opOther, [4]int64{ww.layout.ne[1], nUsed, T}, ww, in, selected)
		if a.expertBiases {
			// ggml_add_id: one bias row per selected expert. Its second
			// dimension is n_expert_used, under the 32 rows Vulkan's
			// offload_op asks of an op (ne[1]; only MUL_MAT_ID is judged
			// by ne[2]), so it runs where its bias lives instead of
			// being offloaded with a copy of it.
			t = b.f32(name+"_biased", opInplace, t.layout.ne, t, w(blk+wname+".bias"), selected)
			t.gather = true
		}
		return t
	}
	up := mmid("ffn_moe_up", "ffn_up_exps", x)
	gate := mmid("ffn_moe_gate", "ffn_gate_exps", x)
	act := b.f32("ffn_moe_swiglu", opOther, gate.layout.ne, gate, up)
	experts := mmid("ffn_moe_down", "ffn_down_exps", act)
	if !a.llama4 {
		experts = b.f32("ffn_moe_weighted", opInplace, experts.layout.ne, experts, weights)
	}
	b.g.expand(experts)
	views := make([]*gtensor, nUsed)
	for i := range views {
		views[i] = b.view("ffn_moe_expert_"+strconv.Itoa(i), experts, [4]int64{embd, T})
		b.g.expand(views[i])
	}
	out := views[0]
	for i := 1; i < len(views); i++ {
		out = b.f32("ffn_moe_add", opInplace, [4]int64{embd, T}, out, views[i])
		b.g.expand(out)
	}
	if nUsed == 1 {
		// A single expert's view is not contiguous: ggml_cont.
		out = b.f32("ffn_moe_cont", opOther, [4]int64{embd, T}, out)
	}
	return out
}
