package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/bert.cpp (bert and nomic-bert): an encoder
// without memory, whose attention runs over the micro-batch itself in both
// directions (build_attn_inp_no_cache: a mask of n_tokens by n_tokens),
// post-norms with biases, a GELU FFN with biases (bert) or a SwiGLU one
// (nomic-bert, which also ropes Q and K and has a fused QKV), and the
// last layer's output as the graph's embedding (t_embd): no LM head.

// bert is the family of BERT encoders; rope says the architecture ropes Q
// and K (nomic-bert) where bert adds position embeddings.
type bert struct{ rope bool }

func (o bert) graphOf(m *arch.Model) graphFunc {
	if !m.Encoder || m.NExpert > 0 || len(m.Layers) == 0 {
		return nil
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
		return bertGraph(m, c, nTokens, b, o)
	}
}

func bertGraph(m *arch.Model, c Context, nTokens int, b *gb, o bert) *ggml.Graph {
	T, nOut := reserveTokens(c, nTokens)
	embd := int64(m.NEmbd)
	pos := b.Input("inp_pos", gguf.TypeI32, T)
	inpL := b.inputEmbd(m, T)
	if b.has("token_types.weight") {
		// every token is sentence A: the first row of the type table
		inpL = b.Add(inpL, b.View(b.weight("token_types.weight"), embd))
	}
	if !o.rope {
		inpL = b.Add(b.GetRows(b.weight("position_embd.weight"), pos), inpL)
	}
	inpL = b.layerNormBias(inpL, "token_embd_norm")
	maskType := gguf.TypeF32
	if c.Flash {
		maskType = gguf.TypeF16
	}
	mask := b.Input("kq_mask", maskType, T, T, 1, 1)
	outIDs := b.Input("inp_out_ids", gguf.TypeI32, nOut)
	for il, l := range m.Layers {
		blk := blkName(il)
		heads := int64(m.NHead)
		head := int64(l.KDim / max(l.HeadsKV, 1))
		headsKV := int64(l.HeadsKV)
		var q, k, v *tensor
		if b.has(blk + "attn_qkv.weight") {
			qkv := b.MulMat(b.weight(blk+"attn_qkv.weight"), inpL)
			if bias := blk + "attn_qkv.bias"; b.has(bias) {
				qkv = b.Add(qkv, b.weight(bias))
			}
			row := qkv.Ne()[0] * 4
			q = b.View(qkv, head, heads, T).Strided(head*4, row)
			k = b.View(qkv, head, headsKV, T).Strided(head*4, row)
			v = b.View(qkv, head, headsKV, T).Strided(head*4, row)
		} else {
			q, k, v = b.qkv(blk, inpL, attnShape{heads: heads, headsKV: headsKV, headK: head, headV: head, T: T})
		}
		if o.rope {
			q, k = b.Rope(q, pos, nil), b.Rope(k, pos, nil)
		}
		cur := b.attnOut(blk, b.attnNoCache(c, q, k, v, mask, T))
		if il == len(m.Layers)-1 {
			cur, inpL = b.GetRows(cur, outIDs), b.GetRows(inpL, outIDs)
		}
		ffnInp := b.layerNormBias(b.Add(cur, inpL), blk+"attn_output_norm")
		if b.has(blk + "ffn_gate.weight") {
			cur = b.ffn(blk, "", ffnInp, ffnSwiGLU)
		} else {
			cur = b.ffnGELU(blk, ffnInp)
		}
		inpL = b.layerNormBias(b.Add(cur, ffnInp), blk+"layer_output_norm")
	}
	b.embd = inpL
	b.Expand(inpL)
	return &b.G
}

// attnNoCache is build_attn over build_attn_inp_no_cache: Q, K and V of
// the micro-batch itself, with its n_tokens by n_tokens mask. Flash
// attention takes K and V cast to F16; without it V is made contiguous
// transposed ("avoid this branch" in build_attn_mha).
func (b *gb) attnNoCache(c Context, q, k, v, mask *tensor, T int64) *tensor {
	b.Expand(q)
	b.Expand(k)
	b.Expand(v)
	qp, kp, vp := b.Permute(q, 0, 2, 1, 3), b.Permute(k, 0, 2, 1, 3), b.Permute(v, 0, 2, 1, 3)
	headV, heads := v.Ne()[0], q.Ne()[1]
	var cur *tensor
	if c.Flash {
		kp, vp = b.Cast(kp, gguf.TypeF16), b.Cast(vp, gguf.TypeF16)
		cur = b.Reshape(b.FlashAttnExt(qp, kp, vp, mask, nil), headV*heads, T)
	} else {
		kq := b.SoftMax(b.MulMat(kp, qp), mask, nil)
		vp = b.Cont(b.Transpose(vp))
		cur = b.Cont(b.Permute(b.MulMat(vp, kq), 0, 2, 1, 3), headV*heads, T)
	}
	b.Expand(cur)
	return cur
}

// pool is build_pooling, recorded after the model's graph when the
// context makes embeddings: the pooled rows of the graph's embedding
// (t_embd) by the context's pooling type, and a reranker's head.
func (b *gb) pool(m *arch.Model, c Context, T int64) {
	inp := b.embd
	if inp == nil {
		return
	}
	nSeq := int64(max(c.NSeq, 1))
	mean := func() *tensor {
		in := b.Input("inp_mean", gguf.TypeF32, T, nSeq)
		return b.MulMat(b.Cont(b.Transpose(inp)), in)
	}
	cls := func() *tensor { return b.GetRows(inp, b.Input("inp_cls", gguf.TypeI32, nSeq)) }
	var cur *tensor
	switch c.Pooling {
	case arch.PoolingNone:
		cur = inp
	case arch.PoolingMean:
		cur = mean()
	case arch.PoolingCLS, arch.PoolingLast:
		cur = cls()
	case arch.PoolingRank:
		// (modern-bert pools by the mean first and uses GELU: refused
		// by arch, its graph is not replayed)
		cur = cls()
		if b.has("cls.weight") {
			cur = b.MulMat(b.weight("cls.weight"), cur)
			if b.has("cls.bias") {
				cur = b.Add(cur, b.weight("cls.bias"))
			}
			cur = b.Unary(cur) // tanh
			if b.has("cls.norm.weight") {
				cur = b.layerNorm(cur, "cls.norm.weight")
			}
		}
		if b.has("cls.output.weight") {
			cur = b.MulMat(b.weight("cls.output.weight"), cur)
			if b.has("cls.output.bias") {
				cur = b.Add(cur, b.weight("cls.output.bias"))
			}
		}
		if m.Arch == "qwen3" {
			cur = b.SoftMax(cur, nil, nil)
		}
	}
	b.Expand(cur)
}
