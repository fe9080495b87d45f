package graph

import (
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/granite.cpp: llama's graph with Granite's
// multipliers. The embedding multiplier (build_inp_embd), the residual
// multiplier on the attention and FFN outputs and the logit divisor are
// ggml_scale nodes; the attention multiplier is the softmax's factor and
// records nothing. arch refuses the files whose graph differs otherwise
// (no RoPE, Granite Vision's deepstack), and embedding_scale and
// residual_scale are taken as set: every Granite 3 checkpoint sets them,
// and each scale is an in-place op the allocator gives its source's memory.

// granite is Granite 3's family. It describes the dense layout; the MoE
// branch and FFN biases are other graphs.
type granite struct{}

func (granite) graphOf(m *arch.Model) graphFunc {
	if !denseFullAttention(m) {
		return nil
	}
	for _, t := range m.Tensors {
		if strings.HasPrefix(t.Name, "blk.") && strings.Contains(t.Name, ".ffn_") && strings.HasSuffix(t.Name, ".bias") {
			return nil
		}
	}
	return graniteGraph
}

func graniteGraph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in, kv := b.newKVBatch(m, c, nTokens)
	// The scaled embedding is expanded at once, as build_inp_embd does.
	inpL := b.Scale(in.inpL)
	b.Expand(inpL)
	for il, l := range m.Layers {
		blk := blkName(il)
		s := layerShape(m, l, c, kv, in.T)
		q, k, v := b.qkv(blk, b.norm(inpL, blk+"attn_norm.weight"), s)
		freqs := b.ropeFactors(il)
		q, k = b.Rope(q, in.pos, freqs), b.Rope(k, in.pos, freqs)
		cur := b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, attnOpts{}))
		cur, inpSA := in.lastRows(b, il == len(m.Layers)-1, cur, inpL)
		ffnInp := b.Add(b.Scale(cur), inpSA)
		cur = b.ffn(blk, "", b.norm(ffnInp, blk+"ffn_norm.weight"), ffnSwiGLU)
		inpL = b.Add(b.Scale(cur), ffnInp)
	}
	return b.finish(b.Scale(b.output(m, inpL, b.norm)))
}
