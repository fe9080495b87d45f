package graph

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

// qwen35 is Qwen3.5's family, the dense models' (qwen35) or the
// MoE's (qwen35moe); it describes a model whose tensors are those the
// description reads.
type qwen35 struct {
	moe bool
}

func (o qwen35) graphOf(m *arch.Model) graphFunc {
	moe := o.moe
	if moe != (m.NExpert > 0) || m.NExpertUsed > m.NExpert || m.MLA || m.Window > 0 || m.NHead <= 0 || m.PosPerEmbd != 4 {
		return nil
	}
	t := deltaNetTensors{ffn: []string{"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"},
		ba: []string{"ssm_beta.weight", "ssm_alpha.weight"}, not: []string{"ssm_in.weight", "ssm_ba.weight", "ffn_gate_up_exps.weight"}}
	if moe {
		t.ffn = qwenMoETensors()
	}
	d, ok := deltaNetLayers(m, t)
	if !ok {
		return nil
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
		return gatedDeltaNetGraph(m, c, nTokens, b, d, gdnOpts{qwen35: true, moe: moe})
	}
}
