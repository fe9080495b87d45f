package plan

import (
	"github.com/headroom-llm/headroom/arch"
)

// mlaDims are deepseek2's attention sizes, read from its tensors.
type mlaDims struct {
	heads, nope, rope, kvLora, vHead, qLora int64
	layers                                  int
	ffn                                     []mlaFFN
}

// mlaDeepseek2Dims checks that the model is the absorbed-MLA deepseek2
// this file describes: split attn_k_b/attn_v_b (the latent cache, one KV
// head of kv_lora_rank + rope), no expert selection bias (DeepSeek V3's
// exp_probs_b comes with expert groups, whose count the model
// description does not carry), full attention in every layer.
func mlaDeepseek2Dims(m *arch.Model, s mlaShapes) (mlaDims, bool) {
	d := mlaDims{heads: int64(m.NHead), layers: mlaGraphLayers(m)}
	if !m.MLA || d.layers == 0 || d.heads <= 0 {
		return d, false
	}
	embd := int64(m.NEmbd)
	for il := 0; il < d.layers; il++ {
		p := mlaBlk(il)
		kvLora := s.dim(p+"attn_kv_a_norm.weight", 0)
		mqa := s.dim(p+"attn_kv_a_mqa.weight", 1)
		nope := s.dim(p+"attn_k_b.weight", 0)
		vHead := s.dim(p+"attn_v_b.weight", 1)
		if kvLora == 0 || mqa <= kvLora || nope == 0 || vHead == 0 ||
			s.dim(p+"attn_k_b.weight", 1) != kvLora || s.dim(p+"attn_k_b.weight", 2) != d.heads ||
			s.dim(p+"attn_v_b.weight", 0) != kvLora || s.dim(p+"attn_v_b.weight", 2) != d.heads ||
			s.dim(p+"attn_kv_a_mqa.weight", 0) != embd {
			return d, false
		}
		rope := mqa - kvLora
		qLora := s.dim(p+"attn_q_a.weight", 1)
		qOut := s.dim(p+"attn_q.weight", 1)
		if qLora > 0 {
			qOut = s.dim(p+"attn_q_b.weight", 1)
		}
		if qOut != d.heads*(nope+rope) || s.dim(p+"attn_output.weight", 0) != d.heads*vHead {
			return d, false
		}
		if il == 0 {
			d.kvLora, d.rope, d.nope, d.vHead, d.qLora = kvLora, rope, nope, vHead, qLora
		} else if kvLora != d.kvLora || rope != d.rope || nope != d.nope || vHead != d.vHead || qLora != d.qLora {
			return d, false
		}
		l := m.Layers[il]
		if l.Attention != arch.Full || l.Recurrent || l.HeadsKV != 1 || int64(l.KDim) != kvLora+rope || l.VDim != 0 {
			return d, false
		}
		f, ok := mlaFFNOf(m, s, il)
		if !ok || f.probsBias {
			return d, false
		}
		d.ffn = append(d.ffn, f)
	}
	return d, true
}

