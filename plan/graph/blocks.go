package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file holds the blocks the architectures' graphs are built from,
// after llm_graph_context (src/llama-graph.cpp): the input embedding, the
// attention inputs, norms, feed-forward blocks, attention over the KV
// cache (src/llama-kv-cache.cpp's writes and views) and the output.

// batch is a transformer graph's micro-batch and the inputs it takes:
// the tokens (T, rounded as graph_reserve rounds them), the output rows,
// the embedded input, the positions and the output rows' ids.
type batch struct {
	T, nOut           int64
	inpL, pos, outIDs *tensor
}

// newBatch makes the micro-batch's inputs.
func (b *gb) newBatch(m *arch.Model, c Context, nTokens int) batch {
	T, nOut := reserveTokens(c, nTokens)
	return batch{T: T, nOut: nOut, inpL: b.inputEmbd(m, T),
		pos: b.Input("inp_pos", gguf.TypeI32, T*posPerToken(m)), outIDs: b.Input("inp_out_ids", gguf.TypeI32, nOut)}
}

// posPerToken is how many position rows build_inp_pos makes a token:
// four under multi-section RoPE (arch.Model.PosPerEmbd), else one.
func posPerToken(m *arch.Model) int64 { return int64(max(1, m.PosPerEmbd)) }

// newKVBatch is newBatch and the inputs of a single KV cache that holds
// every layer.
func (b *gb) newKVBatch(m *arch.Model, c Context, nTokens int) (batch, *kvInputs) {
	in := b.newBatch(m, c, nTokens)
	return in, b.kvCacheInputs(m, c, in.T, int64(c.NCtxSeq), "", attnLayers, true)
}

// lastRows selects the output rows (inp_out_ids) of the layer's output
// and of its residual when the layer is the last: only they go on.
func (in batch) lastRows(b *gb, last bool, cur, resid *tensor) (*tensor, *tensor) {
	if !last || !b.rules.OutIDs {
		return cur, resid
	}
	return b.GetRows(cur, in.outIDs), b.GetRows(resid, in.outIDs)
}

// inputEmbd is build_inp_embd: token ids and ready-made embeddings, of
// which ggml_build_forward_select keeps the lookup. The vector input is a
// leaf that nothing consumes, so the allocator places it first and never
// frees it.
func (b *gb) inputEmbd(m *arch.Model, T int64) *tensor {
	embd := int64(m.NEmbd)
	tokens := b.Input("inp_tokens", gguf.TypeI32, T)
	inpL := b.GetRows(b.weight("token_embd.weight", embd, int64(m.NVocab)), tokens)
	if !b.rules.EmbdSelect {
		b.Expand(inpL)
		return inpL
	}
	vecEmbd := b.Input("inp_embd", gguf.TypeF32, embd, T)
	b.Expand(inpL)
	b.Expand(vecEmbd)
	return inpL
}

// kvInputs are one KV cache's attention inputs (build_attn_inp_kv, or one
// half of build_attn_inp_kv_iswa): the write indices, the mask, and the
// Hadamard rotations a quantized cache is written and read through.
type kvInputs struct {
	nKV              int64
	kIdx, vIdx, mask *tensor
	kRot, vRot       *tensor
	// iswa: the cache is one of an iswa pair, whose build_attn expands
	// Q, K and V in that order (the single cache's expands K last, so
	// that RoPE on K can fuse with the cache write).
	iswa bool
	// maxV is the widest layer's V row: a transposed V cache's width.
	maxV int64
}

// attnLayers, fullLayers and slidingLayers select the layers a cache
// holds, for its rotations.
func attnLayers(l arch.Layer) bool    { return l.Attention != arch.NoAttention }
func fullLayers(l arch.Layer) bool    { return l.Attention != arch.Sliding }
func slidingLayers(l arch.Layer) bool { return l.Attention == arch.Sliding }

