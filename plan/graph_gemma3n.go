package plan

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
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

// gemma3nBuilder returns the graph builder for a Gemma 3n model whose
// tensors are those gemma3n.cpp reads, nil otherwise.
func gemma3nBuilder(m *arch.Model) graphBuilder {
	if m.Arch != "gemma3n" || m.NExpert > 0 || m.MLA || m.NHead <= 0 || m.Window <= 0 || !m.TiedOutput {
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
		blk := "blk." + strconv.Itoa(il) + "."
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

// gemma3nSliding is hparams.is_swa for layer il: the layer's own kind, or
// for a layer reading another's cache that layer's kind.
func gemma3nSliding(m *arch.Model, il int) bool {
	l := m.Layers[il]
	if l.KVShared {
		return m.Layers[l.KVLayer].Attention == arch.Sliding
	}
	return l.Attention == arch.Sliding
}

func gemma3nGraph(m *arch.Model, c Context, nTokens int, b *gb) *graph {
	b.init(m)
	b.g.kinds = true
	T, nOut := reserveTokens(c, nTokens)
	streams := int64(max(c.NStream, 1))
	embd := int64(m.NEmbd)
	heads := int64(m.NHead)
	vocab := int64(m.NVocab)
	nLayer := int64(len(m.Layers))
	const nAlt = gemma3nAltUp
	perLayer := int64(b.shapes["per_layer_token_embd.weight"][0]) / nLayer
	w := b.fileWeight
	mm := func(name, weight string, x *gtensor) *gtensor {
		wt := w(weight)
		out := x.layout.ne
		out[0] = wt.layout.ne[1]
		return as(kMulMat, b.f32(name, opOther, out, wt, x))
	}
	norm := func(x *gtensor, weight string) *gtensor { return b.swaNorm(false, x, weight) }
	scale := func(name string, x *gtensor) *gtensor { return b.f32(name, opInplace, x.layout.ne, x) }
	// ggml_view_2d_slice: slice i of the third dimension (a VIEW, which
	// the Vulkan reorder tells from a reshape).
	slice := func(name string, x *gtensor, i int64) *gtensor {
		return as(kView, b.view(name+"_"+strconv.FormatInt(i, 10), x, [4]int64{x.layout.ne[0], x.layout.ne[1]}))
	}
	// calc_magnitude: sqrt(sum_rows(x^2)).
	magnitude := func(x *gtensor) *gtensor {
		sq := b.f32("sqr", opInplace, x.layout.ne, x)
		rows := x.layout.ne
		rows[0] = 1
		return b.f32("sqrt", opInplace, rows, b.f32("sum_rows", opOther, rows, sq))
	}

	// build_inp_embd, scaled by sqrt(n_embd) for token input.
	tokens := b.input("inp_tokens", gguf.TypeI32, [4]int64{T})
	vecEmbd := b.input("inp_embd", gguf.TypeF32, [4]int64{embd, T})
	inpL := b.f32("embd", opOther, [4]int64{embd, T}, b.weight("token_embd.weight", [4]int64{embd, vocab}), tokens)
	inpL.gather = true
	b.g.expand(inpL)
	b.g.expand(vecEmbd)
	inpL = scale("inp_scaled", inpL)
	pos := b.input("inp_pos", gguf.TypeI32, [4]int64{T})
	full := b.swaCacheInputs(m, c, T, int64(c.NCtxSeq), false)
	swa := b.swaCacheInputs(m, c, T, swaCells(m, c), true)

	// build_inp_per_layer: its own token input and a lookup in the
	// per-layer table, {perLayer, n_layer, n_tokens}, scaled.
	tokens2 := b.input("inp_tokens_per_layer", gguf.TypeI32, [4]int64{T})
	pl := b.f32("inp_per_layer_rows", opOther, [4]int64{perLayer * nLayer, T}, w("per_layer_token_embd.weight"), tokens2)
	pl.gather = true
	pl3 := b.view("inp_per_layer_3d", pl, [4]int64{perLayer, nLayer, T})
	plSel := scale("inp_per_layer_selected", pl3)
	b.g.expand(plSel)

	// project_per_layer_inputs: recorded where layer 0 first reads it.
	proj := scale("per_layer_proj_scaled", mm("per_layer_proj_mm", "per_layer_model_proj.weight", inpL))
	proj3 := norm(b.view("per_layer_proj_3d", proj, [4]int64{perLayer, nLayer, T}), "per_layer_proj_norm.weight")
	plIn := scale("inp_per_layer_scaled", as(kAdd, b.f32("inp_per_layer_sum", opInplace, proj3.layout.ne, proj3, plSel)))
	plPerm := b.view("inp_per_layer_perm", plIn, [4]int64{perLayer, T, nLayer})
	perLayerIn := b.f32("inp_per_layer", opOther, [4]int64{perLayer, T, nLayer}, plPerm)

	// The other AltUp copies: the embedding projected, rescaled to its
	// magnitude, stacked behind it.
	{
		target := magnitude(inpL)
		rep := b.f32("inp_repeated", opOther, [4]int64{embd, T, nAlt - 1}, inpL)
		added := as(kMulMat, b.f32("altup_added", opOther, [4]int64{embd, T, nAlt - 1}, w("altup_proj.weight"), rep))
		newMag := magnitude(added)
		added = as(kMul, b.f32("altup_added_mul", opInplace, added.layout.ne, added, target))
		added = b.f32("altup_added_div", opInplace, added.layout.ne, added, newMag)
		inpL = b.f32("inp_stacked", opOther, [4]int64{embd, T, nAlt}, inpL, added)
	}

	for il, l := range m.Layers {
		blk := "blk." + strconv.Itoa(il) + "."
		headsKV := int64(l.HeadsKV)
		head := int64(l.KDim) / headsKV
		sliding := gemma3nSliding(m, il)
		kv := full
		if sliding {
			kv = swa
		}
		// altup_compute_router_modalities: {n_altup, n_tokens}.
		router := func(x *gtensor) *gtensor {
			r := scale("router_scaled", norm(x, blk+"altup_router_norm.weight"))
			return as(kUnary, b.f32("modalities", opInplace, [4]int64{nAlt, T}, mm("router", blk+"altup_router.weight", r)))
		}

		// altup_predict.
		cur := inpL
		mods := router(slice("altup_active", cur, 0))
		coefs := b.view("all_coefs_3d", mm("all_coefs", blk+"altup_predict_coef.weight", mods), [4]int64{nAlt, nAlt, T})
		curP := b.f32("cur_permuted", opOther, [4]int64{nAlt, embd, T}, b.view("cur_permuted_view", cur, [4]int64{nAlt, embd, T}))
		pred := as(kMulMat, b.f32("predictions_mm", opOther, [4]int64{embd, nAlt, T}, curP, coefs))
		pred = b.f32("predictions_cont", opOther, [4]int64{embd, T, nAlt}, b.view("predictions_perm", pred, [4]int64{embd, T, nAlt}))
		pred = as(kAdd, b.f32("predictions", opInplace, pred.layout.ne, pred, cur))
		active := slice("active_prediction", pred, 0)

		cur = norm(active, blk+"attn_norm.weight")
		// laurel
		lr := mm("laurel_r", blk+"laurel_r.weight", mm("laurel_l", blk+"laurel_l.weight", cur))
		laurel := as(kAdd, b.f32("laurel_out", opInplace, lr.layout.ne, norm(lr, blk+"laurel_post_norm.weight"), cur))

		// self-attention, on its own cache or an earlier layer's
		q := b.view("Qcur_3d", mm("Qcur", blk+"attn_q.weight", cur), [4]int64{head, heads, T})
		rope := func(x *gtensor) *gtensor { return as(kRope, b.f32("rope", opInplace, x.layout.ne, x, pos)) }
		q = rope(norm(q, blk+"attn_q_norm.weight"))
		var k, v *gtensor
		cacheLayer := il
		if l.KVShared {
			cacheLayer = l.KVLayer
		} else {
			k = b.view("Kcur_3d", mm("Kcur", blk+"attn_k.weight", cur), [4]int64{head, headsKV, T})
			v = b.view("Vcur_3d", mm("Vcur", blk+"attn_v.weight", cur), [4]int64{head, headsKV, T})
			k = rope(norm(k, blk+"attn_k_norm.weight"))
			v = as(kRMSNorm, b.f32("Vcur_normed", opInplace, v.layout.ne, v))
		}
		if kv.kRot != nil {
			q = b.swaRotate(q, kv.kRot, false)
			if k != nil {
				k = b.swaRotate(k, kv.kRot, false)
			}
		}
		if kv.vRot != nil && v != nil {
			v = b.swaRotate(v, kv.vRot, false)
		}
		b.g.expand(q)
		if k != nil {
			b.g.expand(k)
			b.g.expand(v)
		}
		att := b.kvAttention(cacheLayer, c, attnShape{heads, headsKV, head, head, kv.nKV, streams, T}, q, k, v, kv.kIdx, kv.vIdx, kv.mask, nil)
		if kv.vRot != nil {
			att = b.swaRotate(att, kv.vRot, false)
		}
		cur = norm(mm("attn_out", blk+"attn_output.weight", att), blk+"post_attention_norm.weight")
		cur = as(kAdd, b.f32("attn_gated", opInplace, cur.layout.ne, cur, active))
		attnLaurel := scale("attn_laurel", as(kAdd, b.f32("attn_laurel_sum", opInplace, cur.layout.ne, cur, laurel)))

		// feed-forward
		cur = norm(attnLaurel, blk+"ffn_norm.weight")
		up := mm("ffn_up", blk+"ffn_up.weight", cur)
		gate := mm("ffn_gate", blk+"ffn_gate.weight", cur)
		if il < gemma3nSparseLayers {
			gate = b.gaussianTopK(gate)
		}
		gate = as(kUnary, b.f32("ffn_gelu", opInplace, gate.layout.ne, gate))
		cur = mm("ffn_out", blk+"ffn_down.weight", as(kMul, b.f32("ffn_mul", opInplace, up.layout.ne, up, gate)))
		cur = norm(cur, blk+"post_ffw_norm.weight")
		gated := as(kAdd, b.f32("attn_ffw_laurel_gated", opInplace, cur.layout.ne, cur, attnLaurel))

		// altup_correct
		mods = router(gated)
		innov := b.f32("innovation", opInplace, gated.layout.ne, gated, slice("active_prediction_c", pred, 0))
		cc := scale("all_coefs_c_bias", mm("all_coefs_c", blk+"altup_correct_coef.weight", mods))
		cc = b.f32("all_coefs_c_cont", opOther, [4]int64{1, T, nAlt}, b.view("all_coefs_c_t", cc, [4]int64{T, nAlt}))
		rep := b.f32("innovation_rep", opOther, [4]int64{embd, T, nAlt}, innov)
		corr := as(kMul, b.f32("corrected_mul", opInplace, rep.layout.ne, rep, cc))
		corr = as(kAdd, b.f32("corrected", opInplace, corr.layout.ne, corr, pred))

		// the first prediction, gated by this layer's per-layer input
		fp := as(kMul, b.f32("first_prediction_scaled", opInplace, [4]int64{embd, T}, slice("first_prediction", corr, 0), w(blk+"altup_correct_scale.weight")))
		fp = as(kUnary, b.f32("first_prediction_gelu", opInplace, [4]int64{perLayer, T}, mm("first_prediction_gate", blk+"inp_gate.weight", fp)))
		fp = as(kMul, b.f32("first_prediction_mul", opInplace, fp.layout.ne, fp, slice("inp_this_layer", perLayerIn, int64(il))))
		fp = norm(mm("first_prediction_proj", blk+"proj.weight", fp), blk+"post_norm.weight")

		// corrected[1:] += first_prediction
		first := slice("slice_first", corr, 0)
		rest := b.view("slice_rest", corr, [4]int64{embd, T, nAlt - 1})
		rest.kind = kView
		tmp := as(kAdd, b.f32("corrected_rest", opInplace, rest.layout.ne, rest, fp))
		inpL = b.f32("l_out", opOther, [4]int64{embd, T, nAlt}, first, tmp)
	}

	// The copies merged back into one: the others projected out, rescaled
	// to the active one's magnitude, and averaged with it.
	target := magnitude(slice("altup_active", inpL, 0))
	alt := b.view("alt_slice", inpL, [4]int64{embd, T, nAlt - 1})
	alt.kind = kView
	un := as(kMulMat, b.f32("altup_unembd", opOther, [4]int64{embd, T, nAlt - 1}, w("altup_unembd_proj.weight"), alt))
	newMag := magnitude(un)
	un = as(kMul, b.f32("altup_unembd_mul", opInplace, un.layout.ne, un, target))
	un = b.f32("altup_unembd_div", opInplace, un.layout.ne, un, newMag)
	cur := slice("unembd_first", inpL, 0)
	for i := int64(0); i < nAlt-1; i++ {
		cur = as(kAdd, b.f32("unembd_add", opInplace, [4]int64{embd, T}, cur, slice("unembd_slice", un, i)))
	}
	cur = scale("unembd_merged", cur)
	outIDs := b.input("inp_out_ids", gguf.TypeI32, [4]int64{nOut})
	cur = b.f32("get_rows_out", opOther, [4]int64{embd, nOut}, cur, outIDs)
	cur = norm(cur, "output_norm.weight")
	cur.output = true // result_norm, res->t_embd
	logits := as(kMulMat, b.f32("result_output", opOther, [4]int64{vocab, nOut}, b.weight("output.weight", [4]int64{embd, vocab}), cur))
	// final logit soft-capping: scale, tanh, scale
	logits = scale("softcap_scale", logits)
	logits = as(kUnary, b.f32("softcap_tanh", opInplace, logits.layout.ne, logits))
	logits = scale("softcap_unscale", logits)
	logits.output = true
	b.g.expand(logits)
	return &b.g
}

// gaussianTopK is gemma3n's gaussian_topk: the activations less their
// mean plus 1.645 standard deviations (the 95th percentile), through a
// ReLU.
func (b *gb) gaussianTopK(x *gtensor) *gtensor {
	rows := x.layout.ne
	rows[0] = 1
	mean := b.f32("mean", opOther, rows, x)
	dev := b.f32("sub", opInplace, x.layout.ne, x, mean)
	sq := b.f32("sqr", opInplace, x.layout.ne, dev)
	std := b.f32("sqrt", opInplace, rows, b.f32("scale", opInplace, rows, b.f32("sum_rows", opOther, rows, sq)))
	cutoff := as(kAdd, b.f32("cutoff", opInplace, rows, mean, b.f32("scale", opInplace, rows, std)))
	return as(kUnary, b.f32("relu", opInplace, x.layout.ne, b.f32("sub", opInplace, x.layout.ne, x, cutoff)))
}
