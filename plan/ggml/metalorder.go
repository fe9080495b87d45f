package ggml

import "slices"

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

// metalNode is node_info: a node and the nodes of its fused run,
// nodes[at : at+n] of the split, and the memory they read and write (the
// bases of their sources and results, as ggml_mem_range_from_tensor takes
// them): ranges[r : r+nr] and the nw after them. Indices keep it small;
// a search replays thousands of these.
type metalNode struct {
	at, n     int32
	r, nr, nw int32
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

// metalOrder is one reorder of a split's nodes: fusedOut is v0.5.0's
// rule (sources the run produces are not read from outside it, and every
// tensor of the run is written), false v0.4.0's (every source is read,
// only the last tensor written).
type metalOrder struct {
	fusedOut bool
	nodes    []*Tensor
	ranges   []*Tensor
}

// run is the tensors of packed node n.
func (o *metalOrder) run(n *metalNode) []*Tensor { return o.nodes[n.at : n.at+n.n] }

// setRanges works out what each packed node reads and writes (h_add's and
// h_check's ranges) onto all, which it returns for reuse.
func (o *metalOrder) setRanges(packed []metalNode, all []*Tensor) []*Tensor {
	for i := range packed {
		n := &packed[i]
		run := o.run(n)
		n.r = int32(len(all))
		for _, t := range run {
			for _, s := range t.src {
				if s != nil && !(o.fusedOut && slices.Contains(run, s)) {
					all = append(all, s.owner())
				}
			}
		}
		n.nr = int32(len(all)) - n.r
		if o.fusedOut {
			for _, t := range run {
				all = append(all, t.owner())
			}
		} else {
			all = append(all, run[len(run)-1].owner())
		}
		n.nw = int32(len(all)) - n.r - n.nr
	}
	o.ranges = all
	return all
}

func (o *metalOrder) add(m *metalRanges, n *metalNode) {
	for _, t := range o.ranges[n.r : n.r+n.nr] {
		t.mr[m.set][0] = m.id
	}
	for _, t := range o.ranges[n.r+n.nr : n.r+n.nr+n.nw] {
		t.mr[m.set][1] = m.id
	}
}

// check is h_check: the node may join the set when nothing it reads is
// written there and nothing it writes is read or written there.
func (o *metalOrder) check(m *metalRanges, n *metalNode) bool {
	for _, t := range o.ranges[n.r : n.r+n.nr] {
		if t.mr[m.set][1] == m.id {
			return false
		}
	}
	for _, t := range o.ranges[n.r+n.nr : n.r+n.nr+n.nw] {
		if t.mr[m.set][0] == m.id || t.mr[m.set][1] == m.id {
			return false
		}
	}
	return true
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
func (o *metalOrder) reorder(nodes []metalNode, epoch *uint32, mem *Arena) []int {
	n := len(nodes)
	res := mem.metalOrder[:0]
	used := mem.metalUsed
	if cap(used) < n {
		used = make([]bool, n)
	} else {
		used = used[:n]
		clear(used)
	}
	defer func() { mem.metalOrder, mem.metalUsed = res[:0], used[:0] }()
	mrs0 := &metalRanges{set: 0, next: epoch}
	mrs1 := &metalRanges{set: 1, next: epoch}
	mrs0.reset()
	for i0 := range nodes {
		if used[i0] {
			continue
		}
		node0 := &nodes[i0]
		if !o.nodes[node0.at].op.empty() && !o.check(mrs0, node0) {
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
				op := o.nodes[node1.at].op
				if !metalSafe(op) {
					break
				}
				if (op.empty() || o.check(mrs0, node1)) && o.check(mrs1, node1) {
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

// metalPackOld is v0.4.0's packing: a run that starts with an ADD, NORM
// or RMS_NORM and goes on with ADD, MUL, NORM or RMS_NORM, as long as
// ggml_can_fuse allows (at most 16 nodes).
func metalPackOld(nodes []*Tensor, out []metalNode) []metalNode {
	for i := 0; i < len(nodes); i++ {
		mn := metalNode{at: int32(i), n: 1}
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
			mn.n = int32(cnt)
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
// v0.4.0's rules or, with fusion, v0.5.0's (whose packing follows its
// fusion table and which adds allocation dependencies, returned). mem
// lends its room for the packed nodes; epoch numbers the range sets.
func metalOptimize(nodes []*Tensor, fusion bool, mem *Arena, epoch *uint32) []AllocDep {
	var deps []AllocDep
	packed := mem.metal[:0]
	if fusion {
		fs := metalFusions()
		deps = metalFusionDeps(fs, nodes)
		packed = metalPack(fs, nodes, packed)
	} else {
		packed = metalPackOld(nodes, packed)
	}
	o := &metalOrder{fusedOut: fusion, nodes: nodes}
	mem.metalRange = o.setRanges(packed, mem.metalRange[:0])
	order := o.reorder(packed, epoch, mem)
	out := mem.metalOut[:0]
	for _, i := range order {
		out = append(out, o.run(&packed[i])...)
	}
	copy(nodes, out)
	clear(out)
	clear(mem.metalRange) // no stale pointers kept alive in the arena
	mem.metalOut, mem.metal, mem.metalRange = out[:0], packed[:0], mem.metalRange[:0]
	return deps
}
