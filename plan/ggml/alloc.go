package ggml

// This file replays ggml's graph allocator (ggml-alloc.c, ggml_gallocr):
// the highest offset the allocator reaches while it walks the graph,
// allocating each node's result and freeing tensors after their last use,
// reusing a source's memory for ops that may work in place.

// hnode is ggml_gallocr's hash_node: a tensor's pending uses and where
// it was placed, and the allocator of the buffer it goes in.
type hnode struct {
	children, views int32
	allocated       bool
	addr            addr
	alloc           *dynAlloc
	run             *replay // the replay this state belongs to
}

// replay marks one reserveOn call: state from another is stale.
type replay struct{ _ byte }

// Reserve replays ggml_gallocr_alloc_graph_impl and returns the buffer
// size it needs.
func Reserve(g *Graph, align int64) int64 {
	a := newDynAlloc(align, 0)
	reserveOn(g, func(*Tensor) *dynAlloc { return a })
	return a.size()
}

// takeParent gives an in-place op its parent's memory where
// ggml_gallocr would: a parent of the same layout that only it reads, no
// view of it alive, allocated by the graph and not an output.
func takeParent(t *Tensor) bool {
	for _, p := range t.src {
		pn := &p.hn
		if p.external || p.output || (p.view != nil && p.view.output) || p.layout != t.layout {
			continue
		}
		// A view is never allocated by the graph allocator itself, so
		// ggml_gallocr_is_own fails for it and an op on a view (RoPE on
		// a reshaped projection) never runs in place.
		if pn.children != 1 || pn.views != 0 || p.cls == view || !pn.allocated {
			continue
		}
		t.hn.addr = pn.addr
		pn.allocated = false
		pn.alloc.shrink(pn.addr, p.bytes, t.bytes)
		return true
	}
	return false
}

// reserveOn replays the allocator with one dynamic allocator per backend
// buffer, chosen per tensor, as ggml_gallocr does with node buffer ids.
func reserveOn(g *Graph, allocFor func(*Tensor) *dynAlloc) {
	// The state of an earlier replay of these tensors is cleared first,
	// and each tensor's allocator is asked once.
	run := new(replay)
	reset := func(t *Tensor) {
		if t.hn.run != run {
			t.hn = hnode{alloc: allocFor(t), run: run}
		}
	}
	for _, l := range g.leafs {
		reset(l)
	}
	for _, t := range g.nodes {
		reset(t)
		for _, s := range t.src {
			reset(s)
		}
		if t.view != nil {
			reset(t.view)
		}
	}
	var allocate func(t *Tensor)
	allocate = func(t *Tensor) {
		n := &t.hn
		if t.external || n.allocated || t.cls == view {
			return
		}
		n.allocated = true
		if t.cls == inplace && takeParent(t) {
			return
		}
		n.addr = n.alloc.alloc(t.bytes)
	}
	free := func(t *Tensor) {
		if t.output {
			return
		}
		t.hn.alloc.release(t.hn.addr, t.bytes)
		t.hn.allocated = false
	}
	for _, l := range g.leafs {
		allocate(l)
	}
	for _, t := range g.nodes {
		if t.cls == view && t.view != nil {
			t.view.hn.views++
		}
		if t.input {
			allocate(t)
		}
		for _, s := range t.src {
			s.hn.children++
			if s.input {
				allocate(s)
			}
		}
	}
	for _, t := range g.nodes {
		for _, s := range t.src {
			allocate(s)
		}
		allocate(t)
		for _, p := range t.src {
			pn := &p.hn
			pn.children--
			if pn.children != 0 || pn.views != 0 {
				continue
			}
			if p.cls == view && p.view != nil {
				vn := &p.view.hn
				vn.views--
				if vn.views == 0 && vn.children == 0 && vn.allocated {
					free(p.view)
				}
			} else if pn.allocated {
				free(p)
			}
		}
	}
}
