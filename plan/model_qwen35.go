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
	shapes := tensorShapes(m)
	var d qwen3nextDims
	for il, l := range m.Layers {
		blk := blkName(il)
		need := []string{"attn_norm.weight", "post_attention_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}
		if moe {
			need = []string{"attn_norm.weight", "post_attention_norm.weight", "ffn_gate_inp.weight", "ffn_gate_exps.weight",
				"ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight",
				"ffn_up_shexp.weight", "ffn_down_shexp.weight"}
		}
		switch {
		case l.Recurrent && l.Attention == arch.NoAttention:
			need = append(need, "attn_qkv.weight", "attn_gate.weight", "ssm_conv1d.weight", "ssm_dt.bias", "ssm_a",
				"ssm_beta.weight", "ssm_alpha.weight", "ssm_norm.weight", "ssm_out.weight")
			ld, ok := deltaNetDims(shapes, blk, l)
			if !ok || (d != qwen3nextDims{} && d != ld) {
				return nil
			}
			d = ld
		case !l.Recurrent && l.Attention == arch.Full && l.HeadsKV > 0 && l.KDim == l.VDim && l.KDim%l.HeadsKV == 0:
			need = append(need, "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
				"attn_q_norm.weight", "attn_k_norm.weight")
		default:
			return nil
		}
		for _, n := range need {
			if _, ok := shapes[blk+n]; !ok {
				return nil
			}
		}
		for _, n := range []string{"ssm_in.weight", "ssm_ba.weight", "ffn_gate_up_exps.weight", "attn_qkv.bias", "attn_q.bias"} {
			if _, ok := shapes[blk+n]; ok {
				return nil
			}
		}
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
		return qwen35Graph(m, c, nTokens, b, d, moe)
	}
}

func qwen35Graph(m *arch.Model, c Context, nTokens int, b *gb, d qwen3nextDims, moe bool) *ggml.Graph {
	r := newRSGraph(m, c, nTokens, b)
	inpL := r.inpL
	r.attnInputs()
	for il, l := range m.Layers {
		blk := blkName(il)
		cur := b.norm(inpL, blk+"attn_norm.weight")
		b.Expand(cur)
		if l.Recurrent {
			cur = r.qwen35DeltaNet(il, cur, d)
		} else {
			cur = r.gatedAttention(il, cur, false)
		}
		res := b.Add(cur, inpL)
		cur = b.norm(res, blk+"post_attention_norm.weight")
		if moe {
			cur = b.qwenMoE(m, blk, cur)
		} else {
			cur = b.ffn(blk, "", cur, ffnSwiGLU)
		}
		inpL = b.Add(cur, res)
	}
	return r.output(inpL, "output_norm.weight", true)
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
