package ggml

import "github.com/headroom-llm/headroom/gguf"

// Graph is a ggml compute graph: leafs and nodes in the order
// ggml_build_forward_expand records them.
type Graph struct {
	leafs []*Tensor
	nodes []*Tensor
}

// Nodes are the graph's nodes in recorded order.
func (g *Graph) Nodes() []*Tensor { return g.nodes }

// Leafs are the graph's leafs in recorded order.
func (g *Graph) Leafs() []*Tensor { return g.leafs }

// Expand adds t and its not yet recorded ancestors, parents first, in
// source order, as ggml_visit_parents does.
func (g *Graph) Expand(t *Tensor) {
	if t == nil || t.in == g {
		return
	}
	t.in = g
	for _, s := range t.src {
		g.Expand(s)
	}
	if t.view != nil {
		g.Expand(t.view)
	}
	if t.cls == leaf {
		g.leafs = append(g.leafs, t)
		return
	}
	for _, s := range t.src {
		if s != nil {
			s.uses++
		}
	}
	g.nodes = append(g.nodes, t)
}

// Ctx records one graph: it makes tensors (from its arena) and expands
// the graph, as a ggml_context and its ggml_cgraph do together. The zero
// value is ready to use with an arena of its own.
type Ctx struct {
	G   Graph // the graph being recorded
	mem *Arena
}

// NewCtx is a Ctx whose tensors come from mem, which it resets first;
// the graph lists reuse the room the arena kept from its last graph.
func NewCtx(mem *Arena) Ctx {
	mem.Reset()
	return Ctx{G: Graph{nodes: mem.nodes[:0], leafs: mem.leafs[:0]}, mem: mem}
}

// Done hands the graph lists' room back to the arena for its next graph.
func (c *Ctx) Done() {
	if c.mem != nil {
		c.mem.nodes, c.mem.leafs = c.G.nodes, c.G.leafs
	}
}

// Expand records t and its ancestors (ggml_build_forward_expand).
func (c *Ctx) Expand(t *Tensor) { c.G.Expand(t) }

func (c *Ctx) arena() *Arena {
	if c.mem == nil {
		c.mem = &Arena{}
	}
	return c.mem
}

// srcs copies the sources into a list from the arena whose capacity is
// its length, so that appending to it never writes into another's.
func (c *Ctx) srcs(src []*Tensor) []*Tensor {
	if len(src) == 0 {
		return nil
	}
	out := c.arena().list(len(src))
	copy(out, src)
	return out
}

// newTensor is a tensor of type t, shape ne (unset dimensions 1), op and
// allocation class.
func (c *Ctx) newTensor(t gguf.GGMLType, op Op, cls class, ne [4]int64, src ...*Tensor) *Tensor {
	x := c.arena().tensor()
	var row int64
	if t == gguf.TypeF32 {
		row = 4 * ne[0] // most tensors; RowSize's table lookup is not free
	} else {
		r, _ := t.RowSize(uint64(ne[0]))
		row = int64(r)
	}
	x.bytes, x.op, x.cls, x.src = row*ne[1]*ne[2]*ne[3], op, cls, c.srcs(src)
	x.layout = layout{typ: t, ne: ne}
	return x
}

// shape is a ggml shape from its leading dimensions; the others are 1.
func shape(dims []int64) [4]int64 {
	ne := [4]int64{1, 1, 1, 1}
	copy(ne[:], dims)
	return ne
}

// Input is a graph input the host fills (ggml_set_input).
func (c *Ctx) Input(name string, t gguf.GGMLType, ne ...int64) *Tensor {
	x := c.newTensor(t, None, leaf, shape(ne))
	x.Name, x.input = name, true
	return x
}

// External is a tensor in a buffer of its own on device home: a weight
// (see SetWeight) or a cache. Its size is its shape's until SetWeight.
func (c *Ctx) External(name string, t gguf.GGMLType, home string, ne ...int64) *Tensor {
	x := c.newTensor(t, None, leaf, shape(ne))
	x.Name, x.home, x.external = name, home, true
	return x
}
