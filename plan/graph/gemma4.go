package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/gemma4.cpp for the dense models without
// per-layer embeddings (31B): Gemma 3's sliding and global layers over
// llama_kv_cache_iswa, each kind with its own head width and KV heads;
// Q and K normed per head, V RMS-normed without a weight, K doubling as V
// where a global layer has no attn_v; RoPE on the global layers through
// the rope_freqs table (proportional RoPE); no scaling of Q outside the
// attention; a layer output scale; the output rows taken after the final
// norm, and the logits soft-capped.

// gemma4 is Gemma 4's family.
type gemma4 struct{}

func (gemma4) graphOf(m *arch.Model) graphFunc {
	sliding, ok := swaLayersOf(m)
	if !ok || sliding == 0 || !hasTensor(m, "rope_freqs.weight") {
		return nil
	}
	ple := hasTensor(m, "per_layer_token_embd.weight")
	if ple && (!hasTensor(m, "per_layer_model_proj.weight") || !hasTensor(m, "per_layer_proj_norm.weight")) {
		return nil
	}
	for il, l := range m.Layers {
		blk := blkName(il)
		need := []string{"attn_q.weight", "attn_q_norm.weight", "post_attention_norm.weight",
			"ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "post_ffw_norm.weight"}
		switch {
		case l.KVShared && (l.KVLayer < 0 || l.KVLayer >= il):
			return nil
		case !l.KVShared:
			need = append(need, "attn_k.weight", "attn_k_norm.weight")
		}
		if ple {
			need = append(need, "inp_gate.weight", "proj.weight", "post_norm.weight")
		}
		for _, n := range need {
			if !hasTensor(m, blk+n) {
				return nil
			}
		}
		if hasTensor(m, blk+"attn_q.bias") {
			return nil
		}
		if hasTensor(m, blk+"ffn_gate_inp.weight") {
			if m.NExpert <= 0 || m.NExpertUsed <= 0 || !hasTensor(m, blk+"ffn_down_exps.weight") ||
				!(hasTensor(m, blk+"ffn_gate_up_exps.weight") || hasTensor(m, blk+"ffn_gate_exps.weight") && hasTensor(m, blk+"ffn_up_exps.weight")) {
				return nil
			}
			for _, n := range []string{"ffn_gate_inp.scale", "pre_ffw_norm_2.weight", "post_ffw_norm_1.weight", "post_ffw_norm_2.weight"} {
				if !hasTensor(m, blk+n) {
					return nil
				}
			}
		}
	}
	return gemma4Graph
}

// gemma4MoE is 26B-A4B's feed-forward: the dense MLP (the "shared
// expert") and the routed experts side by side on the attention output,
// each normed before and after, summed. The router runs on its own
// RMS norm of the residual, scaled by 1/sqrt(n_embd) and the router's
// scale; the experts' gate and up are one merged product (or two), GELU
// gated, their outputs scaled per expert.
func (b *gb) gemma4MoE(m *arch.Model, blk string, attnOut *tensor) *tensor {
	mlp := b.ffn(blk, "", b.norm(attnOut, blk+"ffn_norm.weight"), ffnSwiGLU)
	mlp = b.norm(mlp, blk+"post_ffw_norm_1.weight")
	moe := b.norm(attnOut, blk+"pre_ffw_norm_2.weight")
	tmp := b.Mul(b.Scale(b.RMSNorm(attnOut)), b.weight(blk+"ffn_gate_inp.scale"))
	logits := b.MulMat(b.weight(blk+"ffn_gate_inp.weight"), tmp)
	moe = b.moeFFN(m, blk, moe, moeSpec{gating: moeSoftmax, normW: true, logits: logits})
	moe = b.norm(moe, blk+"post_ffw_norm_2.weight")
	return b.Add(mlp, moe)
}

func gemma4Graph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	inpL := b.Scale(in.inpL)
	full, swa := b.iswaInputs(m, c, in.T, swaCells(m, c))
	var perLayerIn *tensor
	if b.has("per_layer_token_embd.weight") {
		perLayerIn = b.perLayerInputs(m, inpL, in.T)
	}
	for il, l := range m.Layers {
		blk := blkName(il)
		kv, freqs := full, (*tensor)(nil)
		if kvSliding(m, il) {
			kv = swa
		} else {
			freqs = b.ropeFactors(il)
		}
		s := layerShape(m, l, c, kv, in.T)
		cur := b.norm(inpL, blk+"attn_norm.weight")
		q := b.Reshape(b.MulMat(b.weight(blk+"attn_q.weight"), cur), s.headK, s.heads, s.T)
		q = b.Rope(b.norm(q, blk+"attn_q_norm.weight"), in.pos, freqs)
		var k, v *tensor
		cacheLayer := il
		if l.KVShared {
			// E2B's and E4B's last layers attend over an earlier
			// layer's cache, with no K or V of their own.
			cacheLayer = l.KVLayer
		} else {
			kp := b.MulMat(b.weight(blk+"attn_k.weight"), cur)
			vp := kp // attention_k_eq_v: no attn_v
			if b.has(blk + "attn_v.weight") {
				vp = b.MulMat(b.weight(blk+"attn_v.weight"), cur)
			}
			k = b.norm(b.Reshape(kp, s.headK, s.headsKV, s.T), blk+"attn_k_norm.weight")
			v = b.RMSNorm(b.Reshape(vp, s.headV, s.headsKV, s.T))
			k = b.Rope(k, in.pos, freqs)
		}
		cur = b.attnOut(blk, b.attn(cacheLayer, c, kv, s, q, k, v, attnOpts{}))
		attnOut := b.Add(b.norm(cur, blk+"post_attention_norm.weight"), inpL)
		if b.has(blk + "ffn_gate_inp.weight") {
			cur = b.gemma4MoE(m, blk, attnOut)
		} else {
			cur = b.ffn(blk, "", b.norm(attnOut, blk+"ffn_norm.weight"), ffnSwiGLU)
		}
		cur = b.Add(b.norm(cur, blk+"post_ffw_norm.weight"), attnOut)
		if perLayerIn != nil {
			// This layer's per-layer input, gated by its output.
			pe := b.Mul(b.UnaryOf(ggml.UnaryGELU, b.MulMat(b.weight(blk+"inp_gate.weight"), cur)), b.altSlice(perLayerIn, int64(il)))
			cur = b.Add(cur, b.norm(b.MulMat(b.weight(blk+"proj.weight"), pe), blk+"post_norm.weight"))
		}
		if b.has(blk + "layer_output_scale.weight") {
			cur = b.Mul(cur, b.weight(blk+"layer_output_scale.weight"))
		}
		inpL = cur
	}
	// The final norm is the graph's t_h_nextn output; the rows are taken
	// after it.
	cur := b.GetRows(b.norm(inpL, "output_norm.weight").SetOutput(), in.outIDs).SetOutput()
	b.embd = cur
	logits := b.MulMat(b.weight("output.weight", int64(m.NEmbd), int64(m.NVocab)), cur)
	if m.FinalSoftcap {
		logits = b.Scale(b.Unary(b.Scale(logits)))
	}
	return b.finish(logits)
}
