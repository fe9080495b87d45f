package graph

import "github.com/headroom-llm/headroom/arch"

// This file holds what the graphs of DeepSeek's layout share: deepseek2
// (deepseek2.go), whose multi-head latent attention gives the helpers
// their prefix, and glm4moe (glm4moe.go), which keeps the layout's layers
// with llama-style attention. Both read their sizes from the tensors'
// shapes, run dense leading layers and then routed plus shared experts
// (llm_graph_context::build_moe_ffn), and leave out the trailing NextN
// blocks. Every tensor they record is one ggml creates, with ggml's type
// and shape; the sources are listed in ggml's order, because
// ggml_build_forward_expand records a node after its sources, depth
// first, and that order decides what the allocator can reuse.

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

// mlaFFNOf reads layer il's FFN; ok is false for a layout the replay
// does not describe (merged gate_up experts, a missing tensor).
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

// mlaLayerFFN is a layer's FFN: dense, or routed experts plus the shared
// experts' FFN, added.
func (b *gb) mlaLayerFFN(m *arch.Model, p string, x *tensor, f mlaFFN) *tensor {
	if !f.moe {
		return b.ffn(p, "", x, ffnSwiGLU)
	}
	// Softmax or sigmoid routing place the same: both may run in place.
	out := b.moeFFN(m, p, x, moeSpec{gating: moeSoftmax, normW: m.ExpertWeightsNorm,
		scale:  m.ExpertWeightsScale != 0 && m.ExpertWeightsScale != 1,
		groups: int64(m.ExpertGroups), groupsUsed: int64(m.ExpertGroupsUsed)})
	if f.ffShexp > 0 {
		out = b.Add(out, b.ffn(p, "_shexp", x, ffnSwiGLU))
	}
	return out
}
