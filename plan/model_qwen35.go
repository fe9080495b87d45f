package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file describes the graph llama.cpp builds for Qwen3.5 and 3.6
// (src/models/qwen35.cpp and qwen35moe.cpp on llm_build_delta_net_base):
// Qwen3-Next's layers with a dense SwiGLU FFN after the post-attention
// norm (or, for the MoE, Qwen3-Next's routed and shared experts), beta and
// alpha projected apart, and interleaved multi-section RoPE, whose
// positions are four rows a token. With the fused GATED_DELTA_NET node
// (cparams.fused_gdn_ar and _ch, on wherever the backend runs the op) the
// key heads are not repeated to the value heads: the op broadcasts them.

// qwen35Builder returns the graph builder for a Qwen3.5 model whose
// tensors are those the description reads, nil otherwise.
func qwen35Builder(m *arch.Model) graphBuilder {
	moe := m.Arch == "qwen35moe"
	if moe != (m.NExpert > 0) || m.NExpertUsed > m.NExpert || m.MLA || m.Window > 0 || m.NHead <= 0 || m.PosPerEmbd != 4 {
		return nil
	}
	t := deltaNetTensors{ffn: []string{"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"},
		ba: []string{"ssm_beta.weight", "ssm_alpha.weight"}, not: []string{"ssm_in.weight", "ssm_ba.weight", "ffn_gate_up_exps.weight"}}
	if moe {
		t.ffn = qwenMoETensors
	}
	d, ok := deltaNetLayers(m, t)
	if !ok {
		return nil
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
		return gatedDeltaNetGraph(m, c, nTokens, b, d, gdnOpts{qwen35: true, moe: moe})
	}
}

// qwen35DeltaNet is Qwen3.5's build_layer_attn_linear: beta and alpha
// from projections of their own, then the delta rule Qwen3-Next shares,
// without repeating the key heads.
func (r *rsGraph) qwen35DeltaNet(il int, cur *tensor, d qwen3nextDims) *tensor {
	b := r.b
	blk := blkName(il)
	T, S := r.nSeqTokens, r.nSeqs
	channels := 2*d.kHeads*d.state + d.vHeads*d.state
	qkv := b.Reshape(b.MulMat(b.weight(blk+"attn_qkv.weight"), cur), channels, T, S)
	z := b.MulMat(b.weight(blk+"attn_gate.weight"), cur)
	beta := b.UnaryOf(ggml.UnarySigmoid, b.Reshape(b.MulMat(b.weight(blk+"ssm_beta.weight"), cur), 1, d.vHeads, T, S))
	alpha := b.Reshape(b.MulMat(b.weight(blk+"ssm_alpha.weight"), cur), d.vHeads, T, S)
	alpha = b.UnaryOf(ggml.UnarySoftplus, b.Add(alpha, b.weight(blk+"ssm_dt.bias")))
	gate := b.Reshape(b.Mul(alpha, b.weight(blk+"ssm_a")), 1, d.vHeads, T, S)
	return r.deltaRule(il, d, qkv, z, beta, gate, false)
}
