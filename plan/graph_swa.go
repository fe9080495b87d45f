package plan

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// This file describes the graphs llama.cpp builds for gemma2, gemma3,
// cohere2 (src/models/gemma2-iswa.cpp, gemma3.cpp, cohere2-iswa.cpp) and
// phi3 (src/models/phi3.cpp), with llm_graph_context's helpers
// (src/llama-graph.cpp) and the KV cache's views and writes
// (src/llama-kv-cache.cpp). The first three interleave sliding-window and
// full attention layers over llama_kv_cache_iswa: two caches, each with
// its own index inputs and its own mask [n_kv, n_tokens] whose n_kv is
// that cache's size. phi3 turns its sliding window off (load_arch_hparams
// sets swa_type to NONE) and attends over one cache.

// swaBuilder returns the graph builder for gemma2, gemma3, cohere2 and phi3: sliding-window attention; nil for a model it does not describe.
func swaBuilder(m *arch.Model) graphBuilder {
	if m.NExpert > 0 || m.MLA || m.NHead <= 0 || len(m.Layers) == 0 {
		return nil
	}
	names := map[string]bool{}
	for _, t := range m.Tensors {
		names[t.Name] = true
	}
	sliding := 0
	for _, l := range m.Layers {
		if l.Recurrent || l.Attention == arch.NoAttention || l.HeadsKV <= 0 || l.FF <= 0 ||
			l.KDim%l.HeadsKV != 0 || l.VDim%l.HeadsKV != 0 {
			return nil
		}
		if l.Attention == arch.Sliding {
			sliding++
		}
	}
	switch m.Arch {
	case "gemma2", "gemma3", "cohere2":
		// Without sliding layers gemma3 and cohere2 build other graphs
		// (one cache; gemma3<false> even adds a final soft-cap).
		if sliding == 0 || !names["blk.0.attn_q.weight"] {
			return nil
		}
		if m.Arch == "gemma3" && !names["blk.0.attn_q_norm.weight"] {
			return nil
		}
	case "phi3":
		// The fused QKV layout only; separate projections and the MoE
		// branch are other graphs.
		if sliding > 0 || !names["blk.0.attn_qkv.weight"] || names["blk.0.ffn_gate_inp.weight"] {
			return nil
		}
	default:
		return nil
	}
	return swaGraph
}

// swaKV is one KV cache's graph inputs: the write indices, the mask, and
// the Hadamard rotations applied around a quantized cache.
type swaKV struct {
	nKV              int64
	kIdx, vIdx, mask *gtensor
	kRot, vRot       *gtensor
}

// swaRotSize is llama_kv_cache::build_input_k_rot's matrix size: the
// largest power of two from 64 up that divides the head size.
func swaRotSize(head int64) int64 {
	n := int64(64)
	for head%(n*2) == 0 {
		n *= 2
	}
	return n
}

// swaCacheInputs makes a cache's inputs. Quantized caches rotate K (and V)
// by a Hadamard matrix (attn_rot_k, attn_rot_v), when every layer of the
// cache has the same head size and it is a multiple of 64.
func (b *gb) swaCacheInputs(m *arch.Model, c Context, T, nKV int64, sliding bool) swaKV {
	streams := int64(c.NStream)
	maskType := gguf.TypeF32
	if c.Flash {
		maskType = gguf.TypeF16 // flash attention takes an F16 mask
	}
	suffix := ""
	if sliding {
		suffix = "_swa"
	}
	vIdxN := T
	if c.VTrans {
		// a transposed V is written element by element, each row as wide
		// as the widest layer's
		vIdxN = T * int64(maxVDim(m))
	}
	kv := swaKV{
		nKV:  nKV,
		kIdx: b.input("k_idxs"+suffix, gguf.TypeI64, [4]int64{T}),
		vIdx: b.input("v_idxs"+suffix, gguf.TypeI64, [4]int64{vIdxN}),
		mask: b.input("kq_mask"+suffix, maskType, [4]int64{nKV, T / streams, 1, streams}),
	}
	headK, headV := int64(-1), int64(-1)
	for _, l := range m.Layers {
		if (l.Attention == arch.Sliding) != sliding {
			continue
		}
		hk, hv := int64(l.KDim/l.HeadsKV), int64(l.VDim/l.HeadsKV)
		if headK == -1 {
			headK, headV = hk, hv
		}
		if hk != headK {
			headK = 0
		}
		if hv != headV {
			headV = 0
		}
	}
	quant := func(t gguf.GGMLType) bool { i, _ := t.Info(); return i.Quantized }
	if quant(c.TypeK) && headK > 0 && headK%64 == 0 {
		n := swaRotSize(headK)
		kv.kRot = b.input("k_rot"+suffix, gguf.TypeF32, [4]int64{n, n})
	}
	if quant(c.TypeV) && headV > 0 && headV%64 == 0 {
		kv.vRot = b.input("v_rot"+suffix, gguf.TypeF32, [4]int64{64, 64})
	}
	return kv
}

