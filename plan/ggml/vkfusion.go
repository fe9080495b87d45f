package ggml

import (
	"slices"

	"github.com/headroom-llm/headroom/gguf"
)

// This file holds what v0.5.0 added to ggml_vk_graph_optimize: runs of
// ops the backend fuses are kept in place where they start the unplaced
// nodes and are never pulled apart, an UNARY pulls in the MUL that reads
// it, and a top-k MoE selection keeps its inputs alive until it ends.

// vkPattern is a run of ops (the ggml-vulkan-types.h lists) that the
// reorder keeps together.
type vkPattern struct {
	ops []Op
	// topK marks a top-k MoE selection: the backend fuses it into one
	// shader that reads its inputs until its last node (or the SCALE
	// after it) has run, so the reorder adds allocation dependencies.
	topK bool
}

// vkPatterns are the runs in the order keep_pattern tries them. The snake
// activation (MUL, SIN, SQR, MUL, ADD) and the top-k sparse-attention run
// (GET_ROWS ... TOP_K) hold ops no replayed architecture records, so they
// cannot match here and are left out.
func vkPatterns() []vkPattern {
	return []vkPattern{
		{topK: true, ops: []Op{SoftMax, Reshape, Argsort, View, GetRows, Reshape, SumRows, Clamp, Div, Reshape}},
		{topK: true, ops: []Op{Unary, Reshape, Add, Argsort, View, GetRows, Reshape, SumRows, Clamp, Div, Reshape}},
		{topK: true, ops: []Op{Unary, Sqrt, Reshape, Add, Argsort, View, GetRows, Reshape, SumRows, Clamp, Div, Reshape}},
		{topK: true, ops: []Op{SoftMax, Reshape, Argsort, View, GetRows}},
		{topK: true, ops: []Op{Argsort, View, GetRows, Reshape, SoftMax, Reshape}},
		{ops: []Op{RMSNorm, Mul, Add, Mul}},
		{ops: []Op{RMSNorm, Mul, Add}},
		{ops: []Op{RMSNorm, Mul, Rope, View, SetRows}},
		{ops: []Op{RMSNorm, View, SetRows}},
		{ops: []Op{Rope, View, SetRows}},
	}
}

// match is match_pattern: the unplaced nodes from start are p's ops.
func (r *vkOrder) match(p vkPattern, start int) bool {
	if start+len(p.ops) > len(r.nodes) {
		return false
	}
	for i, op := range p.ops {
		if r.kind[start+i] != op || r.used[start+i] {
			return false
		}
	}
	return true
}

// keep is keep_pattern at the first unplaced node: the length of the run
// that starts there, 0 for none (and always 0 before v0.5.0). A top-k
// run adds its dependencies first.
func (r *vkOrder) keep(first int) int {
	for _, p := range r.patterns {
		if !r.match(p, first) {
			continue
		}
		if p.topK {
			r.keepInputs(first, len(p.ops))
		}
		return len(p.ops)
	}
	return 0
}

// keepInputs is add_pattern_alloc_deps: every source from outside the run
// stays alive until the run's last node, or the SCALE right after it,
// which the backend fuses too.
func (r *vkOrder) keepInputs(first, n int) {
	last := first + n - 1
	if last+1 < len(r.nodes) && r.kind[last+1] == Scale {
		last++
	}
	seen := map[*Tensor]bool{}
	dep := AllocDep{Until: r.nodes[last]}
	for j := first; j < first+n; j++ {
		for _, s := range r.nodes[j].src {
			if s != nil && !seen[s] {
				seen[s] = true
				dep.Keep = append(dep.Keep, s)
			}
		}
		seen[r.nodes[j]] = true
	}
	if len(dep.Keep) > 0 {
		r.deps = append(r.deps, dep)
	}
}

// startsPattern says whether node j starts a run the reorder keeps
// together, so that it is not pulled away from the rest.
func (r *vkOrder) startsPattern(j int) bool {
	for _, p := range r.patterns {
		if r.match(p, j) {
			return true
		}
	}
	return false
}

// canFuse is ggml_can_fuse_subgraph_ext for nodes idx with one output.
func (r *vkOrder) canFuse(idx []int, out int) bool { return canFuseSubgraph(r.nodes, idx, out) }

// canFuseSubgraph is ggml_can_fuse_subgraph_ext over nodes idx of a
// split with outputs outs: every other node is used only inside the run
// (its use count in the whole graph equals its uses by later nodes of the
// run), is no graph output, and views only the run's nodes or weights.
func canFuseSubgraph(nodes []*Tensor, idx []int, outs ...int) bool {
	for i, a := range idx {
		if slices.Contains(outs, a) {
			continue
		}
		t := nodes[a]
		if t.output {
			return false
		}
		var inside int32
		for _, b := range idx[i+1:] {
			for _, s := range nodes[b].src {
				if s == t {
					inside++
				}
			}
		}
		if inside != t.uses {
			return false
		}
		if t.cls == view && t.view != nil && !t.view.isWeight {
			in := false
			for _, b := range idx {
				in = in || nodes[b] == t.view
			}
			if !in {
				return false
			}
		}
	}
	return true
}

// pullUnaryMul is v0.5.0's UNARY + MUL: an UNARY the backend can fuse
// pulls in the MUL that reads it, once the MUL's other source is placed.
func (r *vkOrder) pullUnaryMul(j int) {
	if !r.fusion || j == 0 || r.kind[j] != Unary {
		return
	}
	u := r.nodes[j]
	for k := j + 1; k < min(j+15, len(r.nodes)); k++ {
		m := r.nodes[k]
		if r.kind[k] != Mul || len(m.src) < 2 || (m.src[0] != u && m.src[1] != u) {
			continue
		}
		other := m.src[0]
		if other == u {
			other = m.src[1]
		}
		if nodeKind(other) != None && !r.inNew[other] {
			continue
		}
		if !vkUnaryMulFuses(u, m) {
			continue
		}
		r.take(k)
		return
	}
}

// vkUnaryMulFuses is ggml_vk_can_fuse_unary_mul: a GELU, SIGMOID, SILU or
// SOFTPLUS in F32 or F16, the MUL and its other source of the same type,
// rows contiguous, and the smaller of the two tiling the other.
func vkUnaryMulFuses(u, m *Tensor) bool {
	if u.unary == UnaryOther {
		return false
	}
	t := u.layout.typ
	if t != gguf.TypeF32 && t != gguf.TypeF16 || m.layout.typ != t {
		return false
	}
	other := m.src[0]
	if other == u {
		other = m.src[1]
	}
	if other == nil || other.layout.typ != t || len(u.src) == 0 || !contiguousRows(other) || !contiguousRows(u.src[0]) {
		return false
	}
	if m.src[0] == u {
		return canRepeat(other, u)
	}
	return canRepeat(u, m.src[0])
}

// contiguousRows approximates ggml_is_contiguous_1 with what the graph
// descriptions record: a permuted or transposed view is not contiguous
// along its rows; every other tensor here is (a strided view of whole
// rows may skip between rows, which contiguous_1 allows).
func contiguousRows(t *Tensor) bool {
	return t.op != Permute && t.op != Transpose
}

// canRepeat is ggml_can_repeat(a, b): a tiles b.
func canRepeat(a, b *Tensor) bool {
	for i := range 4 {
		x, y := max(a.layout.ne[i], 1), max(b.layout.ne[i], 1)
		if y%x != 0 {
			return false
		}
	}
	return true
}
