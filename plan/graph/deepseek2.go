package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/deepseek2.cpp with is_mla: multi-head latent
// attention in its absorbed form, where the cache holds the compressed
// latent and the rope part of K, on DeepSeek's layer layout (mla.go).

// mlaDims are deepseek2's attention sizes, read from its tensors.
type mlaDims struct {
	heads, nope, rope, kvLora, vHead, qLora int64
	layers                                  int
	ffn                                     []mlaFFN
}

// deepseek2Dims checks that the model is the absorbed-MLA deepseek2
// this file describes: split attn_k_b/attn_v_b (the latent cache, one KV
// head of kv_lora_rank + rope), full attention in every layer. DeepSeek
// V3's expert selection bias and groups are build_moe_ffn's (moe_ffn.go).
func deepseek2Dims(m *arch.Model, s mlaShapes) (mlaDims, bool) {
	d := mlaDims{heads: int64(m.NHead), layers: mlaGraphLayers(m)}
	if !m.MLA || d.layers == 0 || d.heads <= 0 {
		return d, false
	}
	embd := int64(m.NEmbd)
	for il := 0; il < d.layers; il++ {
		p := blkName(il)
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
		if !ok {
			return d, false
		}
		d.ffn = append(d.ffn, f)
	}
	return d, true
}

// deepseek2 is DeepSeek-V2's family, with multi-head latent attention.
type deepseek2 struct{}

func (deepseek2) graphOf(m *arch.Model) graphFunc {
	d, ok := deepseek2Dims(m, mlaShapes(tensorShapes(m)))
	if !ok {
		return nil
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
		return deepseek2Graph(m, d, c, nTokens, b)
	}
}

// deepseek2Graph is src/models/deepseek2.cpp with is_mla: Q (directly
// or through the q LoRA) split into a no-rope and a rope part; the
// compressed KV and the shared rope key from attn_kv_a_mqa; the no-rope
// query absorbed into the latent space by attn_k_b; Q and K concatenated
// with their rope parts; attention against the latent cache as one KV
// head (build_attn with a K-only cache, V a view of K), decompressed by
// attn_v_b.
func deepseek2Graph(m *arch.Model, d mlaDims, c Context, nTokens int, b *gb) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	inpL, outIDs := in.inpL, in.outIDs
	// MLA's K-only cache input (build_attn_inp_k) has no V indices and no
	// rotations, whatever the cache's type.
	kv := b.kvCacheInputs(m, c, in.T, int64(c.NCtxSeq), "", attnLayers, false)
	for il := 0; il < d.layers; il++ {
		p := blkName(il)
		inpSA := inpL
		cur := b.mlaAttention(c, d, il, b.norm(inpL, p+"attn_norm.weight"), in.pos, kv)
		if il == d.layers-1 {
			cur, inpSA = b.GetRows(cur, outIDs), b.GetRows(inpSA, outIDs)
		}
		ffnInp := b.Add(cur, inpSA)
		inpL = b.Add(b.mlaLayerFFN(m, p, b.norm(ffnInp, p+"ffn_norm.weight"), d.ffn[il]), ffnInp)
	}
	return b.finish(b.output(m, inpL, b.norm))
}

