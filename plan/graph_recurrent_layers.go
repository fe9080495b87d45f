package plan

import (
	"strconv"

	"github.com/headroom-llm/headroom/gguf"
)

// recurrentAttnInputs are build_attn_inp_kv's inputs (shared by every attention
// layer) and the positions, made when the first layer needs them.
type recurrentAttnInputs struct {
	pos, kqMask, kIdx, vIdx *gtensor
	// kRot and vRot are the Hadamard rotations a quantized cache is
	// written and read through (nil for f16 and f32 caches).
	kRot, vRot *gtensor
}

// attention is build_attn on a KV cache for q, k, v {head, heads, tokens}
// already normed and roped, followed by the output projection, as in
// llamaGraphOn.
func (r *recurrentGraph) attention(il int, c Context, in *recurrentAttnInputs, q, k, v *gtensor) *gtensor {
	l := r.m.Layers[il]
	blk := "blk." + strconv.Itoa(il) + "."
	T := r.nSeqs * r.nSeqTokens
	heads := int64(r.m.NHead)
	headV := int64(l.VDim) / int64(l.HeadsKV)
	cur := r.attend(il, c, in, q, k, v)
	embd := int64(r.m.NEmbd)
	return as(kMulMat, r.b.f32("attn_out", opOther, [4]int64{embd, T}, r.b.weight(blk+"attn_output.weight", [4]int64{heads * headV, embd}), cur))
}

// attend is build_attn without the output projection: the rotations of a
// quantized cache, Q, V and K recorded (K last, so that RoPE on K can be
// fused with the write into the cache), the writes and the attention.
func (r *recurrentGraph) attend(il int, c Context, in *recurrentAttnInputs, q, k, v *gtensor) *gtensor {
	b := r.b
	l := r.m.Layers[il]
	headsKV := int64(l.HeadsKV)
	s := attnShape{heads: int64(r.m.NHead), headsKV: headsKV, headK: int64(l.KDim) / headsKV, headV: int64(l.VDim) / headsKV,
		nKV: int64(c.NCtxSeq), streams: int64(max(c.NStream, 1)), T: r.nSeqs * r.nSeqTokens}
	q, k, v = in.rotated(b, q, k, v)
	b.g.expand(q)
	b.g.expand(v)
	b.g.expand(k)
	cur := b.kvAttention(il, c, s, q, k, v, in.kIdx, in.vIdx, in.kqMask, nil)
	if in.vRot != nil {
		cur = b.swaRotate(cur, in.vRot, false)
	}
	return cur
}

// attnInputs makes build_inp_mem_hybrid's attention inputs.
func (r *recurrentGraph) attnInputs(c Context) *recurrentAttnInputs {
	b := r.b
	T := r.nSeqs * r.nSeqTokens
	streams := int64(max(c.NStream, 1))
	maskType := gguf.TypeF32
	if c.Flash {
		maskType = gguf.TypeF16 // made in F16 directly for flash attention
	}
	in := &recurrentAttnInputs{
		pos:    b.input("inp_pos", gguf.TypeI32, [4]int64{T}),
		kqMask: b.input("kq_mask", maskType, [4]int64{int64(c.NCtxSeq), T / streams, 1, streams}),
		kIdx:   b.input("k_idxs", gguf.TypeI64, [4]int64{T}),
	}
	// A transposed V cache is written element by element.
	vIdxN := T
	if c.VTrans {
		vIdxN = T * int64(maxVDim(r.m))
	}
	in.vIdx = b.input("v_idxs", gguf.TypeI64, [4]int64{vIdxN})
	quant := func(t gguf.GGMLType) bool { i, _ := t.Info(); return i.Quantized }
	hk, hv := uniformHeads(r.m)
	if quant(c.TypeK) && hk > 0 && hk%64 == 0 {
		n := swaRotSize(hk)
		in.kRot = b.input("k_rot", gguf.TypeF32, [4]int64{n, n})
	}
	if quant(c.TypeV) && hv > 0 && hv%64 == 0 {
		in.vRot = b.input("v_rot", gguf.TypeF32, [4]int64{64, 64})
	}
	return in
}

// rotated applies build_attn's Hadamard rotations of a quantized cache to
// q, k and v before they are recorded (k or v nil: not written here).
func (in *recurrentAttnInputs) rotated(b *gb, q, k, v *gtensor) (*gtensor, *gtensor, *gtensor) {
	if in.kRot != nil {
		q = b.swaRotate(q, in.kRot, false)
		if k != nil {
			k = b.swaRotate(k, in.kRot, false)
		}
	}
	if in.vRot != nil && v != nil {
		v = b.swaRotate(v, in.vRot, false)
	}
	return q, k, v
}

