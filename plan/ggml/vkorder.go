package ggml

import "slices"

// This file is ggml_vk_graph_optimize (ggml-vulkan.cpp at the engine's
// commit): before the scheduler allocates a Vulkan split, the Vulkan
// backend reorders its nodes so that independent ones run together and
// fusable ones stay adjacent. The allocator then places the tensors in
// that order, which keeps some alive longer (Q, K and V projections
// together, say): the compute buffer follows the reordered graph, not the
// one llama.cpp built.

// nodeKind is the op of t, a leaf's being GGML_OP_NONE.
func nodeKind(t *Tensor) Op {
	if t.cls == leaf || t.external {
		return None
	}
	return t.op
}

// vkIsSrcOf is is_src_of: whether dst must run after src.
func vkIsSrcOf(dst, src *Tensor) bool {
	ds, ss := dst.src, src.src
	emptyPair := nodeKind(dst).empty() || nodeKind(src).empty()
	for s := 0; s < max(len(ds), len(ss)); s++ {
		if s < len(ds) && ds[s] == src {
			return true
		}
		if emptyPair {
			continue
		}
		if s < len(ds) && ds[s].owner() == src.owner() {
			return true
		}
		if s < len(ss) && dst.owner() == ss[s].owner() {
			return true
		}
	}
	return dst.owner() == src.owner()
}

// vkOrder is one reorder under way: the split's nodes and their ops, the
// nodes placed so far, and the set being gathered.
type vkOrder struct {
	nodes []*Tensor
	kind  []Op
	used  []bool
	inNew map[*Tensor]bool
	set   []int
	// fusion is the reorder of llama.cpp v0.5.0 and later (Rules.VulkanFusion),
	// and deps the allocation dependencies it adds.
	fusion bool
	deps   []AllocDep
	// patterns are the runs the fusing reorder keeps together (none
	// before v0.5.0), built once per reorder.
	patterns []vkPattern
}

// AllocDep is an allocation dependency a backend adds in its
// graph_optimize (ggml_backend_graph_optimize_params.add_alloc_dep): the scheduler keeps
// Keep alive until Until has run, with a GGML_OP_NONE node after Until
// that reads them.
type AllocDep struct {
	Until *Tensor
	Keep  []*Tensor
}

// vkCheck is how many nodes past the first unplaced one the reorder looks
// at (num_to_check).
const vkCheck = 20

// vkReorder reorders the nodes of one Vulkan split in place, by the rules
// of v0.4.0, or of v0.5.0 with fusion, and returns the allocation
// dependencies it adds.
func vkReorder(nodes []*Tensor, fusion bool) []AllocDep {
	n := len(nodes)
	if n == 0 {
		return nil
	}
	r := &vkOrder{nodes: nodes, kind: make([]Op, n), used: make([]bool, n), inNew: map[*Tensor]bool{},
		fusion: fusion}
	if fusion {
		r.patterns = vkPatterns()
	}
	for i, t := range nodes {
		r.kind[i] = nodeKind(t)
	}
	order := make([]*Tensor, 0, n)
	place := func(c int) {
		order = append(order, nodes[c])
		r.inNew[nodes[c]] = true
		r.used[c] = true
	}
	for first := 0; first < n; {
		if p := r.keep(first); p > 0 {
			for c := first; c < first+p; c++ {
				place(c)
			}
			for first < n && r.used[first] {
				first++
			}
			continue
		}
		r.set = append(r.set[:0], first)
		for j := first + 1; j < min(first+vkCheck, n); j++ {
			if r.used[j] || r.kind[j].empty() || r.startsPattern(j) || !r.ready(first, j) {
				continue
			}
			r.set = append(r.set, j)
			ropeIdx := r.pullRope(j)
			r.pullSetRows(ropeIdx)
			r.pull(j, MulMatID, AddID, Mul, true)
			r.pull(j, MulMat, Add, Add, true)
			r.pull(j, SSMConv, Add, Unary, false)
			r.pullUnaryMul(j)
		}
		// Views next, unless that would split an ADD from what follows.
		if r.kind[r.set[len(r.set)-1]] != Add {
			r.addViews(first)
		}
		for _, c := range r.set {
			place(c)
		}
		for first < n && r.used[first] {
			first++
		}
	}
	copy(nodes, order)
	return r.deps
}

// fuses says whether node j may run right after node c, its source,
// because the backend fuses the two. From v0.5.0 an RMS_NORM or UNARY
// and the MUL reading it fuse across nodes that are placed or compute
// nothing (empty_or_scheduled_between).
func (r *vkOrder) fuses(c, j int) bool {
	a, b := r.kind[c], r.kind[j]
	if r.fusion && b == Mul && (a == RMSNorm || a == Unary) {
		for v := c + 1; v < j; v++ {
			if !r.used[v] && !r.kind[v].empty() {
				return false
			}
		}
		return true
	}
	return j == c+1 && (a == RMSNorm && b == Mul || a == MulMat && b == Add || a == MulMatID && b == AddID ||
		a == MulMatID && b == Mul || a == Add && b == Add || a == SSMConv && b == Add || a == SSMConv && b == Unary)
}

