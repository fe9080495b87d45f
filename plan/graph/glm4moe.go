package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/glm4-moe.cpp: DeepSeek's layer layout
// (mla.go) with llama-style attention, biased Q, K and V projections, a
// post-attention norm before the FFN, and sigmoid-routed experts with a
// selection bias.

// glm4moe is GLM-4.5's family.
type glm4moe struct{}

func (glm4moe) graphOf(m *arch.Model) graphFunc {
	if glm4moeSupported(m, mlaShapes(tensorShapes(m))) {
		return glm4moeGraph
	}
	return nil
}

// glm4moeSupported checks that the model is the glm4moe this file
// describes: full attention with separate Q, K and V projections in every
// run layer, and FFNs it can read.
func glm4moeSupported(m *arch.Model, s mlaShapes) bool {
	n := mlaGraphLayers(m)
	if m.MLA || n == 0 || m.NHead <= 0 {
		return false
	}
	embd := int64(m.NEmbd)
	for il := 0; il < n; il++ {
		l := m.Layers[il]
		if l.Attention != arch.Full || l.Recurrent || l.HeadsKV <= 0 || l.KDim != l.VDim || l.KDim%l.HeadsKV != 0 {
			return false
		}
		p := blkName(il)
		headDim := int64(l.KDim / l.HeadsKV)
		if s.dim(p+"attn_q.weight", 1) != int64(m.NHead)*headDim || s.dim(p+"attn_k.weight", 1) != int64(l.KDim) ||
			s.dim(p+"attn_v.weight", 1) != int64(l.VDim) || s.dim(p+"attn_output.weight", 1) != embd ||
			!s.has(p+"post_attention_norm.weight") {
			return false
		}
		if s.has(p+"attn_q_norm.weight") != s.has(p+"attn_k_norm.weight") {
			return false
		}
		if _, ok := mlaFFNOf(m, s, il); !ok {
			return false
		}
	}
	return true
}

// glm4moeGraph is src/models/glm4-moe.cpp: llama-style attention with
// biased projections (and Q/K norms when present), a post-attention norm
// before the FFN, dense leading layers and routed plus shared experts;
// the NextN block at the end is not run.
func glm4moeGraph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in, kv := b.newKVBatch(m, c, nTokens)
	T, inpL, pos, outIDs := in.T, in.inpL, in.pos, in.outIDs
	s := mlaShapes(b.shapes)
	layers := mlaGraphLayers(m)
	for il := 0; il < layers; il++ {
		p := blkName(il)
		inpSA := inpL
		sh := layerShape(m, m.Layers[il], c, kv, T)
		q, k, v := b.qkv(p, b.norm(inpL, p+"attn_norm.weight"), sh)
		if b.has(p + "attn_q_norm.weight") {
			q, k = b.norm(q, p+"attn_q_norm.weight"), b.norm(k, p+"attn_k_norm.weight")
		}
		q, k = b.Rope(q, pos, nil), b.Rope(k, pos, nil)
		cur := b.attnOut(p, b.attn(il, c, kv, sh, q, k, v, attnOpts{}))
		if il == layers-1 {
			cur, inpSA = b.GetRows(cur, outIDs), b.GetRows(inpSA, outIDs)
		}
		ffnInp := b.Add(cur, inpSA)
		f, _ := mlaFFNOf(m, s, il)
		inpL = b.Add(b.mlaLayerFFN(m, p, b.norm(ffnInp, p+"post_attention_norm.weight"), f), ffnInp)
	}
	return b.finish(b.output(m, inpL, b.norm))
}