// qkv projects cur to Q, K and V viewed as {head, heads, tokens}.
func (r *recurrentGraph) qkv(il int, cur *gtensor) (q, k, v *gtensor) {
	b := r.b
	l := r.m.Layers[il]
	blk := "blk." + strconv.Itoa(il) + "."
	T := r.nSeqs * r.nSeqTokens
	embd := int64(r.m.NEmbd)
	heads, headsKV := int64(r.m.NHead), int64(l.HeadsKV)
	head := int64(l.KDim) / headsKV
	q = as(kMulMat, b.f32("Qcur", opOther, [4]int64{heads * head, T}, b.weight(blk+"attn_q.weight", [4]int64{embd, heads * head}), cur))
	k = as(kMulMat, b.f32("Kcur", opOther, [4]int64{headsKV * head, T}, b.weight(blk+"attn_k.weight", [4]int64{embd, headsKV * head}), cur))
	v = as(kMulMat, b.f32("Vcur", opOther, [4]int64{headsKV * head, T}, b.weight(blk+"attn_v.weight", [4]int64{embd, headsKV * head}), cur))
	q = b.view("Qcur_3d", q, [4]int64{head, heads, T})
	k = b.view("Kcur_3d", k, [4]int64{head, headsKV, T})
	v = b.view("Vcur_3d", v, [4]int64{head, headsKV, T})
	return q, k, v
}

// rope is ggml_rope_ext on a {head, heads, tokens} tensor.
func (r *recurrentGraph) rope(name string, x, pos *gtensor) *gtensor {
	return as(kRope, r.b.f32(name, opInplace, x.layout.ne, x, pos))
}

// ffn is build_ffn with LLM_FFN_SILU and LLM_FFN_PAR (a SwiGLU), or for
// Nemotron-H's MLP layers LLM_FFN_RELU_SQR without a gate.
func (r *recurrentGraph) ffn(il int, cur *gtensor, reluSqr bool) *gtensor {
	b := r.b
	blk := "blk." + strconv.Itoa(il) + "."
	T := cur.layout.ne[1] // all tokens, or the outputs' rows in the last layer
	embd := int64(r.m.NEmbd)
	ff := int64(r.m.Layers[il].FF)
	up := as(kMulMat, b.f32("ffn_up", opOther, [4]int64{ff, T}, b.weight(blk+"ffn_up.weight", [4]int64{embd, ff}), cur))
	var act *gtensor
	if reluSqr {
		act = as(kUnary, b.f32("ffn_relu", opInplace, up.layout.ne, up))
		act = b.f32("ffn_sqr", opInplace, up.layout.ne, act)
	} else {
		gate := as(kMulMat, b.f32("ffn_gate", opOther, [4]int64{ff, T}, b.weight(blk+"ffn_gate.weight", [4]int64{embd, ff}), cur))
		act = b.f32("ffn_swiglu", opOther, [4]int64{ff, T}, gate, up)
	}
	return as(kMulMat, b.f32("ffn_out", opOther, [4]int64{embd, T}, b.weight(blk+"ffn_down.weight", [4]int64{ff, embd}), act))
}

// shortConv is LFM2's build_shortconv_block: a gated depthwise convolution
// over the last l_cache inputs, whose state is the previous l_cache-1.
func (r *recurrentGraph) shortConv(il int, cur *gtensor) *gtensor {
	b := r.b
	blk := "blk." + strconv.Itoa(il) + "."
	embd := int64(r.m.NEmbd)
	T, S := r.nSeqTokens, r.nSeqs
	l := r.m.Layers[il]
	dConv := int64(l.RDim) / embd
	cur = b.view("cur_3d", cur, [4]int64{embd, T, S})
	bcx := as(kMulMat, b.f32("in_proj", opOther, [4]int64{3 * embd, T, S}, b.weight(blk+"shortconv.in_proj.weight", [4]int64{embd, 3 * embd}), cur))
	// b, c and x are strided views into bcx, and the new conv state one
	// into the concatenation: copied to another backend, each holds its
	// ggml_nbytes span (see strided).
	bcxRow := 3 * embd * 4
	bv := strided(b.view("b", bcx, [4]int64{embd, T, S}), [4]int64{4, bcxRow, bcxRow * T})
	cv := strided(b.view("c", bcx, [4]int64{embd, T, S}), [4]int64{4, bcxRow, bcxRow * T})
	xv := strided(b.view("x", bcx, [4]int64{embd, T, S}), [4]int64{4, bcxRow, bcxRow * T})
	bx := as(kMul, b.f32("bx", opInplace, [4]int64{embd, T, S}, bv, xv))
	bxT := b.view("bx_t", bx, [4]int64{T, embd, S})
	rCache := b.cache(il, "cache_r", [4]int64{int64(l.RDim) * r.nRS})
	conv := r.buildRS(rCache, int64(l.RDim), nil)
	conv = b.view("conv_3d", conv, [4]int64{dConv, embd, S})
	cat := b.f32("conv_x", opOther, [4]int64{dConv + T, embd, S}, conv, bxT)
	catRow := (dConv + T) * 4
	last := strided(b.view("new_conv", cat, [4]int64{dConv, embd, S}), [4]int64{4, catRow, catRow * embd})
	b.g.expand(r.cpy("conv_store", last, b.view("conv_state_dst", rCache, [4]int64{dConv * embd * S})))
	out := as(kSSMConv, b.f32("conv", opOther, [4]int64{embd, T, S}, cat, b.weight(blk+"shortconv.conv.weight", [4]int64{dConv + 1, embd})))
	y := as(kMul, b.f32("conv_gated", opInplace, [4]int64{embd, T, S}, cv, out))
	y = as(kMulMat, b.f32("out_proj", opOther, [4]int64{embd, T, S}, b.weight(blk+"shortconv.out_proj.weight", [4]int64{embd, embd}), y))
	return b.view("y_2d", y, [4]int64{embd, T * S})
}
