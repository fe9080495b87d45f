package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/minimax-m2.cpp: llama's attention with RMS
// norms over the whole Q and K projections before they are split into
// heads, RoPE on part of each head (rope.dimension_count; the op keeps
// the head's shape), and sigmoid-routed experts with a selection bias and
// their weights normalized, no shared expert.

// minimaxM2Arch is what the mixture-of-experts check and frame take from
// this file.
func minimaxM2Arch() moeArch {
	return moeArch{ffnNorm: "ffn_norm.weight", graph: minimaxM2Graph,
		tensors: func(has func(string) bool) []string {
			if !has("attn_q_norm.weight") || !has("exp_probs_b.bias") {
				return nil
			}
			return moeExperts("attn_q_norm.weight", "attn_k_norm.weight", "exp_probs_b.bias")
		}}
}

func minimaxM2Graph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	attention := func(il int, cur *tensor, kv *kvInputs) *tensor {
		blk := blkName(il)
		s := layerShape(m, m.Layers[il], c, kv, cur.Ne()[1])
		s.heads = b.weight(blk + "attn_q.weight").Ne()[1] / s.headK
		q := b.MulMat(b.weight(blk+"attn_q.weight"), cur)
		k := b.MulMat(b.weight(blk+"attn_k.weight"), cur)
		v := b.MulMat(b.weight(blk+"attn_v.weight"), cur)
		q, k = b.norm(q, blk+"attn_q_norm.weight"), b.norm(k, blk+"attn_k_norm.weight")
		q = b.Rope(b.Reshape(q, s.headK, s.heads, s.T), in.pos, nil)
		k = b.Rope(b.Reshape(k, s.headK, s.headsKV, s.T), in.pos, nil)
		v = b.Reshape(v, s.headV, s.headsKV, s.T)
		return b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, attnOpts{}))
	}
	ffn := func(blk string, cur *tensor) *tensor {
		return b.moeFFN(m, blk, cur, moeSpec{gating: moeSigmoid, normW: true})
	}
	inpL := b.moeLayers(m, c, in, minimaxM2Arch(), false, attention, ffn)
	return b.finish(b.output(m, inpL, b.norm))
}
