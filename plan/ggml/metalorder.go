package ggml

// This file is ggml_graph_optimize of the Metal backend
// (ggml-metal-common.cpp, on by default unless
// GGML_METAL_GRAPH_OPTIMIZE_DISABLE is set): before the scheduler
// allocates a Metal split, the backend packs the runs it fuses into one
// node each, then moves later nodes forward to run beside the current
// ones when no memory they touch conflicts, looking up to 64 nodes ahead.
// The allocator places tensors in that order, so the compute buffer
// follows the reordered graph.
//
// A conflict is ggml_mem_ranges_check's: two nodes conflict when one
// writes memory the other reads or writes. Before allocation a computed
// tensor's range is its own (views share their base's); weights and
// caches are allocated, with ranges in their buffers. llama.cpp's check
// also counts a range that ends where another begins as overlapping
// (p1 >= p0), which makes a layer's K and V caches, adjacent in the KV
// buffer, touch; here each tensor's range is its own. Every read of a
// layer's K or V comes after that layer's write to it, which the shared
// tensor already orders, so the touching ranges order nothing more in
// the graphs described here.

// metalNode is node_info: a node and the nodes of its fused run.
type metalNode struct {
	node  *Tensor
	fused []*Tensor
}

// dst is the run's last tensor, its result.
func (n *metalNode) dst() *Tensor {
	if len(n.fused) == 0 {
		return n.node
	}
	return n.fused[len(n.fused)-1]
}

// produces says t is a tensor of the run (is_output).
func (n *metalNode) produces(t *Tensor) bool {
	if t == n.node {
		return true
	}
	for _, f := range n.fused {
		if t == f {
			return true
		}
	}
	return false
}

// metalForward is N_FORWARD: how far ahead the reorder looks.
const metalForward = 64

// metalRanges is one ggml_mem_ranges set, kept as marks on the tensors
// whose memory it holds (the base of a view): a mark equal to the set's
// id is in the set. Resetting takes a new id.
type metalRanges struct {
	set  int // which of a tensor's marks: 0 for mrs0, 1 for mrs1
	id   uint32
	next *uint32
}

func (m *metalRanges) reset() {
	*m.next++
	m.id = *m.next
}

func (m *metalRanges) addSrc(t *Tensor) { t.owner().mr[m.set][0] = m.id }
func (m *metalRanges) addDst(t *Tensor) { t.owner().mr[m.set][1] = m.id }

// src ranges may overlap each other; anything else may not.
func (m *metalRanges) okSrc(t *Tensor) bool { return t.owner().mr[m.set][1] != m.id }
func (m *metalRanges) okDst(t *Tensor) bool {
	o := t.owner()
	return o.mr[m.set][0] != m.id && o.mr[m.set][1] != m.id
}

// metalOrder is one reorder: fusedOut is de3ff81's rule (sources the run
// produces are not read from outside it, and every tensor of the run is
// written), false 80fb11a's (every source is read, only the last tensor
// written).
type metalOrder struct {
	fusedOut bool
}

func (o metalOrder) srcs(n *metalNode, f func(*Tensor)) {
	each := func(t *Tensor) {
		for _, s := range t.src {
			if s != nil && !(o.fusedOut && n.produces(s)) {
				f(s)
			}
		}
	}
	each(n.node)
	for _, x := range n.fused {
		each(x)
	}
}

func (o metalOrder) dsts(n *metalNode, f func(*Tensor)) {
	if !o.fusedOut {
		f(n.dst())
		return
	}
	f(n.node)
	for _, x := range n.fused {
		f(x)
	}
}

func (o metalOrder) add(m *metalRanges, n *metalNode) {
	o.srcs(n, m.addSrc)
	o.dsts(n, m.addDst)
}

func (o metalOrder) check(m *metalRanges, n *metalNode) bool {
	ok := true
	o.srcs(n, func(t *Tensor) { ok = ok && m.okSrc(t) })
	o.dsts(n, func(t *Tensor) { ok = ok && m.okDst(t) })
	return ok
}

// metalSafe is h_safe: the ops the reorder moves nodes across.
func metalSafe(op Op) bool {
	switch op {
	case MulMat, MulMatID, Rope, Norm, RMSNorm, L2Norm, SumRows, SSMConv, SSMScan, Clamp,
		Mul, Add, Sub, Div, GLU, Scale, Unary, GetRows, SetRows, Cpy, Cont, Repeat:
		return true
	}
	return op.empty()
}

