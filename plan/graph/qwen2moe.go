package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/qwen2moe.cpp: softmax-routed experts beside a
// shared expert behind a one-row sigmoid gate.

// qwen2moeArch is what the mixture-of-experts check and frame take from this file.
func qwen2moeArch() moeArch {
	return moeArch{ffnNorm: "ffn_norm.weight", graph: qwen2moeGraph,
		tensors: func(func(string) bool) []string {
			return moeWithShared("ffn_gate_inp_shexp.weight")
		}}
}

func qwen2moeGraph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	inpL := b.ropedMoE(m, c, in, qwen2moeArch(), false,
		func(blk string, cur *tensor) *tensor {
			// the shared expert scaled by sigmoid(x·g), computed as silu(v)/v
			sh := b.ffn(blk, "_shexp", cur, ffnSwiGLU)
			gin := b.MulMat(b.weight(blk+"ffn_gate_inp_shexp.weight"), cur)
			return b.Add(b.moeFFN(m, blk, cur, moeSpec{gating: moeSoftmax}), b.Mul(sh, b.Div(b.UnaryOf(ggml.UnarySiLU, gin), gin)))
		})
	return b.finish(b.output(m, inpL, b.norm))
}
