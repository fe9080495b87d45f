package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/phi3.cpp: one fused QKV projection and one
// fused gate-and-up projection; the sliding window is off
// (load_arch_hparams sets swa_type to NONE), so one cache.

// phi3 is Phi-3's family. It describes the fused QKV layout only:
// separate projections and the MoE branch are other graphs.
type phi3 struct{}

func (phi3) graphOf(m *arch.Model) graphFunc {
	sliding, ok := swaLayersOK(m)
	if !ok || sliding > 0 || !hasTensor(m, "blk.0.attn_qkv.weight") || hasTensor(m, "blk.0.ffn_gate_inp.weight") {
		return nil
	}
	return phi3Graph
}

func phi3Graph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in, kv := b.newKVBatch(m, c, nTokens)
	T, inpL, pos, outIDs := in.T, in.inpL, in.pos, in.outIDs
	freqs := b.ropeFactorsAny()
	for il, l := range m.Layers {
		blk := blkName(il)
		s := layerShape(m, l, c, kv, T)
		resid := inpL
		qkv := b.MulMat(b.weight(blk+"attn_qkv.weight"), b.norm(inpL, blk+"attn_norm.weight"))
		// views into the fused result; RoPE makes Q and K contiguous
		// again, V stays strided
		q := b.Rope(b.View(qkv, s.headK, s.heads, T), pos, freqs)
		k := b.Rope(b.View(qkv, s.headK, s.headsKV, T), pos, freqs)
		v := b.View(qkv, s.headV, s.headsKV, T)
		q = b.Scale(q) // 1/sqrt(head)
		cur := b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, attnOpts{vStrided: true}))
		if il == len(m.Layers)-1 {
			cur, resid = b.GetRows(cur, outIDs), b.GetRows(resid, outIDs)
		}
		resid = b.Add(cur, resid)
		cur = b.ffn(blk, "", b.norm(resid, blk+"ffn_norm.weight"), ffnFusedGLU)
		inpL = b.Add(resid, cur)
	}
	logits := b.output(m, inpL, b.norm)
	if b.has("output.bias") {
		logits = b.Add(logits, b.weight("output.bias"))
	}
	return b.finish(logits)
}