// reorder is ggml_metal_graph_optimize_reorder: the order in which to
// run the packed nodes.
func (o metalOrder) reorder(nodes []metalNode, epoch *uint32) []int {
	n := len(nodes)
	res := make([]int, 0, n)
	used := make([]bool, n)
	mrs0 := &metalRanges{set: 0, next: epoch}
	mrs1 := &metalRanges{set: 1, next: epoch}
	mrs0.reset()
	for i0 := range nodes {
		if used[i0] {
			continue
		}
		node0 := &nodes[i0]
		if !node0.node.op.empty() && !o.check(mrs0, node0) {
			// A barrier; before it, gather later nodes that can run
			// with the current set and with every unplaced node before
			// them.
			mrs1.reset()
			o.add(mrs1, node0)
			for i1 := i0 + 1; i1 < i0+metalForward && i1 < n; i1++ {
				if used[i1] {
					continue
				}
				node1 := &nodes[i1]
				if !metalSafe(node1.node.op) {
					break
				}
				if (node1.node.op.empty() || o.check(mrs0, node1)) && o.check(mrs1, node1) {
					o.add(mrs0, node1)
					res = append(res, i1)
					used[i1] = true
				} else {
					o.add(mrs1, node1)
				}
			}
			mrs0.reset()
		}
		o.add(mrs0, node0)
		res = append(res, i0)
	}
	return res
}

// metalPackOld is 80fb11a's packing: a run that starts with an ADD, NORM
// or RMS_NORM and goes on with ADD, MUL, NORM or RMS_NORM, as long as
// ggml_can_fuse allows (at most 16 nodes).
func metalPackOld(nodes []*Tensor) []metalNode {
	out := make([]metalNode, 0, len(nodes))
	for i := 0; i < len(nodes); i++ {
		mn := metalNode{node: nodes[i]}
		if op := nodes[i].op; op == Add || op == Norm || op == RMSNorm {
			f := i + 1
			for f < len(nodes) && f < i+metalMaxFuse {
				if op := nodes[f].op; op != Add && op != Mul && op != Norm && op != RMSNorm {
					break
				}
				f++
			}
			cnt := f - i
			for ; cnt > 1; cnt-- {
				if canFuseChain(nodes[i : i+cnt]) {
					break
				}
			}
			mn.fused = nodes[i+1 : i+cnt]
			i += cnt - 1
		}
		out = append(out, mn)
	}
	return out
}

// metalMaxFuse is MAX_FUSE / GGML_METAL_FUSION_MAX.
const metalMaxFuse = 16

// canFuseChain is ggml_can_fuse over consecutive nodes: every node but
// the last has one use, is no view and no output; each reads the one
// before and has its shape.
func canFuseChain(run []*Tensor) bool {
	for k, t := range run {
		if k < len(run)-1 && (t.uses != 1 || t.cls == view || t.output) {
			return false
		}
		if k > 0 && !readsPrev(t, run[k-1]) {
			return false
		}
	}
	return true
}

// readsPrev: t reads p as its first or second source and has p's shape.
func readsPrev(t, p *Tensor) bool {
	reads := len(t.src) > 0 && t.src[0] == p || len(t.src) > 1 && t.src[1] == p
	return reads && sameShape(t.layout.ne, p.layout.ne)
}

// metalOptimize reorders the nodes of one Metal split in place, by
// 80fb11a's rules or, with fusion, de3ff81's (whose packing follows its
// fusion table and which adds allocation dependencies, returned).
func metalOptimize(nodes []*Tensor, fusion bool, epoch *uint32) []AllocDep {
	var deps []AllocDep
	var packed []metalNode
	if fusion {
		fs := metalFusions()
		deps = metalFusionDeps(fs, nodes)
		packed = metalPack(fs, nodes)
	} else {
		packed = metalPackOld(nodes)
	}
	o := metalOrder{fusedOut: fusion}
	order := o.reorder(packed, epoch)
	out := make([]*Tensor, 0, len(nodes))
	for _, i := range order {
		out = append(out, packed[i].node)
		out = append(out, packed[i].fused...)
	}
	copy(nodes, out)
	return deps
}
