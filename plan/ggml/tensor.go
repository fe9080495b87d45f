package ggml

import "github.com/headroom-llm/headroom/gguf"

// Tensor is one tensor of a graph description.
type Tensor struct {
	// Name is the tensor's name (a weight's GGUF name, an input's or a
	// cache's); computed tensors go unnamed.
	Name   string
	bytes  int64
	src    []*Tensor
	view   *Tensor // the tensor whose memory this view uses
	layout layout  // compared for in-place reuse (ggml_are_same_layout)
	// home is the device of the buffer an external tensor lives in, dev
	// the backend the scheduler runs a node on ("" before assignment).
	home, dev string
	// in is the graph that recorded this tensor (Graph.Expand's visited
	// mark), and hn the allocator's state for it during a replay: both
	// live here rather than in maps, which cost more than the replay.
	in  *Graph
	hn  hnode
	op  Op
	cls class
	// unary is the function of a Unary op.
	unary UnaryFunc
	// uses is ggml's use count: the sources of the graph's nodes that
	// are t, counted as Expand records them (before a split points any
	// at a copy). The Vulkan fusion checks read it.
	uses int32
	// external tensors live in other buffers (weights, caches), and
	// isWeight marks model weights, which the scheduler may copy to a GPU
	// to run an op there.
	external, isWeight bool
	input, output      bool
	// inplaceOp marks an op whose result ggml makes a view of its input
	// (ggml_scale_inplace, ggml_clamp): a view for the allocator, a node
	// the scheduler places and splits at.
	inplaceOp bool
	// mr are the Metal reorder's marks of the memory-range sets holding
	// this tensor's memory: [set][0] as a source, [set][1] as a
	// destination (metalorder.go).
	mr [2][2]uint32
	// span is ggml_nbytes of a strided view, from its first element to
	// its last (0 for a view that covers whole rows of what it views):
	// what a copy of the view to another backend holds.
	span int64
}

// layout is a tensor's element type and shape; the graphs here only hold
// contiguous tensors, so strides follow from the shape.
type layout struct {
	typ gguf.GGMLType
	ne  [4]int64
}

// Ne is the tensor's shape (ggml's ne).
func (t *Tensor) Ne() [4]int64 { return t.layout.ne }

// Type is the tensor's element type.
func (t *Tensor) Type() gguf.GGMLType { return t.layout.typ }

// Op is the ggml op that computes the tensor.
func (t *Tensor) Op() Op { return t.op }

// Home is the device whose buffer holds an external tensor.
func (t *Tensor) Home() string { return t.home }

// SetBackend runs t on backend dev whatever the scheduler's passes would
// choose (ggml_backend_sched_set_tensor_backend, which llama.cpp's graph
// callback calls while the graph is built); "" leaves t to the scheduler.
func (t *Tensor) SetBackend(dev string) { t.dev = dev }

// Backend is the backend t runs on: the one SetBackend gave it, or the
// scheduler's once it assigned the graph ("" before).
func (t *Tensor) Backend() string { return t.dev }

// SetOutput marks a graph output (ggml_set_output): the allocator never
// frees it, nor lets an op reuse it.
func (t *Tensor) SetOutput() *Tensor {
	t.output = true
	return t
}

// SetWeight marks an external tensor as a model weight of that size in
// its buffer, which the scheduler may copy to run an op elsewhere.
func (t *Tensor) SetWeight(bytes int64) *Tensor {
	t.isWeight, t.bytes = true, bytes
	return t
}

// Strided gives a view the byte strides nb1..nb3 of what it views, so
// that its size is ggml_nbytes: the first row, and (ne[i]-1) strides of
// every further dimension. A copy of it to another backend holds that.
func (t *Tensor) Strided(nb ...int64) *Tensor {
	row, _ := t.layout.typ.RowSize(uint64(t.layout.ne[0]))
	span := int64(row)
	for i, n := range nb {
		if d := t.layout.ne[i+1]; d > 1 {
			span += (d - 1) * n
		}
	}
	t.span = span
	return t
}

// SpanOf gives a view the span of src, a strided view of the same
// elements with the same strides (a 2D view of a 3D one whose first two
// dimensions are contiguous): ggml_nbytes of both is the same.
func (t *Tensor) SpanOf(src *Tensor) *Tensor {
	t.span = src.span
	return t
}

// Elems is the number of elements of a shape, dimensions of 0 counting
// as 1.
func Elems(ne [4]int64) int64 {
	n := int64(1)
	for _, d := range ne {
		if d > 0 {
			n *= d
		}
	}
	return n
}

// owner is the tensor whose memory t uses.
func (t *Tensor) owner() *Tensor {
	if t.cls == view && t.view != nil {
		return t.view
	}
	return t
}

// plainView is a view op proper: the scheduler does not place it, it
// runs in whatever split is open.
func (t *Tensor) plainView() bool { return t.op.isView() }

// cache is an external tensor that is not a weight (a KV or state cache).
func (t *Tensor) cache() bool { return t.external && !t.isWeight }