// kvCacheInputs makes a cache of nKV cells' inputs, named with suffix
// ("_swa" for the sliding half). withV is false for a K-only cache
// (MLA's latent cache), which has neither V indices nor rotations.
// Rotations come with a quantized cache when every layer keep selects has
// the same head size and it is a multiple of 64.
func (b *gb) kvCacheInputs(m *arch.Model, c Context, T, nKV int64, suffix string, keep func(arch.Layer) bool, withV bool) *kvInputs {
	streams := int64(max(c.NStream, 1))
	maskType := gguf.TypeF32
	if c.Flash {
		maskType = gguf.TypeF16 // flash attention takes an F16 mask
	}
	kv := &kvInputs{nKV: nKV, maxV: int64(maxVDim(m))}
	if b.rules.KVSetRows {
		kv.kIdx = b.Input("k_idxs"+suffix, gguf.TypeI64, T)
	}
	if c.Flash && !b.rules.MaskF16 {
		// an F32 mask, cast to F16 for flash attention in the graph
		kv.mask = b.Cast(b.Input("kq_mask"+suffix, gguf.TypeF32, nKV, T/streams, 1, streams), gguf.TypeF16)
	} else {
		kv.mask = b.Input("kq_mask"+suffix, maskType, nKV, T/streams, 1, streams)
	}
	if !withV {
		return kv
	}
	// A transposed V is written element by element, each row as wide as
	// the widest layer's.
	vIdxN := T
	if c.VTrans {
		vIdxN = T * kv.maxV
	}
	if b.rules.KVSetRows {
		kv.vIdx = b.Input("v_idxs"+suffix, gguf.TypeI64, vIdxN)
	}
	quant := func(t gguf.GGMLType) bool { i, _ := t.Info(); return i.Quantized }
	hk, hv := uniformHeads(m, keep)
	if quant(c.TypeK) && hk > 0 && hk%64 == 0 {
		n := rotSize(hk)
		kv.kRot = b.Input("k_rot"+suffix, gguf.TypeF32, n, n)
	}
	if quant(c.TypeV) && hv > 0 && hv%64 == 0 {
		kv.vRot = b.Input("v_rot"+suffix, gguf.TypeF32, 64, 64)
	}
	return kv
}

// rotSize is llama_kv_cache::build_input_k_rot's matrix size: the largest
// power of two from 64 up that divides the head size.
func rotSize(head int64) int64 {
	n := int64(64)
	for head%(n*2) == 0 {
		n *= 2
	}
	return n
}

// iswaInputs are the inputs of an iswa cache pair: the full cache's and
// the sliding one's (of cells cells).
func (b *gb) iswaInputs(m *arch.Model, c Context, T, cells int64) (full, swa *kvInputs) {
	full = b.kvCacheInputs(m, c, T, int64(c.NCtxSeq), "", fullLayers, true)
	swa = b.kvCacheInputs(m, c, T, cells, "_swa", slidingLayers, true)
	full.iswa, swa.iswa = true, true
	return full, swa
}

// swaCells is the model's sliding cache's size (Context.SWACells).
func swaCells(m *arch.Model, c Context) int64 { return int64(c.SWACells(m.Window)) }

// rotate is llama_mul_mat_hadamard: x as rows of the rotation's size (a
// reshape, or a copy when x is strided), multiplied by the rotation, and
// reshaped back.
func (b *gb) rotate(x, rot *tensor, strided bool) *tensor {
	n := rot.Ne()[0]
	rows := ggml.Elems(x.Ne()) / n
	var r *tensor
	if strided {
		r = b.Cont(x, n, rows)
	} else {
		r = b.Reshape(x, n, rows)
	}
	ne := x.Ne()
	return b.Reshape(b.MulMat(rot, r), ne[:]...)
}

// norm is build_norm with LLM_NORM_RMS and a weight.
func (b *gb) norm(x *tensor, weight string) *tensor {
	n := b.RMSNorm(x)
	b.cbNorm(n, weight)
	return b.Mul(n, b.weight(weight, x.Ne()[0]))
}