// swaCells is the sliding cache's size (as kvBuffers sizes it): the window
// of every sequence a stream holds plus one micro-batch, padded, at most
// the full cache; --swa-full makes it the full cache.
func swaCells(m *arch.Model, c Context) int64 {
	if c.SWAFull {
		return int64(c.NCtxSeq)
	}
	return int64(pad(min(c.NCtxSeq, m.Window*swaSeqs(c)+c.NUBatch), 256))
}

// swaTyped is a view with the element type of what it views (a cache
// slice), so a copy of it to another backend has the right size.
func (b *gb) swaTyped(name string, v *gtensor, t gguf.GGMLType, ne [4]int64, src ...*gtensor) *gtensor {
	x := b.view(name, v, ne, src...)
	x.layout.typ = t
	return x
}

// swaRotate is llama_mul_mat_hadamard: the tensor as rows of the rotation's
// size (a reshape, or a copy when it is strided), multiplied by the
// rotation, and reshaped back (contiguous).
func (b *gb) swaRotate(x, rot *gtensor, strided bool) *gtensor {
	n := rot.layout.ne[0]
	rows := elems(x.layout.ne) / n
	var r *gtensor
	if !strided {
		r = b.view("rot_in", x, [4]int64{n, rows})
	} else {
		r = b.f32("rot_cont", opOther, [4]int64{n, rows}, x)
	}
	y := as(kMulMat, b.f32("rot", opOther, [4]int64{n, rows}, rot, r))
	return b.view("rot_out", y, x.layout.ne)
}

// swaNorm is build_norm: RMS norm (in place) or, for cohere2, layer norm
// (GGML_OP_NORM, which the allocator never runs in place), then the
// weight.
func (b *gb) swaNorm(layerNorm bool, x *gtensor, weight string) *gtensor {
	op := opInplace
	if layerNorm {
		op = opOther
	}
	n := b.f32("norm", op, x.layout.ne, x)
	if !layerNorm {
		n.kind = kRMSNorm
	}
	return as(kMul, b.f32(weight, opInplace, x.layout.ne, n, b.weight(weight, [4]int64{x.layout.ne[0]})))
}