// ready says whether node j depends on no unplaced node from first on,
// but the set's last when the two fuse.
func (r *vkOrder) ready(first, j int) bool {
	for c := first; c < j; c++ {
		if !r.used[c] && vkIsSrcOf(r.nodes[j], r.nodes[c]) && !(c == r.set[len(r.set)-1] && r.fuses(c, j)) {
			return false
		}
	}
	return true
}

// srcKind is the op of node t's i-th source, if it has one.
func (r *vkOrder) srcKind(t *Tensor, i int) (Op, bool) {
	if i >= len(t.src) {
		return None, false
	}
	return nodeKind(t.src[i]), true
}

// take adds node k to the set.
func (r *vkOrder) take(k int) {
	r.set = append(r.set, k)
	r.used[k] = true
}

// pullRope is RMS_NORM + MUL pulling in the ROPE that reads it; it
// returns the ROPE's index, or j.
func (r *vkOrder) pullRope(j int) int {
	n := len(r.nodes)
	if j == 0 || r.kind[j] != Mul || r.kind[j-1] != RMSNorm {
		return j
	}
	for k := j + 1; k < min(j+15, n); k++ {
		s0 := r.nodes[k].src
		k1, _ := r.srcKind(r.nodes[k], 1)
		k2, has2 := r.srcKind(r.nodes[k], 2)
		if r.kind[k] == Rope && len(s0) > 0 && s0[0] == r.nodes[j] && k1 == None && (!has2 || k2 == None) {
			r.take(k)
			return k
		}
	}
	return j
}

// pullSetRows keeps ROPE, the VIEW of it and the SET_ROWS of that view
// together. From v0.5.0 an RMS_NORM starts the run too, the search
// looks further and past placed nodes, the three must be fusable
// (ggml_can_fuse_subgraph_ext) and nothing unplaced between them may feed
// the SET_ROWS.
func (r *vkOrder) pullSetRows(head int) {
	if k := r.kind[head]; k != Rope && !(r.fusion && k == RMSNorm) {
		return
	}
	window := 10
	if r.fusion {
		window = 15
	}
	view, set := -1, -1
	for k := head + 1; k < min(head+window, len(r.nodes)); k++ {
		if r.fusion && r.used[k] {
			continue
		}
		s := r.nodes[k].src
		if view == -1 && r.kind[k] == View && len(s) > 0 && s[0] == r.nodes[head] {
			view = k
			continue
		}
		if view != -1 && r.kind[k] == SetRows && len(s) > 0 && s[0] == r.nodes[view] {
			set = k
			break
		}
	}
	if set == -1 || r.fusion && !r.setRowsFuse(head, view, set) {
		return
	}
	r.take(view)
	r.take(set)
}

// setRowsFuse is v0.5.0's guard on pulling head, view and set together.
func (r *vkOrder) setRowsFuse(head, view, set int) bool {
	if !r.canFuse([]int{head, view, set}, set) {
		return false
	}
	for c := head + 1; c < set; c++ {
		if !r.used[c] && c != view && !r.kind[c].empty() && vkIsSrcOf(r.nodes[set], r.nodes[c]) {
			return false
		}
	}
	return true
}

// pull is MUL_MAT_ID + ADD_ID + MUL, MUL_MAT + ADD + ADD and SSM_CONV +
// ADD + UNARY: node j of op this after one of op prev pulls in the next
// node of op next that reads it (whose other source, with srcReady, must
// already be placed).
func (r *vkOrder) pull(j int, prev, this, next Op, srcReady bool) {
	if j == 0 || r.kind[j] != this || r.kind[j-1] != prev {
		return
	}
	for k := j + 1; k < min(j+15, len(r.nodes)); k++ {
		s := r.nodes[k].src
		if r.kind[k] != next || len(s) == 0 || s[0] != r.nodes[j] {
			continue
		}
		if srcReady && len(s) > 1 && nodeKind(s[1]) != None && !r.inNew[s[1]] {
			continue
		}
		r.take(k)
		return
	}
}

// addViews adds the empty nodes that depend on nothing unplaced outside
// the set.
func (r *vkOrder) addViews(first int) {
	for j := first + 1; j < min(first+vkCheck, len(r.nodes)); j++ {
		if r.used[j] || !r.kind[j].empty() {
			continue
		}
		ok := true
		for c := first; c < j && ok; c++ {
			ok = r.used[c] || !vkIsSrcOf(r.nodes[j], r.nodes[c]) || slices.Contains(r.set, c)
		}
		if ok {
			r.set = append(r.set, j)
		}
	}
}