// mlaAttention is deepseek2's attention from the normed input through
// the output projection.
func (b *gb) mlaAttention(c Context, d mlaDims, il int, cur, pos *tensor, kv *kvInputs) *tensor {
	p := blkName(il)
	T, H := cur.Ne()[1], d.heads
	var q *tensor
	if d.qLora > 0 {
		q = b.MulMat(b.weight(p+"attn_q_a.weight"), cur)
		q = b.MulMat(b.weight(p+"attn_q_b.weight"), b.norm(q, p+"attn_q_a_norm.weight"))
	} else {
		q = b.MulMat(b.weight(p+"attn_q.weight"), cur)
	}
	// {n_embd_head_k, n_head, n_tokens}: a node of its own, which the
	// views of Q then view
	q = b.Reshape(q, d.nope+d.rope, H, T)
	kvPE := b.MulMat(b.weight(p+"attn_kv_a_mqa.weight"), cur)
	// RoPE may run in place, but its inputs are views, which the
	// allocator never reuses: both get new tensors.
	qPE := b.Rope(b.View(q, d.rope, H, T), pos, nil)
	kPE := b.Rope(b.View(kvPE, d.rope, 1, T), pos, nil)
	kvC := b.norm(b.View(kvPE, d.kvLora, T), p+"attn_kv_a_norm.weight")
	qNope := b.Permute(b.View(q, d.nope, H, T), 0, 2, 1, 3)
	qAbs := b.Permute(b.MulMat(b.weight(p+"attn_k_b.weight"), qNope), 0, 2, 1, 3)
	qCur := b.Concat(qAbs, qPE, 0)
	vCur := b.Reshape(kvC, d.kvLora, 1, T)
	kCur := b.Concat(vCur, kPE, 0)
	// build_attn expands Q, V and then K (so RoPE and the cache write
	// may fuse), then the write of K into the latent cache.
	b.Expand(qCur)
	b.Expand(vCur)
	b.Expand(kCur)
	return b.attnOut(p, b.mlaLatent(c, d, il, qCur, kCur, kv))
}

// mlaLatent writes K into the latent cache and attends to it: V is the
// first kv_lora_rank values of each latent row, decompressed by attn_v_b.
func (b *gb) mlaLatent(c Context, d mlaDims, il int, qCur, kCur *tensor, kv *kvInputs) *tensor {
	p := blkName(il)
	nKV, streams, T, H := kv.nKV, int64(max(c.NStream, 1)), kCur.Ne()[2], d.heads
	kDim := d.kvLora + d.rope
	cache := b.cache(il, "cache_k", c.TypeK, kDim, nKV, streams)
	dst := cache
	if streams > 1 {
		dst = b.Reshape(cache, kDim, nKV*streams) // the indices are global
	}
	if !b.rules.KVSetRows {
		b.Expand(b.Cpy(kCur, b.View(cache, kDim*T)))
	} else {
		b.Expand(b.SetRows(dst, b.View(kCur, kDim, T), kv.kIdx))
	}
	kView := b.View(cache, kDim, 1, nKV, streams)
	qp := b.Permute(b.Reshape(qCur, kDim, H, T/streams, streams), 0, 2, 1, 3)
	kp := b.Permute(kView, 0, 2, 1, 3)
	vp := b.Permute(b.View(kView, d.kvLora, 1, nKV, streams), 0, 2, 1, 3)
	// Copied to another backend, V spans from its first element to its
	// last (ggml_nbytes), nearly the whole cache.
	if rowK, ok := c.TypeK.RowSize(uint64(kDim)); ok {
		vp.Strided(int64(rowK), int64(rowK)*nKV, int64(rowK)*nKV)
	}
	wvb := b.weight(p + "attn_v_b.weight")
	var cur *tensor
	if c.Flash {
		fa := b.Permute(b.FlashAttnExt(qp, kp, vp, kv.mask, nil), 0, 2, 1, 3)
		mla := b.Permute(b.MulMat(wvb, fa), 0, 2, 1, 3)
		cur = b.Reshape(b.Cont(mla), d.vHead*H, T)
	} else {
		// The latent cache is one KV head whose V rows are not
		// transposed, so build_attn_mha makes a contiguous transposed
		// copy of V, in the cache's type.
		vc := b.Cont(b.Transpose(vp))
		kq := b.SoftMax(b.MulMat(kp, qp), kv.mask, nil)
		mla := b.MulMat(wvb, b.MulMat(vc, kq))
		cur = b.Cont(b.Permute(mla, 0, 2, 1, 3), d.vHead*H, T)
	}
	b.Expand(cur)
	return cur
}
