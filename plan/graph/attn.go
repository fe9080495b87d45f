package graph

import "github.com/headroom-llm/headroom/plan/ggml"

// attnOpts are what sets one model's build_attn apart.
type attnOpts struct {
	sinks   *tensor // per-head attention sinks (gpt-oss)
	softcap bool    // attention logit soft-capping before the soft max (gemma2)
	// vStrided: V is a strided view (phi3's fused projection), copied
	// where ggml needs contiguous rows.
	vStrided bool
}

// attn is build_attn for layer il against cache kv, from Q, K and V
// already normed and roped ({head, heads, tokens}; K and V nil for a
// layer reading another layer's cache): the rotations of a quantized
// cache, Q, K and V recorded in the cache's order, the cache writes and
// the attention. It returns the heads merged into one row per token.
func (b *gb) attn(il int, c Context, kv *kvInputs, s attnShape, q, k, v *tensor, o attnOpts) *tensor {
	if kv.kRot != nil {
		q = b.rotate(q, kv.kRot, false)
		if k != nil {
			k = b.rotate(k, kv.kRot, false)
		}
	}
	if kv.vRot != nil && v != nil {
		v = b.rotate(v, kv.vRot, o.vStrided)
		o.vStrided = false
	}
	b.Expand(q)
	switch {
	case k == nil:
	case kv.iswa, !b.rules.KVSetRows:
		// llm_build_kv expanded Q, K and V in that order too
		b.Expand(k)
		b.Expand(v)
	default:
		b.Expand(v)
		b.Expand(k)
	}
	cur := b.kvAttention(il, c, kv, s, q, k, v, o)
	if kv.vRot != nil {
		cur = b.rotate(cur, kv.vRot, false)
	}
	return cur
}

// kvAttention writes k and v (unless nil) into layer il's cache, views
// the cache per stream, and runs attention: flash, or kq, soft max and
// kqv against a transposed V. It returns the heads merged, expanded.
func (b *gb) kvAttention(il int, c Context, kv *kvInputs, s attnShape, q, k, v *tensor, o attnOpts) *tensor {
	vWidth := s.headsKV * s.headV
	if c.VTrans {
		vWidth = kv.maxV
	}
	cacheK := b.cache(il, "cache_k", c.TypeK, s.headK*s.headsKV, s.nKV, s.streams)
	cacheV := b.cache(il, "cache_v", c.TypeV, vWidth, s.nKV, s.streams)
	if k != nil {
		b.writeKV(c, kv, s, cacheK, cacheV, k, v, o.vStrided)
	}
	kView := b.View(cacheK, s.headK, s.headsKV, s.nKV, s.streams)
	var vp *tensor
	if c.VTrans {
		vp = b.Permute(b.View(cacheV, s.nKV, s.headsKV, s.headV, s.streams), 0, 2, 1, 3)
	} else {
		vp = b.Permute(b.View(cacheV, s.headV, s.headsKV, s.nKV, s.streams), 0, 2, 1, 3)
	}
	qp := b.Permute(b.Reshape(q, s.headK, s.heads, s.T/s.streams, s.streams), 0, 2, 1, 3)
	kp := b.Permute(kView, 0, 2, 1, 3)
	var cur *tensor
	if c.Flash {
		// gemma2's soft-cap is a parameter of the fused op
		cur = b.Reshape(b.FlashAttnExt(qp, kp, vp, kv.mask, o.sinks), s.headV*s.heads, s.T)
	} else {
		kq := b.MulMat(kp, qp)
		if o.softcap {
			kq = b.Scale(b.Unary(b.Scale(kq)))
		}
		kq = b.SoftMax(kq, kv.mask, o.sinks)
		if !c.VTrans {
			// a cache made for flash attention that -fa auto then turned
			// off ("note: avoid this branch" in build_attn_mha)
			vp = b.Cont(b.Transpose(vp))
		}
		cur = b.Cont(b.Permute(b.MulMat(vp, kq), 0, 2, 1, 3), s.headV*s.heads, s.T)
	}
	b.Expand(cur)
	return cur
}

// writeKV is cpy_k and cpy_v: set_rows of k and v into the caches. With
// several streams a cache is merged into one 2D tensor (the indices are
// global); a transposed V is written one element per row, through
// reshapes of the rows and of the cache. These reshapes are nodes, which
// the Vulkan reorder counts.
func (b *gb) writeKV(c Context, kv *kvInputs, s attnShape, cacheK, cacheV, k, v *tensor, vStrided bool) {
	if !b.rules.KVSetRows {
		b.copyKV(c, s, cacheK, cacheV, k, v)
		return
	}
	dstK := cacheK
	if s.streams > 1 {
		dstK = b.Reshape(cacheK, s.headK*s.headsKV, s.nKV*s.streams)
	}
	b.Expand(b.SetRows(dstK, b.View(k, s.headK*s.headsKV, s.T), kv.kIdx))
	width := s.headsKV * s.headV
	if !c.VTrans {
		dstV := cacheV
		if s.streams > 1 {
			dstV = b.Reshape(cacheV, width, s.nKV*s.streams)
		}
		// cpy_v's ggml_view_2d keeps a strided V's token stride, so a
		// copy of it to the cache's backend holds V's span (gptneox's
		// views say theirs).
		b.Expand(b.SetRows(dstV, b.Reshape(v, width, s.T).SpanOf(v), kv.vIdx))
		return
	}
	var v2d *tensor
	if vStrided {
		v2d = b.Cont(v, width, s.T)
	} else {
		v2d = b.Reshape(v, width, s.T)
	}
	if width < kv.maxV {
		v2d = b.Pad(v2d, kv.maxV, s.T)
	}
	dstV := b.Reshape(cacheV, 1, kv.maxV*s.nKV*s.streams)
	b.Expand(b.SetRows(dstV, b.Reshape(v2d, 1, ggml.Elems(v2d.Ne())), kv.vIdx))
}

// copyKV is the cache write of builds before ggml_set_rows
// (before Rules.KVSetRows): llm_build_kv_store's ggml_cpy of K, and of V (its
// transpose when the cache is transposed), into views of the cache at
// the write position, which take no indices and copy nothing first.
func (b *gb) copyKV(c Context, s attnShape, cacheK, cacheV, k, v *tensor) {
	width := s.headsKV * s.headV
	b.Expand(b.Cpy(k, b.View(cacheK, s.headK*s.headsKV*s.T)))
	if c.VTrans {
		b.Expand(b.Cpy(b.Transpose(b.Reshape(v, width, s.T)), b.View(cacheV, s.T, width)))
		return
	}
	b.Expand(b.Cpy(v, b.View(cacheV, width*s.T)))
}
