package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/qwen3moe.cpp: per-head Q and K norms, and
// softmax-routed experts whose weights are normalized to sum to one.

// qwen3moeArch is what the mixture-of-experts check and frame take from this file.
func qwen3moeArch() moeArch {
	return moeArch{ffnNorm: "ffn_norm.weight", graph: qwen3moeGraph,
		tensors: func(has func(string) bool) []string {
			if !has("attn_q_norm.weight") {
				return nil
			}
			return moeExperts("attn_q_norm.weight", "attn_k_norm.weight")
		}}
}

func qwen3moeGraph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	inpL := b.ropedMoE(m, c, in, qwen3moeArch(), false,
		func(blk string, cur *tensor) *tensor {
			return b.moeFFN(m, blk, cur, moeSpec{gating: moeSoftmax, normW: true})
		})
	return b.finish(b.output(m, inpL, b.norm))
}
