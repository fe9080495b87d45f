package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/cohere2-iswa.cpp: sliding-window and full
// attention layers over llama_kv_cache_iswa (see gemma.go), layer
// norms, no RoPE on the global layers, the FFN beside the attention on
// the same normed input, and scaled logits.

// cohere2 is Command R7B's family.
type cohere2 struct{}

func (cohere2) graphOf(m *arch.Model) graphFunc {
	if !swaDescribes(m, false) {
		return nil
	}
	return cohere2Graph
}

func cohere2Graph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	inpL := in.inpL
	full, swa := b.iswaInputs(m, c, in.T, swaCells(m, c))
	freqs := b.ropeFactorsAny()
	last := len(m.Layers) - 1
	for il, l := range m.Layers {
		blk := blkName(il)
		sliding := l.Attention == arch.Sliding
		kv := full
		if sliding {
			kv = swa
		}
		s := layerShape(m, l, c, kv, in.T)
		normed := b.layerNorm(inpL, blk+"attn_norm.weight")
		q, k, v := b.qkv(blk, normed, s)
		if sliding {
			q, k = b.Rope(q, in.pos, freqs), b.Rope(k, in.pos, freqs)
		}
		cur := b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, attnOpts{}))
		cur, resid := in.lastRows(b, il == last, cur, inpL)
		if il == last {
			normed = b.GetRows(normed, in.outIDs)
		}
		inpL = b.Add(b.Add(b.ffn(blk, "", normed, ffnSwiGLU), resid), cur)
	}
	// logit_scale (every Command-R model sets one; without it the logits
	// are the product itself, of the same size)
	return b.finish(b.Scale(b.output(m, inpL, b.layerNorm)))
}
