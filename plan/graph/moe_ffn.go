package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// moeGating is how build_moe_ffn turns router logits into expert weights
// (llama_expert_gating_func_type).
type moeGating int

const (
	moeSoftmax       moeGating = iota // softmax over all experts
	moeSigmoid                        // sigmoid
	moeSoftmaxWeight                  // softmax over the selected logits only (gpt-oss)
)

// moeSpec is what sets one model's build_moe_ffn apart.
type moeSpec struct {
	gating moeGating
	// selectRaw: the selection is on the raw logits, the weights their
	// sigmoid (llama4).
	selectRaw bool
	normW     bool // weights divided by their sum (qwen3moe)
	// expertBiases: biases on the router and the experts, the latter
	// applied with ggml_add_id (gpt-oss).
	expertBiases bool
	weightIn     bool // the weights multiply the experts' input (llama4)
	// scale: the weights are multiplied by expert_weights_scale (a node
	// only where the scale is neither 0 nor 1).
	scale bool
	// groups > 1 keeps the experts of the best groupsUsed groups before
	// the top-k (DeepSeek V3's n_group and topk_group).
	groups, groupsUsed int64
	// logits, where set, are the router's logits computed by the model's
	// own graph (build_moe_ffn's probs_in: Gemma 4 routes on its own
	// norm of the residual).
	logits *tensor
}

// moeFFN is build_moe_ffn on cur for block blk's experts: router logits,
// probabilities, top-k selection with argsort and a view, get_rows of the
// selected weights, ggml_mul_mat_id over the selected experts and a sum of
// per-expert views. It records the nodes in llama.cpp's order (the
// weights first, then the experts, then the views, then the adds).
func (b *gb) moeFFN(m *arch.Model, blk string, cur *tensor, o moeSpec) *tensor {
	nUsed := int64(m.NExpertUsed)
	embd, T := cur.Ne()[0], cur.Ne()[1]
	logits := o.logits
	if logits == nil {
		logits = b.MulMat(b.weight(blk+"ffn_gate_inp.weight"), cur)
	}
	if o.expertBiases {
		logits = b.Add(logits, b.weight(blk+"ffn_gate_inp.bias"))
	}
	// With SOFTMAX_WEIGHT the logits themselves are the probabilities.
	probs := logits
	switch o.gating {
	case moeSoftmax:
		probs = b.SoftMax(logits, nil, nil)
	case moeSigmoid:
		probs = b.UnaryOf(ggml.UnarySigmoid, logits)
	}
	sel := probs
	if o.selectRaw {
		sel = logits
	}
	if bias := blk + "exp_probs_b.bias"; b.has(bias) {
		sel = b.Add(probs, b.weight(bias))
	}
	if o.groups > 1 && T > 0 {
		sel = b.expertGroups(sel, o.groups, o.groupsUsed, T)
	}
	// ggml_argsort_top_k: a full descending argsort and a view of its
	// first n_expert_used columns.
	selected := b.View(b.Argsort(sel), nUsed, T)
	weights := b.GetRows(b.Reshape(probs, 1, probs.Ne()[0], T), selected)
	weights = b.moeWeights(weights, o, nUsed, T)
	// Expanded early so that the top-k fusion can see it.
	b.Expand(weights)
	x := b.Reshape(cur, embd, 1, T)
	if o.weightIn {
		x = b.Mul(b.Repeat(x, embd, nUsed, T), weights)
	}
	mmid := func(name string, in *tensor) *tensor {
		t := b.MulMatID(b.weight(blk+name+".weight"), in, selected)
		if o.expertBiases {
			t = b.AddID(t, b.weight(blk+name+".bias"), selected)
		}
		return t
	}
	var gate, up *tensor
	if b.has(blk + "ffn_gate_up_exps.weight") {
		// One product of the merged gate and up, viewed in halves.
		gateUp := mmid("ffn_gate_up_exps", x)
		ff := gateUp.Ne()[0] / 2
		gate, up = b.View(gateUp, ff, nUsed, T), b.View(gateUp, ff, nUsed, T)
	} else {
		up = mmid("ffn_up_exps", x)
		gate = mmid("ffn_gate_exps", x)
	}
	experts := mmid("ffn_down_exps", b.GLU(gate, up))
	if s := blk + "ffn_down_exps.scale"; b.has(s) {
		// build_lora_mm_id's per-expert scale: the scales repeated for
		// every token and gathered for the selected experts.
		nExp := int64(m.NExpert)
		sc := b.Repeat(b.Reshape(b.weight(s), 1, nExp, 1), 1, nExp, T)
		experts = b.Mul(experts, b.GetRows(sc, selected))
	}
	if !o.weightIn {
		experts = b.Mul(experts, weights)
	}
	b.Expand(experts)
	views := make([]*tensor, nUsed)
	for i := range views {
		views[i] = b.View(experts, embd, T)
		b.Expand(views[i])
	}
	out := views[0]
	for _, v := range views[1:] {
		out = b.Add(out, v)
		b.Expand(out)
	}
	if nUsed == 1 {
		out = b.Cont(out) // a single expert's view is not contiguous
	}
	return out
}

// moeWeights are the selected experts' weights after the gating's
// softmax over them or their normalization.
func (b *gb) moeWeights(w *tensor, o moeSpec, nUsed, T int64) *tensor {
	if o.gating == moeSoftmaxWeight {
		w = b.Reshape(b.SoftMax(b.Reshape(w, nUsed, T), nil, nil), 1, nUsed, T)
	}
	if o.normW {
		w2 := b.Reshape(w, nUsed, T)
		w = b.Reshape(b.Div(w2, b.Clamp(b.SumRows(w2))), 1, nUsed, T)
	}
	if o.scale {
		w = b.Scale(w)
	}
	return w
}

// expertGroups is build_moe_ffn's group selection: each group scored by
// its two best experts, the best groupsUsed groups kept, the others'
// experts masked with -inf (a filled copy the kept rows are set into).
func (b *gb) expertGroups(sel *tensor, groups, groupsUsed, T int64) *tensor {
	nExp := sel.Ne()[0]
	perGroup := nExp / groups
	selGroups := b.Reshape(sel, perGroup, groups, T)
	top2 := b.View(b.Argsort(selGroups), 2, groups, T)
	scores := b.GetRows(b.Reshape(selGroups, 1, perGroup, groups, T), top2)
	scores = b.SumRows(b.Reshape(scores, 2, groups, T))
	scores = b.Reshape(scores, groups, T)
	kept := b.View(b.Argsort(scores), groupsUsed, T)
	rows := b.GetRows(selGroups, kept)
	masked := b.SetRows(b.Fill(selGroups), rows, kept)
	return b.Reshape(masked, nExp, T)
}
