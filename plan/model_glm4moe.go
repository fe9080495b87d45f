package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file describes llama.cpp's graphs for deepseek2 (src/models/
// deepseek2.cpp: multi-head latent attention in its absorbed form, where
// the cache holds the compressed latent and the rope part of K) and
// glm4moe (src/models/glm4-moe.cpp: biased Q/K/V, a post-attention norm,
// sigmoid-routed experts with a selection bias), both with the MoE FFN of
// llm_graph_context::build_moe_ffn and shared experts. Every tensor below
// is one ggml creates, with ggml's type and shape; the sources are listed
// in ggml's order, because ggml_build_forward_expand records a node after
// its sources, depth first, and that order decides what the allocator can
// reuse.

// glm4moeBuilder returns the graph builder for glm4moe, nil for a model
// it does not describe.
func glm4moeBuilder(m *arch.Model) graphBuilder {
	if mlaGLMSupported(m, mlaShapes(tensorShapes(m))) {
		return mlaGLM4MoEGraph
	}
	return nil
}

// mlaShapes are the model's tensor shapes by name.
type mlaShapes map[string][]uint64

// dim is the i-th dimension of a tensor, 0 when the tensor or the
// dimension is absent.
func (s mlaShapes) dim(name string, i int) int64 {
	sh, ok := s[name]
	if !ok || i >= len(sh) {
		return 0
	}
	return int64(sh[i])
}

func (s mlaShapes) has(name string) bool {
	_, ok := s[name]
	return ok
}

// mlaGraphLayers is the number of blocks the graph runs: llama.cpp's
// n_layer, which leaves out the trailing NextN (multi-token prediction)
// blocks whose weights the loader skips.
func mlaGraphLayers(m *arch.Model) int {
	skipped := make([]bool, m.NLayer)
	for _, t := range m.Tensors {
		if t.Unused && t.Layer >= 0 && t.Layer < m.NLayer {
			skipped[t.Layer] = true
		}
	}
	n := m.NLayer
	for n > 0 && skipped[n-1] {
		n--
	}
	return n
}

// mlaFFN describes one layer's feed-forward block, read from its tensors.
type mlaFFN struct {
	moe       bool
	ff        int64 // dense width
	ffExp     int64 // each routed expert's width
	ffShexp   int64 // the shared experts' width (0: none)
	probsBias bool  // exp_probs_b, the selection bias
}

// mlaFFNOf reads layer il's FFN; ok is false for a layout this file does
// not describe (merged gate_up experts, a missing tensor).
func mlaFFNOf(m *arch.Model, s mlaShapes, il int) (mlaFFN, bool) {
	p := blkName(il)
	var f mlaFFN
	embd := int64(m.NEmbd)
	if !s.has(p + "ffn_gate_inp.weight") {
		f.ff = s.dim(p+"ffn_up.weight", 1)
		ok := f.ff > 0 && s.dim(p+"ffn_gate.weight", 1) == f.ff && s.dim(p+"ffn_down.weight", 0) == f.ff
		return f, ok
	}
	f.moe = true
	nExp := int64(m.NExpert)
	f.ffExp = s.dim(p+"ffn_up_exps.weight", 1)
	if f.ffExp == 0 || m.NExpertUsed <= 0 || nExp <= 0 ||
		s.dim(p+"ffn_gate_exps.weight", 1) != f.ffExp || s.dim(p+"ffn_down_exps.weight", 0) != f.ffExp ||
		s.dim(p+"ffn_up_exps.weight", 2) != nExp || s.dim(p+"ffn_gate_inp.weight", 1) != nExp ||
		s.dim(p+"ffn_gate_inp.weight", 0) != embd {
		return f, false
	}
	if s.has(p + "ffn_up_shexp.weight") {
		f.ffShexp = s.dim(p+"ffn_up_shexp.weight", 1)
		if f.ffShexp == 0 || s.dim(p+"ffn_gate_shexp.weight", 1) != f.ffShexp || s.dim(p+"ffn_down_shexp.weight", 0) != f.ffShexp {
			return f, false
		}
	}
	f.probsBias = s.has(p + "exp_probs_b.bias")
	return f, true
}

// mlaGLMSupported checks that the model is the glm4moe this file
// describes: full attention with separate Q, K and V projections in every
// run layer, and FFNs it can read.
func mlaGLMSupported(m *arch.Model, s mlaShapes) bool {
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

// mlaLayerFFN is a layer's FFN: dense, or routed experts plus the shared
// experts' FFN, added.
func (b *gb) mlaLayerFFN(m *arch.Model, p string, x *tensor, f mlaFFN) *tensor {
	if !f.moe {
		return b.ffn(p, "", x, ffnSwiGLU)
	}
	// Softmax or sigmoid routing place the same: both may run in place.
	out := b.moeFFN(m, p, x, moeSpec{gating: moeSoftmax})
	if f.ffShexp > 0 {
		out = b.Add(out, b.ffn(p, "_shexp", x, ffnSwiGLU))
	}
	return out
}

// mlaGLM4MoEGraph is src/models/glm4-moe.cpp: llama-style attention with
// biased projections (and Q/K norms when present), a post-attention norm
// before the FFN, dense leading layers and routed plus shared experts;
// the NextN block at the end is not run.
func mlaGLM4MoEGraph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
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
