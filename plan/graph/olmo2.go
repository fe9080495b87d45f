package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/olmo2.cpp: a llama-like transformer that norms
// after attention and after the FFN instead of before, and Q and K whole,
// before the heads are split.

// olmo2 is OLMo 2's family.
type olmo2 struct{}

func (olmo2) graphOf(m *arch.Model) graphFunc {
	if !denseFullAttention(m) {
		return nil
	}
	return olmo2Graph
}

func olmo2Graph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in, kv := b.newKVBatch(m, c, nTokens)
	inpL := in.inpL
	for il, l := range m.Layers {
		blk := blkName(il)
		s := layerShape(m, l, c, kv, in.T)
		proj := func(name string) *tensor { return b.MulMat(b.weight(blk+"attn_"+name+".weight"), inpL) }
		q := b.Reshape(b.norm(proj("q"), blk+"attn_q_norm.weight"), s.headK, s.heads, s.T)
		k := b.Reshape(b.norm(proj("k"), blk+"attn_k_norm.weight"), s.headK, s.headsKV, s.T)
		v := b.Reshape(proj("v"), s.headV, s.headsKV, s.T)
		att := b.attn(il, c, kv, s, b.Rope(q, in.pos, nil), b.Rope(k, in.pos, nil), v, attnOpts{})
		cur, inpSA := in.lastRows(b, il == len(m.Layers)-1, b.attnOut(blk, att), inpL)
		ffnInp := b.Add(b.norm(cur, blk+"post_attention_norm.weight"), inpSA)
		cur = b.norm(b.ffn(blk, "", ffnInp, ffnSwiGLU), blk+"post_ffw_norm.weight")
		inpL = b.Add(cur, ffnInp)
	}
	return b.finish(b.output(m, inpL, b.norm))
}