// mlaDeepseek2Graph is src/models/deepseek2.cpp with is_mla: Q (directly
// or through the q LoRA) split into a no-rope and a rope part; the
// compressed KV and the shared rope key from attn_kv_a_mqa; the no-rope
// query absorbed into the latent space by attn_k_b; Q and K concatenated
// with their rope parts; attention against the latent cache as one KV
// head (build_attn with a K-only cache, V a view of K), decompressed by
// attn_v_b.
func mlaDeepseek2Graph(m *arch.Model, d mlaDims, c Context, nTokens int, b *gb) *graph {
	b.init(m)
	T, nOut := reserveTokens(c, nTokens)
	nKV := int64(c.NCtxSeq)
	streams := int64(c.NStream)
	embd := int64(m.NEmbd)
	H := d.heads
	kDim := d.kvLora + d.rope
	inpL, in := b.mlaPrelude(m, c, T, nOut, false)
	for il := 0; il < d.layers; il++ {
		p := mlaBlk(il)
		inpSA := inpL
		cur := b.mlaNorm(inpL, p+"attn_norm.weight")
		var q *gtensor
		if d.qLora > 0 {
			q = b.mlaMatMul("q_a", p+"attn_q_a.weight", embd, d.qLora, cur)
			q = b.mlaNorm(q, p+"attn_q_a_norm.weight")
			q = b.mlaMatMul("q", p+"attn_q_b.weight", d.qLora, H*(d.nope+d.rope), q)
		} else {
			q = b.mlaMatMul("q", p+"attn_q.weight", embd, H*(d.nope+d.rope), cur)
		}
		qNope := b.mlaView("q_nope", q, [4]int64{d.nope, H, T})
		qPE := b.mlaView("q_pe", q, [4]int64{d.rope, H, T})
		kvPE := b.mlaMatMul("kv_cmpr_pe", p+"attn_kv_a_mqa.weight", embd, kDim, cur)
		kvC := b.mlaView("kv_cmpr", kvPE, [4]int64{d.kvLora, T})
		kPE := b.mlaView("k_pe", kvPE, [4]int64{d.rope, 1, T})
		// RoPE may run in place, but its inputs are views, which the
		// allocator never reuses: both get new tensors.
		qPE = b.f32("q_pe_rope", opInplace, qPE.layout.ne, qPE, in.pos)
		kPE = b.f32("k_pe_rope", opInplace, kPE.layout.ne, kPE, in.pos)
		kvC = b.mlaNorm(kvC, p+"attn_kv_a_norm.weight")
		qNopeP := b.mlaView("q_nope_perm", qNope, [4]int64{d.nope, T, H})
		qAbs := b.f32("q_nope_absorbed", opOther, [4]int64{d.kvLora, T, H}, b.weight(p+"attn_k_b.weight", [4]int64{d.nope, d.kvLora, H}), qNopeP)
		qAbsP := b.mlaView("q_nope_absorbed_perm", qAbs, [4]int64{d.kvLora, H, T})
		qCur := b.f32("Qcur", opOther, [4]int64{kDim, H, T}, qAbsP, qPE)
		vCur := b.mlaView("kv_cmpr_reshape", kvC, [4]int64{d.kvLora, 1, T})
		kCur := b.f32("Kcur", opOther, [4]int64{kDim, 1, T}, vCur, kPE)
		// build_attn expands Q, V and then K (so RoPE and the cache write
		// may fuse), then the write of K into the latent cache.
		b.g.expand(qCur)
		b.g.expand(vCur)
		b.g.expand(kCur)
		cache := b.mlaCache(il, "cache_k", c.TypeK, [4]int64{kDim, nKV, streams})
		k2d := b.mlaView("k_cur_2d", kCur, [4]int64{kDim, T})
		b.g.expand(b.setRows("k_set_rows", b.mlaCacheRows(cache, streams), k2d, in.kIdx))
		kView := b.mlaView("k_view", cache, [4]int64{kDim, 1, nKV, streams})
		vView := b.mlaView("v_view", kView, [4]int64{d.kvLora, 1, nKV, streams})
		q4 := b.mlaView("q_streams", qCur, [4]int64{kDim, H, T / streams, streams})
		qp := b.mlaView("q_perm", q4, [4]int64{kDim, T / streams, H, streams})
		kp := b.mlaView("k_perm", kView, [4]int64{kDim, nKV, 1, streams})
		vp := b.mlaView("v_perm", vView, [4]int64{d.kvLora, nKV, 1, streams})
		// V is the first kv_lora_rank values of each latent row: copied to
		// another backend it spans from its first element to its last
		// (ggml_nbytes), nearly the whole cache.
		if rowK, ok := c.TypeK.RowSize(uint64(kDim)); ok {
			if rowV, ok := c.TypeK.RowSize(uint64(d.kvLora)); ok {
				vp.span = int64(rowV) + (nKV*streams-1)*int64(rowK)
			}
		}
		wvb := func() *gtensor { return b.weight(p+"attn_v_b.weight", [4]int64{d.kvLora, d.vHead, H}) }
		if c.Flash {
			fa := b.f32("fattn", opOther, [4]int64{d.kvLora, H, T / streams, streams}, qp, kp, vp, in.mask)
			faP := b.mlaView("fattn_perm", fa, [4]int64{d.kvLora, T / streams, H, streams})
			mla := as(kMulMat, b.f32("fattn_mla", opOther, [4]int64{d.vHead, T / streams, H, streams}, wvb(), faP))
			mlaP := b.mlaView("fattn_mla_perm", mla, [4]int64{d.vHead, H, T / streams, streams})
			cont := b.f32("fattn_mla_cont", opOther, mlaP.layout.ne, mlaP)
			cur = b.mlaView("fattn_2d", cont, [4]int64{d.vHead * H, T})
		} else {
			// The latent cache is one KV head whose V rows are not
			// transposed, so build_attn_mha makes a contiguous transposed
			// copy of V, in the cache's type.
			vt := b.mlaView("v_trans", vp, [4]int64{nKV, d.kvLora, 1, streams})
			vc := b.mlaTensor("v_cont", c.TypeK, opOther, vt.layout.ne, vt)
			kq := b.f32("kq", opOther, [4]int64{nKV, T / streams, H, streams}, kp, qp)
			kq = b.f32("kq_soft_max", opInplace, kq.layout.ne, kq, in.mask)
			kqv := b.f32("kqv", opOther, [4]int64{d.kvLora, T / streams, H, streams}, vc, kq)
			mla := as(kMulMat, b.f32("kqv_mla", opOther, [4]int64{d.vHead, T / streams, H, streams}, wvb(), kqv))
			perm := b.mlaView("kqv_perm", mla, [4]int64{d.vHead, H, T / streams, streams})
			cur = b.f32("kqv_out", opOther, [4]int64{d.vHead * H, T}, perm)
		}
		b.g.expand(cur)
		cur = b.mlaMatMul("attn_out", p+"attn_output.weight", H*d.vHead, embd, cur)
		rows := T
		if il == d.layers-1 {
			rows = nOut
			cur = b.f32("get_rows_cur", opOther, [4]int64{embd, rows}, cur, in.outIDs)
			inpSA = b.f32("get_rows_inp", opOther, [4]int64{embd, rows}, inpSA, in.outIDs)
		}
		ffnInp := b.f32("ffn_inp", opInplace, [4]int64{embd, rows}, cur, inpSA)
		cur = b.mlaNorm(ffnInp, p+"ffn_norm.weight")
		cur = b.mlaFFNBlock(m, p, cur, d.ffn[il])
		inpL = b.f32("l_out", opInplace, [4]int64{embd, rows}, cur, ffnInp)
	}
	return b.mlaOutput(m, inpL)
}
