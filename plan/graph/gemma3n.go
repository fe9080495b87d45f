package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file describes the graph llama.cpp builds for Gemma 3n
// (src/models/gemma3n.cpp): the hidden state travels as n_altup copies
// (AltUp) that each layer predicts from and corrects, the active copy runs
// attention with a Laurel low-rank residual beside it and a GeGLU FFN
// (with Gaussian top-k activation sparsity on the first layers), and a
// per-layer input, projected once from the token embedding and a second
// per-layer embedding table, gates the correction. The last layers attend
// over earlier layers' caches and write none.

// gemma3n's sizes llama.cpp hard-codes (llama-hparams.h, gemma3n.cpp).
const (
	gemma3nAltUp        = 4  // n_altup
	gemma3nSparseLayers = 10 // n_layer_sparsity
)

// gemma3n is Gemma 3n's family: it describes a model whose tensors are
// those gemma3n.cpp reads.
type gemma3n struct{}

func (gemma3n) graphOf(m *arch.Model) graphFunc {
	if m.NExpert > 0 || m.MLA || m.NHead <= 0 || m.Window <= 0 || !m.TiedOutput {
		return nil
	}
	shapes := tensorShapes(m)
	pl := shapes["per_layer_token_embd.weight"]
	if len(pl) != 2 || pl[0]%uint64(len(m.Layers)) != 0 {
		return nil
	}
	for _, n := range []string{"altup_proj.weight", "altup_unembd_proj.weight", "per_layer_model_proj.weight", "per_layer_proj_norm.weight"} {
		if _, ok := shapes[n]; !ok {
			return nil
		}
	}
	for il, l := range m.Layers {
		if l.Recurrent || l.HeadsKV <= 0 || l.FF <= 0 || l.KDim != l.VDim || l.KDim%l.HeadsKV != 0 {
			return nil
		}
		if l.Attention == arch.NoAttention && (!l.KVShared || l.KVLayer < 0 || l.KVLayer >= il) {
			return nil
		}
		blk := blkName(il)
		for _, n := range []string{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
			"attn_q_norm.weight", "attn_k_norm.weight", "post_attention_norm.weight", "ffn_norm.weight", "ffn_up.weight",
			"ffn_gate.weight", "ffn_down.weight", "post_ffw_norm.weight", "inp_gate.weight", "proj.weight", "post_norm.weight",
			"altup_correct_coef.weight", "altup_correct_scale.weight", "altup_predict_coef.weight", "altup_router.weight",
			"altup_router_norm.weight", "laurel_l.weight", "laurel_r.weight", "laurel_post_norm.weight"} {
			if _, ok := shapes[blk+n]; !ok {
				return nil
			}
		}
		for _, n := range []string{"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias"} {
			if _, ok := shapes[blk+n]; ok {
				return nil
			}
		}
	}
	return gemma3nGraph
}

// kvSliding is hparams.is_swa for layer il: the layer's own kind, or
// for a layer reading another's cache (Gemma 3n, Gemma 4 E2B and E4B)
// that layer's kind.
func kvSliding(m *arch.Model, il int) bool {
	l := m.Layers[il]
	if l.KVShared {
		return m.Layers[l.KVLayer].Attention == arch.Sliding
	}
	return l.Attention == arch.Sliding
}

func gemma3nGraph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	T, pos := in.T, in.pos
	// build_inp_embd, scaled by sqrt(n_embd) for token input.
	inpL := b.Scale(in.inpL)
	full, swa := b.iswaInputs(m, c, T, swaCells(m, c))
	perLayerIn := b.perLayerInputs(m, inpL, T)

	// The other AltUp copies: the embedding projected, rescaled to its
	// magnitude, stacked behind it.
	added := b.MulMat(b.weight("altup_proj.weight"), b.Repeat(inpL, int64(m.NEmbd), T, gemma3nAltUp-1))
	inpL = b.Concat(inpL, b.rescaled(added, b.magnitude(inpL)), 2)

	for il, l := range m.Layers {
		kv := full
		if kvSliding(m, il) {
			kv = swa
		}
		inpL = b.gemma3nLayer(m, c, il, l, kv, pos, inpL, perLayerIn)
	}

	// The copies merged back into one: the others projected out, rescaled
	// to the active one's magnitude, and averaged with it.
	target := b.magnitude(b.altSlice(inpL, 0))
	alt := b.View(inpL, int64(m.NEmbd), T, gemma3nAltUp-1)
	un := b.rescaled(b.MulMat(b.weight("altup_unembd_proj.weight"), alt), target)
	cur := b.altSlice(inpL, 0)
	for i := int64(0); i < gemma3nAltUp-1; i++ {
		cur = b.Add(cur, b.altSlice(un, i))
	}
	cur = b.GetRows(b.Scale(cur), in.outIDs)
	logits := b.output(m, cur, b.norm)
	// final logit soft-capping: scale, tanh, scale
	return b.finish(b.Scale(b.Unary(b.Scale(logits))))
}

// perLayerInputs is Gemma 3n's and Gemma 4 E2B's and E4B's
// build_inp_per_layer and project_per_layer_inputs: the per-layer table's
// rows for the batch's tokens (an input of its own), scaled and expanded
// first, plus the embedding inpL projected to every layer's inputs and
// normed, scaled; {perLayer, n_tokens, n_layer}.
func (b *gb) perLayerInputs(m *arch.Model, inpL *tensor, T int64) *tensor {
	nLayer := int64(len(m.Layers))
	perLayer := int64(b.shapes["per_layer_token_embd.weight"][0]) / nLayer
	pl := b.GetRows(b.weight("per_layer_token_embd.weight"), b.Input("inp_tokens_per_layer", gguf.TypeI32, T))
	plSel := b.Scale(b.Reshape(pl, perLayer, nLayer, T))
	b.Expand(plSel)
	proj := b.Scale(b.MulMat(b.weight("per_layer_model_proj.weight"), inpL))
	proj3 := b.norm(b.Reshape(proj, perLayer, nLayer, T), "per_layer_proj_norm.weight")
	return b.Cont(b.Permute(b.Scale(b.Add(proj3, plSel)), 0, 2, 1, 3))
}

