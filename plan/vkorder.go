package plan

// This file is ggml_vk_graph_optimize (ggml-vulkan.cpp at the engine's
// commit): before the scheduler allocates a Vulkan split, the Vulkan
// backend reorders its nodes so that independent ones run together and
// fusable ones stay adjacent. The allocator then places the tensors in
// that order, which keeps some alive longer (Q, K and V projections
// together, say): the compute buffer follows the reordered graph, not the
// one llama.cpp built. Only graphs whose builder records every node's
// ggml op (graph.kinds) are reordered; the others keep the built order.

// ggmlOp is the ggml op of a graph node, as far as the reorder tells them
// apart. The zero value is an op it does not look at.
type ggmlOp uint8

const (
	kOther   ggmlOp = iota
	kNone           // GGML_OP_NONE: leaves
	kReshape        // RESHAPE, PERMUTE, TRANSPOSE: empty, but not VIEW
	kView           // GGML_OP_VIEW
	kRMSNorm
	kMul
	kAdd
	kMulMat
	kMulMatID
	kAddID
	kRope
	kSetRows
	kSSMConv
	kUnary
)

// empty is is_empty: an op that computes nothing.
func (k ggmlOp) empty() bool { return k == kNone || k == kReshape || k == kView }

// nodeKind is the op of t, a leaf being GGML_OP_NONE.
func nodeKind(t *gtensor) ggmlOp {
	if t.op == opNone || t.external {
		return kNone
	}
	if t.kind == kOther && t.op == opView && len(t.src) <= 1 && !t.inplace {
		return kReshape
	}
	return t.kind
}

// base is the tensor whose memory t uses.
func base(t *gtensor) *gtensor {
	if t.op == opView && t.view != nil {
		return t.view
	}
	return t
}

// vkIsSrcOf is is_src_of: whether dst must run after src.
func vkIsSrcOf(dst, src *gtensor) bool {
	ds, ss := dst.src, src.src
	emptyPair := nodeKind(dst).empty() || nodeKind(src).empty()
	for s := 0; s < max(len(ds), len(ss)); s++ {
		if s < len(ds) && ds[s] == src {
			return true
		}
		if emptyPair {
			continue
		}
		if s < len(ds) && base(ds[s]) == base(src) {
			return true
		}
		if s < len(ss) && base(dst) == base(ss[s]) {
			return true
		}
	}
	return base(dst) == base(src)
}

// vkReorder reorders the nodes of one Vulkan split in place.
func vkReorder(nodes []*gtensor) {
	n := len(nodes)
	if n == 0 {
		return
	}
	kind := make([]ggmlOp, n)
	for i, t := range nodes {
		kind[i] = nodeKind(t)
	}
	srcKind := func(t *gtensor, i int) (ggmlOp, bool) {
		s := t.src
		if i >= len(s) {
			return kNone, false
		}
		return nodeKind(s[i]), true
	}
	used := make([]bool, n)
	inNew := map[*gtensor]bool{}
	order := make([]*gtensor, 0, n)
	first := 0
	const numToCheck = 20
	fusable := func(c, j int) bool {
		a, b := kind[c], kind[j]
		return a == kRMSNorm && b == kMul || a == kMulMat && b == kAdd || a == kMulMatID && b == kAddID ||
			a == kMulMatID && b == kMul || a == kAdd && b == kAdd || a == kSSMConv && b == kAdd || a == kSSMConv && b == kUnary
	}
	for first < n {
		set := []int{first}
		for j := first + 1; j < min(first+numToCheck, n); j++ {
			if used[j] || kind[j].empty() {
				continue
			}
			ok := true
			for c := first; c < j; c++ {
				if !used[c] && vkIsSrcOf(nodes[j], nodes[c]) && !(j == c+1 && c == set[len(set)-1] && fusable(c, j)) {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			set = append(set, j)
			ropeIdx := j
			// RMS_NORM + MUL: pull in the ROPE that reads it.
			if j > 0 && kind[j] == kMul && kind[j-1] == kRMSNorm {
				for k := j + 1; k < min(j+15, n); k++ {
					s0 := nodes[k].src
					k1, _ := srcKind(nodes[k], 1)
					k2, has2 := srcKind(nodes[k], 2)
					if kind[k] == kRope && len(s0) > 0 && s0[0] == nodes[j] && k1 == kNone && (!has2 || k2 == kNone) {
						ropeIdx = k
						set = append(set, k)
						used[k] = true
						break
					}
				}
			}
			// ROPE + VIEW + SET_ROWS together.
			if kind[ropeIdx] == kRope {
				view, setRows := -1, -1
				for k := ropeIdx + 1; k < min(ropeIdx+10, n); k++ {
					if view == -1 && kind[k] == kView && len(nodes[k].src) > 0 && nodes[k].src[0] == nodes[ropeIdx] {
						view = k
						continue
					}
					if view != -1 && setRows == -1 && kind[k] == kSetRows {
						if s := nodes[k].src; len(s) > 0 && s[0] == nodes[view] {
							setRows = k
							break
						}
					}
				}
				if setRows != -1 {
					set = append(set, view, setRows)
					used[view], used[setRows] = true, true
				}
			}
			// MUL_MAT_ID + ADD_ID + MUL, MUL_MAT + ADD + ADD, SSM_CONV + ADD + UNARY.
			pull := func(prev, this, next ggmlOp, srcReady bool) {
				if j == 0 || kind[j] != this || kind[j-1] != prev {
					return
				}
				for k := j + 1; k < min(j+15, n); k++ {
					s := nodes[k].src
					if kind[k] != next || len(s) == 0 || s[0] != nodes[j] {
						continue
					}
					if srcReady && len(s) > 1 && nodeKind(s[1]) != kNone && !inNew[s[1]] {
						continue
					}
					set = append(set, k)
					used[k] = true
					return
				}
			}
			pull(kMulMatID, kAddID, kMul, true)
			pull(kMulMat, kAdd, kAdd, true)
			pull(kSSMConv, kAdd, kUnary, false)
		}
		// Views next, unless that would split an ADD from what follows.
		if kind[set[len(set)-1]] != kAdd {
			for j := first + 1; j < min(first+numToCheck, n); j++ {
				if used[j] || !kind[j].empty() {
					continue
				}
				ok := true
				for c := first; c < j; c++ {
					inSet := false
					for _, x := range set {
						inSet = inSet || x == c
					}
					if !used[c] && vkIsSrcOf(nodes[j], nodes[c]) && !inSet {
						ok = false
						break
					}
				}
				if ok {
					set = append(set, j)
				}
			}
		}
		for _, c := range set {
			order = append(order, nodes[c])
			inNew[nodes[c]] = true
			used[c] = true
		}
		for first < n && used[first] {
			first++
		}
	}
	copy(nodes, order)
}
