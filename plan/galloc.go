package plan

import "github.com/headroom-llm/headroom/gguf"

// This file replays ggml's graph allocator (ggml-alloc.c, ggml_gallocr) on
// a description of a compute graph, to find the compute buffer size
// llama.cpp reserves: the highest offset the allocator reaches while it
// walks the graph, allocating each node's result and freeing tensors after
// their last use, reusing a parent's memory for ops that may work in place.

// gop is a graph operation, as far as allocation cares.
type gop uint8

const (
	opNone    gop = iota // a leaf: weights, inputs, caches
	opView               // views, reshapes, permutes: no memory of their own
	opInplace            // ops ggml_op_can_inplace allows to reuse a parent
	opOther              // everything else
)

// gtensor is one tensor of a graph description.
type gtensor struct {
	name   string
	bytes  int64
	src    []*gtensor
	view   *gtensor // the tensor this one views (op == opView)
	layout layout   // compared for in-place reuse (ggml_are_same_layout)
	// home is the device of the buffer an external tensor lives in.
	home string
	// dev is the backend the scheduler runs this node on ("" before
	// assignment).
	dev string
	// in is the graph that recorded this tensor (graph.expand's visited
	// mark), and hn the allocator's state for it during a replay: both
	// live here rather than in maps, which cost more than the replay.
	in *graph
	hn hnode
	op gop
	// external tensors live in other buffers (weights, KV cache), and
	// isWeight marks model weights, which the scheduler may copy to a GPU
	// to run an op there.
	external bool
	isWeight bool
	input    bool
	output   bool
	// gather marks GET_ROWS, which GPU backends never take from the host
	// by op offload (a lookup reads a few rows, a copy would move them all).
	gather bool
	// span is ggml_nbytes of a strided view, from its first element to
	// its last (0 for a view that covers whole rows of what it views,
	// whose size follows from its shape): what a copy of the view to
	// another backend holds.
	span int64
	// kind is the node's ggml op where the graph description records it
	// (graph.kinds), for the Vulkan backend's reorder (vkorder.go).
	kind ggmlOp
	// inplace marks an in-place op (ggml_scale_inplace and the like): a
	// view for the allocator, but a node the scheduler places and splits
	// at like any other.
	inplace bool
}

// graph is a description of a ggml compute graph: leafs and nodes in the
// order ggml_build_forward_expand records them.
// layout is a tensor's element type and shape; graphs here only hold
// contiguous tensors, so strides follow from the shape.
type layout struct {
	typ gguf.GGMLType
	ne  [4]int64
}

type graph struct {
	leafs []*gtensor
	nodes []*gtensor
	// kinds says every node records its ggml op, so that a backend's
	// reorder can be replayed.
	kinds bool
}

// expand adds t and its not yet recorded ancestors, parents first, in
// source order, as ggml_visit_parents does.
func (g *graph) expand(t *gtensor) {
	if t == nil || t.in == g {
		return
	}
	t.in = g
	for _, s := range t.src {
		g.expand(s)
	}
	if t.view != nil {
		g.expand(t.view)
	}
	if t.op == opNone {
		g.leafs = append(g.leafs, t)
		return
	}
	g.nodes = append(g.nodes, t)
}

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

// reserve replays ggml_gallocr_alloc_graph_impl and returns the buffer
// size it needs.
func reserve(g *graph, align int64) int64 {
	a := newDynAlloc(align, 0)
	reserveOn(g, func(*gtensor) *dynAlloc { return a })
	return a.size()
}

// reserveOn replays the allocator with one dynamic allocator per backend
// buffer, chosen per tensor, as ggml_gallocr does with node buffer ids.
func reserveOn(g *graph, allocFor func(*gtensor) *dynAlloc) {
	// The state of an earlier replay of these tensors is cleared first,
	// and each tensor's allocator is asked once.
	run := new(replay)
	reset := func(t *gtensor) {
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
	var allocate func(t *gtensor)
	allocate = func(t *gtensor) {
		n := &t.hn
		if t.external || n.allocated || t.op == opView {
			return
		}
		n.allocated = true
		if t.op == opInplace {
			for _, p := range t.src {
				pn := &p.hn
				if p.external || p.output || (p.view != nil && p.view.output) || p.layout != t.layout {
					continue
				}
				if pn.children != 1 || pn.views != 0 {
					continue
				}
				// A view is never allocated by the graph allocator itself,
				// so ggml_gallocr_is_own fails for it and an op on a view
				// (RoPE on a reshaped projection) never runs in place.
				if p.op == opView {
					continue
				}
				if !pn.allocated {
					continue
				}
				n.addr = pn.addr
				pn.allocated = false
				pn.alloc.shrink(pn.addr, p.bytes, t.bytes)
				return
			}
		}
		n.addr = n.alloc.alloc(t.bytes)
	}
	free := func(t *gtensor) {
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
		if t.op == opView && t.view != nil {
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
			if p.op == opView && p.view != nil {
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