// altSlice is ggml_view_2d_slice: a slice of x's third dimension (a
// VIEW, which the Vulkan reorder tells from a reshape). The callers name
// the slice; where it starts moves no memory, so the view is its shape.
func (b *gb) altSlice(x *tensor, _ int64) *tensor {
	return b.View(x, x.Ne()[0], x.Ne()[1])
}

// magnitude is calc_magnitude: sqrt(sum_rows(x^2)).
func (b *gb) magnitude(x *tensor) *tensor {
	return b.Sqrt(b.SumRows(b.Sqr(x)))
}

// rescaled is x times target over x's own magnitude.
func (b *gb) rescaled(x, target *tensor) *tensor {
	mag := b.magnitude(x)
	return b.Div(b.Mul(x, target), mag)
}

// gemma3nLayer is one layer: AltUp's prediction, attention with the
// Laurel residual beside it, the FFN, and AltUp's correction gated by the
// layer's per-layer input.
func (b *gb) gemma3nLayer(m *arch.Model, c Context, il int, l arch.Layer, kv *kvInputs, pos, inpL, perLayerIn *tensor) *tensor {
	blk := blkName(il)
	s := layerShape(m, l, c, kv, inpL.Ne()[1])
	mm := func(weight string, x *tensor) *tensor { return b.MulMat(b.weight(blk+weight+".weight"), x) }
	// altup_compute_router_modalities: {n_altup, n_tokens}.
	router := func(x *tensor) *tensor {
		return b.Unary(mm("altup_router", b.Scale(b.norm(x, blk+"altup_router_norm.weight"))))
	}

	// altup_predict.
	coefs := b.Reshape(mm("altup_predict_coef", router(b.altSlice(inpL, 0))), gemma3nAltUp, gemma3nAltUp, s.T)
	pred := b.MulMat(b.Cont(b.Permute(inpL, 1, 2, 0, 3)), coefs)
	pred = b.Add(b.Cont(b.Permute(pred, 0, 2, 1, 3)), inpL)
	active := b.altSlice(pred, 0)

	cur := b.norm(active, blk+"attn_norm.weight")
	lr := mm("laurel_r", mm("laurel_l", cur))
	laurel := b.Add(b.norm(lr, blk+"laurel_post_norm.weight"), cur)

	// self-attention, on its own cache or an earlier layer's
	q := b.Rope(b.norm(b.Reshape(mm("attn_q", cur), s.headK, s.heads, s.T), blk+"attn_q_norm.weight"), pos, nil)
	var k, v *tensor
	cacheLayer := il
	if l.KVShared {
		cacheLayer = l.KVLayer
	} else {
		k = b.Reshape(mm("attn_k", cur), s.headK, s.headsKV, s.T)
		v = b.Reshape(mm("attn_v", cur), s.headV, s.headsKV, s.T)
		k = b.Rope(b.norm(k, blk+"attn_k_norm.weight"), pos, nil)
		v = b.RMSNorm(v)
	}
	att := b.attn(cacheLayer, c, kv, s, q, k, v, attnOpts{})
	cur = b.Add(b.norm(mm("attn_output", att), blk+"post_attention_norm.weight"), active)
	attnLaurel := b.Scale(b.Add(cur, laurel))

	// feed-forward: GeLU of the gate (on the first layers after Gaussian
	// top-k sparsity) times up
	cur = b.norm(attnLaurel, blk+"ffn_norm.weight")
	up, gate := mm("ffn_up", cur), mm("ffn_gate", cur)
	if il < gemma3nSparseLayers {
		gate = b.gaussianTopK(gate)
	}
	cur = mm("ffn_down", b.Mul(up, b.UnaryOf(ggml.UnaryGELU, gate)))
	gated := b.Add(b.norm(cur, blk+"post_ffw_norm.weight"), attnLaurel)

	// altup_correct
	innov := b.Sub(gated, b.altSlice(pred, 0))
	cc := b.Scale(mm("altup_correct_coef", router(gated)))
	cc = b.Cont(b.Transpose(cc), 1, s.T, gemma3nAltUp)
	corr := b.Add(b.Mul(b.Repeat(innov, int64(m.NEmbd), s.T, gemma3nAltUp), cc), pred)

	// the first prediction, gated by this layer's per-layer input
	fp := b.Mul(b.altSlice(corr, 0), b.weight(blk+"altup_correct_scale.weight"))
	fp = b.Mul(b.UnaryOf(ggml.UnaryGELU, mm("inp_gate", fp)), b.altSlice(perLayerIn, int64(il)))
	fp = b.norm(mm("proj", fp), blk+"post_norm.weight")

	// corrected[1:] += first_prediction
	rest := b.View(corr, int64(m.NEmbd), s.T, gemma3nAltUp-1)
	return b.Concat(b.altSlice(corr, 0), b.Add(rest, fp), 2)
}

// gaussianTopK is gemma3n's gaussian_topk: the activations less their
// mean plus 1.645 standard deviations (the 95th percentile), through a
// ReLU.
func (b *gb) gaussianTopK(x *tensor) *tensor {
	mean := b.Mean(x)
	std := b.Sqrt(b.Scale(b.SumRows(b.Sqr(b.Sub(x, mean)))))
	return b.Unary(b.Sub(x, b.Add(mean, b.Scale(std))))
}