// swaGraph describes the graph of one micro-batch of nTokens against full
// caches, in the order ggml records it.
func swaGraph(m *arch.Model, c Context, nTokens int, b *gb) *graph {
	b.init(m)
	b.g.kinds = true
	// llama_context::graph_reserve rounds the token count up to a
	// multiple of the sequences (each gets as many tokens), but keeps the
	// outputs: the last layer's rows past the output selection are as
	// many as the micro-batch.
	T, nOut := reserveTokens(c, nTokens)
	streams := int64(c.NStream)
	embd := int64(m.NEmbd)
	heads := int64(m.NHead)
	vocab := int64(m.NVocab)
	gemma := m.Arch == "gemma2" || m.Arch == "gemma3"
	cohere := m.Arch == "cohere2"
	phi := m.Arch == "phi3"
	iswa := !phi

	// build_inp_embd: token ids and a ready-made embeddings input, of
	// which ggml_build_forward_select keeps the lookup; the vector input
	// is a leaf nothing consumes.
	tokens := b.input("inp_tokens", gguf.TypeI32, [4]int64{T})
	tokEmbd := b.weight("token_embd.weight", [4]int64{embd, vocab})
	vecEmbd := b.input("inp_embd", gguf.TypeF32, [4]int64{embd, T})
	inpL := b.f32("embd", opOther, [4]int64{embd, T}, tokEmbd, tokens)
	inpL.gather = true
	b.g.expand(inpL)
	b.g.expand(vecEmbd)
	if gemma {
		// inp_scaled: the embeddings times sqrt(n_embd) (gemma3 only for
		// token input, which the reserved batch is)
		inpL = b.f32("inp_scaled", opInplace, inpL.layout.ne, inpL)
	}
	pos := b.input("inp_pos", gguf.TypeI32, [4]int64{T})
	full := b.swaCacheInputs(m, c, T, int64(c.NCtxSeq), false)
	var swa swaKV
	if iswa {
		swa = b.swaCacheInputs(m, c, T, swaCells(m, c), true)
	}
	outIDs := b.input("inp_out_ids", gguf.TypeI32, [4]int64{nOut})
	maxV := int64(maxVDim(m))
	var ropeFactors *gtensor
	for _, n := range []string{"rope_factors_short.weight", "rope_factors_long.weight", "rope_freqs.weight"} {
		if b.has(n) && ropeFactors == nil {
			ropeFactors = b.weight(n, [4]int64{1})
		}
	}

	for il, l := range m.Layers {
		blk := "blk." + strconv.Itoa(il) + "."
		last := il == len(m.Layers)-1
		headsKV := int64(l.HeadsKV)
		headK := int64(l.KDim) / headsKV
		headV := int64(l.VDim) / headsKV
		sliding := l.Attention == arch.Sliding
		kv := full
		if sliding && iswa {
			kv = swa
		}
		nKV := kv.nKV
		w := func(name string, ne ...int64) *gtensor {
			var s [4]int64
			copy(s[:], ne)
			return b.weight(blk+name, s)
		}
		mm := func(name string, weight *gtensor, x *gtensor, rows int64) *gtensor {
			return as(kMulMat, b.f32(name, opOther, [4]int64{rows, x.layout.ne[1]}, weight, x))
		}

		resid := inpL
		cur := b.swaNorm(cohere, inpL, blk+"attn_norm.weight")
		ffnInp := cur // cohere2 runs the FFN on the same normed input

		// Q, K and V.
		var q, k, v *gtensor
		// vStrided: V is a strided view (phi3's fused projection), which
		// must be copied where ggml needs contiguous rows
		vStrided := false
		if phi {
			width := heads*headK + headsKV*(headK+headV)
			qkv := mm("wqkv", w("attn_qkv.weight", embd, width), cur, width)
			// ggml_view_3d into the fused result; RoPE makes Q and K
			// contiguous again, V stays strided
			q = b.view("Qcur_view", qkv, [4]int64{headK, heads, T})
			k = b.view("Kcur_view", qkv, [4]int64{headK, headsKV, T})
			v = b.view("Vcur_view", qkv, [4]int64{headV, headsKV, T})
			vStrided = true
		} else {
			q = mm("Qcur", w("attn_q.weight", embd, heads*headK), cur, heads*headK)
			if b.has(blk + "attn_q.bias") {
				q = as(kAdd, b.f32("Qcur_b", opInplace, q.layout.ne, q, w("attn_q.bias", heads*headK)))
			}
			k = mm("Kcur", w("attn_k.weight", embd, headsKV*headK), cur, headsKV*headK)
			if b.has(blk + "attn_k.bias") {
				k = as(kAdd, b.f32("Kcur_b", opInplace, k.layout.ne, k, w("attn_k.bias", headsKV*headK)))
			}
			v = mm("Vcur", w("attn_v.weight", embd, headsKV*headV), cur, headsKV*headV)
			if b.has(blk + "attn_v.bias") {
				v = as(kAdd, b.f32("Vcur_b", opInplace, v.layout.ne, v, w("attn_v.bias", headsKV*headV)))
			}
			q = b.view("Qcur_3d", q, [4]int64{headK, heads, T})
			k = b.view("Kcur_3d", k, [4]int64{headK, headsKV, T})
			v = b.view("Vcur_3d", v, [4]int64{headV, headsKV, T})
		}
		if m.Arch == "gemma3" {
			// per-head RMS norms of Q and K; on a reshaped projection, so
			// the norm cannot run in place
			q = b.swaNorm(false, q, blk+"attn_q_norm.weight")
		}
		rope := func(x *gtensor) *gtensor {
			src := []*gtensor{x, pos}
			if ropeFactors != nil {
				src = append(src, ropeFactors)
			}
			return as(kRope, b.f32("rope", opInplace, x.layout.ne, src...))
		}
		// cohere2's global layers take no positional encoding
		doRope := !cohere || sliding
		if doRope {
			q = rope(q)
		}
		if m.Arch == "gemma3" {
			k = b.swaNorm(false, k, blk+"attn_k_norm.weight")
		}
		if doRope {
			k = rope(k)
		}
		if !cohere {
			// f_attention_scale (gemma) or 1/sqrt(head) (phi3) on Q
			q = b.f32("Qcur_scaled", opInplace, q.layout.ne, q)
		}

		// build_attn: rotations for a quantized cache, then Q, K and V
		// recorded together; the iswa variant records them in this
		// order, the single-cache one records K last so its RoPE can be
		// fused with the cache write.
		if kv.kRot != nil {
			q = b.swaRotate(q, kv.kRot, false)
			k = b.swaRotate(k, kv.kRot, false)
		}
		if kv.vRot != nil {
			v = b.swaRotate(v, kv.vRot, vStrided)
			vStrided = false
		}
		b.g.expand(q)
		if iswa {
			b.g.expand(k)
			b.g.expand(v)
		} else {
			b.g.expand(v)
			b.g.expand(k)
		}

		// cpy_k and cpy_v: set_rows into the caches, which are viewed as
		// one buffer across streams.
		vWidth := headsKV * headV
		if c.VTrans {
			vWidth = maxV
		}
		cacheK := b.cache(il, "cache_k", [4]int64{headsKV * headK, nKV, streams})
		cacheK.layout.typ = c.TypeK
		cacheV := b.cache(il, "cache_v", [4]int64{vWidth, nKV, streams})
		cacheV.layout.typ = c.TypeV
		k2d := as(kView, b.view("k_2d", k, [4]int64{headsKV * headK, T}))
		dstK := cacheK
		if streams > 1 {
			dstK = b.swaTyped("k_merged", cacheK, c.TypeK, [4]int64{headsKV * headK, nKV * streams})
		}
		b.g.expand(b.setRows("k_set_rows", dstK, k2d, kv.kIdx))
		if !c.VTrans {
			v2d := b.view("v_2d", v, [4]int64{headsKV * headV, T})
			dstV := cacheV
			if streams > 1 {
				dstV = b.swaTyped("v_merged", cacheV, c.TypeV, [4]int64{vWidth, nKV * streams})
			}
			b.g.expand(b.setRows("v_set_rows", dstV, v2d, kv.vIdx))
		} else {
			var v2d *gtensor
			if !vStrided {
				v2d = b.view("v_2d", v, [4]int64{headsKV * headV, T})
			} else {
				v2d = b.f32("v_cont", opOther, [4]int64{headsKV * headV, T}, v)
			}
			if headsKV*headV < maxV {
				v2d = b.f32("v_pad", opOther, [4]int64{maxV, T}, v2d)
			}
			dstV := b.swaTyped("v_elems", cacheV, c.TypeV, [4]int64{1, maxV * nKV * streams})
			vElems := b.view("v_cur_elems", v2d, [4]int64{1, elems(v2d.layout.ne)})
			b.g.expand(b.setRows("v_set_rows", dstV, vElems, kv.vIdx))
		}

		// build_attn_mha
		kView := b.swaTyped("k_view", cacheK, c.TypeK, [4]int64{headK, headsKV, nKV, streams})
		var vView *gtensor
		if c.VTrans {
			vView = b.swaTyped("v_view", cacheV, c.TypeV, [4]int64{nKV, headsKV, headV, streams})
		} else {
			vView = b.swaTyped("v_view", cacheV, c.TypeV, [4]int64{headV, headsKV, nKV, streams})
		}
		q4 := b.view("q_streams", q, [4]int64{headK, heads, T / streams, streams})
		qp := b.view("q_perm", q4, [4]int64{headK, T / streams, heads, streams})
		kp := b.swaTyped("k_perm", kView, c.TypeK, [4]int64{headK, nKV, headsKV, streams})
		var vp *gtensor
		if c.VTrans {
			vp = b.swaTyped("v_perm", vView, c.TypeV, [4]int64{nKV, headV, headsKV, streams})
		} else {
			vp = b.swaTyped("v_perm", vView, c.TypeV, [4]int64{headV, nKV, headsKV, streams})
		}
		if c.Flash {
			// gemma2's logit soft-cap is a parameter of the fused op
			fa := b.f32("fattn", opOther, [4]int64{headV, heads, T / streams, streams}, qp, kp, vp, kv.mask)
			cur = b.view("fattn_2d", fa, [4]int64{headV * heads, T})
		} else {
			kq := as(kMulMat, b.f32("kq", opOther, [4]int64{nKV, T / streams, heads, streams}, kp, qp))
			if m.Arch == "gemma2" {
				// attention logit soft-capping: scale, tanh, scale
				kq = b.f32("kq_scaled_1", opInplace, kq.layout.ne, kq)
				kq = as(kUnary, b.f32("kq_tanh", opInplace, kq.layout.ne, kq))
				kq = b.f32("kq_scaled_2", opInplace, kq.layout.ne, kq)
			}
			kq = b.f32("kq_soft_max", opInplace, kq.layout.ne, kq, kv.mask)
			kqv := as(kMulMat, b.f32("kqv", opOther, [4]int64{headV, T / streams, heads, streams}, vp, kq))
			perm := b.view("kqv_perm", kqv, [4]int64{headV, heads, T / streams, streams})
			cur = b.f32("kqv_out", opOther, [4]int64{headV * heads, T}, perm)
		}
		b.g.expand(cur)
		if kv.vRot != nil {
			cur = b.swaRotate(cur, kv.vRot, false)
		}
		cur = mm("attn_out", w("attn_output.weight", heads*headV, embd), cur, embd)
		if b.has(blk + "attn_output.bias") {
			cur = as(kAdd, b.f32("attn_out_b", opInplace, cur.layout.ne, cur, w("attn_output.bias", embd)))
		}

		if last {
			// only the output rows go on from the last layer
			cur = b.f32("get_rows_cur", opOther, [4]int64{embd, nOut}, cur, outIDs)
			resid = b.f32("get_rows_inp", opOther, [4]int64{embd, nOut}, resid, outIDs)
			if cohere {
				ffnInp = b.f32("get_rows_ffn_inp", opOther, [4]int64{embd, nOut}, ffnInp, outIDs)
			}
		}

		ff := int64(l.FF)
		switch {
		case gemma:
			cur = b.swaNorm(false, cur, blk+"post_attention_norm.weight")
			sa := as(kAdd, b.f32("sa_out", opInplace, cur.layout.ne, cur, resid))
			cur = b.swaNorm(false, sa, blk+"ffn_norm.weight")
			up := mm("ffn_up", w("ffn_up.weight", embd, ff), cur, ff)
			gate := mm("ffn_gate", w("ffn_gate.weight", embd, ff), cur, ff)
			act := b.f32("ffn_geglu", opOther, gate.layout.ne, gate, up)
			cur = mm("ffn_out", w("ffn_down.weight", ff, embd), act, embd)
			cur = b.swaNorm(false, cur, blk+"post_ffw_norm.weight")
			cur = as(kAdd, b.f32("l_out", opInplace, cur.layout.ne, cur, sa))
		case cohere:
			attnOut := cur
			up := mm("ffn_up", w("ffn_up.weight", embd, ff), ffnInp, ff)
			gate := mm("ffn_gate", w("ffn_gate.weight", embd, ff), ffnInp, ff)
			act := b.f32("ffn_swiglu", opOther, gate.layout.ne, gate, up)
			cur = mm("ffn_out", w("ffn_down.weight", ff, embd), act, embd)
			cur = as(kAdd, b.f32("ffn_res", opInplace, cur.layout.ne, cur, resid))
			cur = as(kAdd, b.f32("l_out", opInplace, cur.layout.ne, cur, attnOut))
		case phi:
			cur = as(kAdd, b.f32("attn_res", opInplace, cur.layout.ne, cur, resid))
			resid = cur
			cur = b.swaNorm(false, cur, blk+"ffn_norm.weight")
			// one projection holds gate and up; swiglu splits it in two
			up := mm("ffn_up", w("ffn_up.weight", embd, 2*ff), cur, 2*ff)
			act := b.f32("ffn_swiglu", opOther, [4]int64{ff, up.layout.ne[1]}, up)
			cur = mm("ffn_out", w("ffn_down.weight", ff, embd), act, embd)
			cur = as(kAdd, b.f32("l_out", opInplace, cur.layout.ne, resid, cur))
		}
		inpL = cur
	}

	cur := b.swaNorm(cohere, inpL, "output_norm.weight")
	cur.output = true // result_norm, res->t_embd
	logits := as(kMulMat, b.f32("result_output", opOther, [4]int64{vocab, nOut}, b.weight("output.weight", [4]int64{embd, vocab}), cur))
	switch {
	case m.Arch == "gemma2":
		// final logit soft-capping
		logits = b.f32("softcap_scale", opInplace, logits.layout.ne, logits)
		logits = as(kUnary, b.f32("softcap_tanh", opInplace, logits.layout.ne, logits))
		logits = b.f32("softcap_unscale", opInplace, logits.layout.ne, logits)
	case cohere:
		// logit_scale (every Command-R model sets one; without it the
		// logits are the product itself, of the same size)
		logits = b.f32("logit_scale", opInplace, logits.layout.ne, logits)
	case phi && b.has("output.bias"):
		logits = as(kAdd, b.f32("result_output_b", opInplace, logits.layout.ne, logits, b.weight("output.bias", [4]int64{vocab})))
	}
	logits.output = true
	b.g.expand(logits)
	return &b.g
}