// layerNorm is build_norm with LLM_NORM and a weight (no bias).
func (b *gb) layerNorm(x *tensor, weight string) *tensor {
	n := b.Norm(x)
	b.cbNorm(n, weight)
	return b.Mul(n, b.weight(weight, x.Ne()[0]))
}

// ffnAct is build_ffn's activation and gating.
type ffnAct uint8

const (
	ffnSwiGLU   ffnAct = iota // LLM_FFN_SILU or GELU, LLM_FFN_PAR: glu(gate, up)
	ffnFusedGLU               // one projection holds gate and up (phi3)
	ffnReluSqr                // LLM_FFN_RELU_SQR without a gate (Nemotron-H)
)

// ffn is build_ffn on cur with the weights ffn_{up,gate,down}<suffix>.
func (b *gb) ffn(blk, suffix string, cur *tensor, act ffnAct) *tensor {
	up := b.MulMat(b.weight(blk+"ffn_up"+suffix+".weight"), cur)
	var x *tensor
	switch act {
	case ffnFusedGLU:
		x = b.GLUFused(up)
	case ffnReluSqr:
		x = b.Sqr(b.Unary(up))
	default:
		gate := b.MulMat(b.weight(blk+"ffn_gate"+suffix+".weight"), cur)
		x = b.GLU(gate, up)
	}
	return b.MulMat(b.weight(blk+"ffn_down"+suffix+".weight"), x)
}

// attnShape is one attention layer's shape in the graph: query and KV
// heads, the K and V head sizes, the cells per stream, the streams and the
// micro-batch's tokens.
type attnShape struct {
	heads, headsKV, headK, headV int64
	nKV, streams, T              int64
}

// layerShape is layer l's attention shape against cache kv.
func layerShape(m *arch.Model, l arch.Layer, c Context, kv *kvInputs, T int64) attnShape {
	hkv := int64(max(l.HeadsKV, 1))
	return attnShape{heads: int64(m.NHead), headsKV: int64(l.HeadsKV), headK: int64(l.KDim) / hkv, headV: int64(l.VDim) / hkv,
		nKV: kv.nKV, streams: int64(max(c.NStream, 1)), T: T}
}

// qkv is the separate Q, K and V projections of cur, with their biases
// where the model has them, as {head, heads, tokens}.
func (b *gb) qkv(blk string, cur *tensor, s attnShape) (q, k, v *tensor) {
	proj := func(name string) *tensor {
		x := b.MulMat(b.weight(blk+"attn_"+name+".weight"), cur)
		if bias := blk + "attn_" + name + ".bias"; b.has(bias) {
			x = b.Add(x, b.weight(bias))
		}
		return x
	}
	q = b.Reshape(proj("q"), s.headK, s.heads, s.T)
	k = b.Reshape(proj("k"), s.headK, s.headsKV, s.T)
	v = b.Reshape(proj("v"), s.headV, s.headsKV, s.T)
	return q, k, v
}

// attnOut is the attention's output projection, with its bias where the
// model has one.
func (b *gb) attnOut(blk string, cur *tensor) *tensor {
	cur = b.MulMat(b.weight(blk+"attn_output.weight"), cur)
	if bias := blk + "attn_output.bias"; b.has(bias) {
		cur = b.Add(cur, b.weight(bias))
	}
	return cur
}

// output is the final norm (result_norm, an output) and the LM head; the
// caller finishes the logits.
func (b *gb) output(m *arch.Model, x *tensor, norm func(*tensor, string) *tensor) *tensor {
	cur := norm(x, "output_norm.weight").SetOutput()
	b.embd = cur
	return b.MulMat(b.weight("output.weight", int64(m.NEmbd), int64(m.NVocab)), cur)
}

// finish marks the logits as the graph's output and records them.
func (b *gb) finish(logits *tensor) *ggml.Graph {
	b.Expand(logits.SetOutput())
	return &b.G
}
