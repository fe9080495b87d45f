package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/openai-moe-iswa.cpp (gpt-oss): iswa attention
// with per-head sinks and biases, experts with biases (ggml_add_id)
// weighted by a softmax over the selected logits, post_attention_norm
// before the FFN, and the output rows taken after the last layer.

// openaiMoEArch is what the mixture-of-experts check and frame take from this file.
func openaiMoEArch() moeArch {
	return moeArch{iswa: true, biases: true, ffnNorm: "post_attention_norm.weight", graph: openaiMoEGraph,
		tensors: func(func(string) bool) []string {
			return moeExperts("attn_output.bias", "attn_sinks.weight",
				"ffn_gate_inp.bias", "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias")
		}}
}

func openaiMoEGraph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	inpL := b.ropedMoE(m, c, in, openaiMoEArch(), true,
		func(blk string, cur *tensor) *tensor {
			return b.moeFFN(m, blk, cur, moeSpec{gating: moeSoftmaxWeight, expertBiases: true})
		})
	// Every row goes to the end of the last layer, whose output seeds a
	// draft head (t_h_nextn): a graph output the allocator never frees,
	// whether or not a draft runs. The output rows are taken from it.
	inpL = b.GetRows(inpL.SetOutput(), in.outIDs)
	return b.finish(b.output(m, inpL, b.norm))
}
