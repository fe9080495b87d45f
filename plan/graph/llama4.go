package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/llama-iswa.cpp (llama4 with chunked
// attention): no RoPE on every fourth layer (n_no_rope_layer_step), which
// scales Q instead (temperature tuning); an unweighted RMS norm of Q and K
// after RoPE; sigmoid-weighted experts applied to the input, beside a
// shared expert; dense FFNs in the layers without experts.

// llama4Arch is what the mixture-of-experts check and frame take from this file.
func llama4Arch() moeArch {
	return moeArch{iswa: true, ffnNorm: "ffn_norm.weight", graph: llama4Graph,
		tensors: func(has func(string) bool) []string {
			if has("ffn_gate_inp.weight") {
				return moeWithShared()
			}
			return []string{"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}
		}}
}

func llama4Graph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	// build_inp_attn_scale: one factor per token.
	attnScale := b.Input("attn_scale", gguf.TypeF32, 1, 1, in.T)
	inpL := b.moeLayers(m, c, in, llama4Arch(), false,
		func(il int, cur *tensor, kv *kvInputs) *tensor {
			qk := func(q, k *tensor) (*tensor, *tensor) {
				if (il+1)%4 == 0 {
					return b.Mul(q, attnScale), k
				}
				// Llama4TextL2Norm: an RMS norm without weight
				return b.RMSNorm(b.Rope(q, in.pos, nil)), b.RMSNorm(b.Rope(k, in.pos, nil))
			}
			return b.moeAttention(m, c, il, cur, kv, qk, attnOpts{})
		},
		func(blk string, cur *tensor) *tensor {
			if !b.has(blk + "ffn_gate_inp.weight") {
				return b.ffn(blk, "", cur, ffnSwiGLU)
			}
			moe := b.moeFFN(m, blk, cur, moeSpec{gating: moeSigmoid, selectRaw: true, weightIn: true})
			return b.Add(moe, b.ffn(blk, "_shexp", cur, ffnSwiGLU))
		})
	return b.finish(b.output(m, inpL, b.norm))
}
