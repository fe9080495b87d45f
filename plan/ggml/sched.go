package ggml

import (
	"github.com/headroom-llm/headroom/builds"
	"slices"

	"github.com/headroom-llm/headroom/gguf"
)

// Sched describes the devices a graph is split over, as
// ggml_backend_sched sees them.
type Sched struct {
	CPU      string
	MaxAlloc map[string]int64 // largest tensor each GPU can bind
	// offload is llama.cpp's op_offload: an op whose weight is in host
	// memory may run on the first GPU, which receives a copy of the
	// weight, when the GPU's offload_op accepts the op (offloadBatch).
	Offload bool
	// OffloadTo is that GPU: the first that accepts offloaded ops.
	OffloadTo string
	// CacheTypes are the element types of the caches, by the names the
	// graph descriptions give them.
	CacheTypes map[string]gguf.GGMLType
	// Mem holds the graph's tensors, and the split's copies.
	Mem *Arena
	// Optimize is what each device's backend does to a split in its
	// graph_optimize before the split is allocated: Vulkan and Metal
	// reorder it (vkorder.go, metalorder.go), CUDA and ROCm add allocation
	// dependencies for the runs they fuse (cudaopt.go).
	Optimize map[string]Optimizer
	// Rules are the llama.cpp build's: the scheduler and the backends'
	// graph optimizers read VulkanFusion, CUDATopKDeps, CUDAReduceDeps,
	// MetalFusion and SplitInputsGrow.
	Rules builds.Rules
	// epoch numbers the Metal reorder's memory-range sets.
	epoch uint32
	// noBroadcast3 are the devices whose matrix multiplication cannot
	// broadcast its first operand across dimension 3 (Vulkan's
	// supports_op refuses a->ne[3] != b->ne[3]): with several KV streams
	// MLA's decompression by attn_v_b stays where its weight is.
	NoBroadcast3 map[string]bool
	// Buffers are each device's compute buffer type, by device name.
	Buffers map[string]BufferType
	// Copies is the scheduler's n_copies (ggml_backend_sched_new's
	// parallel: MaxCopies copies when it runs pipeline parallel, else 1
	// or 0): every graph input and every input copied between backends is
	// kept in that many copies (pipeline.go).
	Copies int
}

// Optimizer is a backend's graph_optimize, as far as it moves memory.
type Optimizer int

const (
	// OptNone leaves a split as the scheduler cut it (the CPU's).
	OptNone Optimizer = iota
	// OptVulkan is ggml_vk_graph_optimize's reorder.
	OptVulkan
	// OptCUDA is ggml_backend_cuda_graph_optimize's fused runs.
	OptCUDA
	// OptMetal is the Metal backend's ggml_graph_optimize.
	OptMetal
)

// BufferType is what the allocator needs of a backend buffer type: its
// alignment, its largest buffer (0: unbounded) and what the backend adds
// to each buffer it allocates.
type BufferType struct {
	Align, MaxSize, Pad int64
}

// elemType is the element type ggml gives t: a view keeps the type of the
// tensor it views. The graph descriptions lay most caches out as f32
// placeholders (the caches are sized elsewhere), but llama.cpp stores K and
// V in the context's cache types, and a view of a cache that a split copies
// to another backend is copied in that type.
func (o *Sched) elemType(t *Tensor) gguf.GGMLType {
	owner := t
	if t.cls == view && t.view != nil {
		owner = t.view
	}
	if owner.external && !owner.isWeight {
		if typ, ok := o.CacheTypes[owner.Name]; ok {
			return typ
		}
	}
	return owner.layout.typ
}

// bytesOf is ggml_nbytes of t as the scheduler sees it: what a copy to
// another backend holds and what a device's binding limit is checked
// against. Views and caches are sized by their shape (the views here
// cover whole rows of what they view, so strides add nothing); weights and
// computed tensors by their own size.
func (o *Sched) bytesOf(t *Tensor) int64 {
	if t.span > 0 {
		return t.span
	}
	if t.cls != view && !(t.external && !t.isWeight) {
		return t.bytes
	}
	row, _ := o.elemType(t).RowSize(uint64(t.layout.ne[0]))
	return int64(row) * t.layout.ne[1] * t.layout.ne[2] * t.layout.ne[3]
}

// minOffloadBatch is the batch size from which a GPU backend's offload_op
// takes an op (op_offload_min_batch_size: GGML_OP_OFFLOAD_MIN_BATCH, 32 by
// default, in CUDA's, ROCm's and Vulkan's).
const minOffloadBatch = 32

// offloadBatch is the batch size a GPU backend's offload_op judges op n by
// (get_op_batch_size in ggml-cuda.cu, ggml_vk_get_op_batch_size in
// ggml-vulkan.cpp, the same rule): none for GET_ROWS, whose lookup reads a
// few rows of its table; the columns (ne[1]) of a matrix multiplication;
// the tokens (ne[2]) of an expert multiplication and of a RoPE (which
// reads the model's frequency factors); the rows of any other op, so that
// ADD_ID, which adds a bias row per selected expert and token, counts both.
func offloadBatch(n *Tensor) int64 {
	ne := n.layout.ne
	switch n.op {
	case GetRows:
		return 0
	case MulMat:
		return ne[1]
	case MulMatID, Rope:
		return ne[2]
	default:
		return ne[1] * ne[2] * ne[3]
	}
}

// assign gives every node a backend with the scheduler's passes: ops on
// pre-allocated tensors (weights, caches) run where those live, or on the
// first GPU when their host weight may be offloaded; the rest inherit from
// their neighbours, GPU assignments spreading first.
func (o *Sched) assign(g *Graph) {
	isGPU, supports := o.isGPU, o.supports
	// A tensor whose backend was set before (SetBackend) keeps it.
	for _, t := range g.leafs {
		if !t.external && t.dev == "" {
			t.dev = o.CPU // graph inputs are set by the host
		}
	}
	for _, n := range g.nodes {
		if n.dev != "" {
			continue
		}
		if n.cls == view {
			// A write into a cache (set_rows, cpy) or an op in place on
			// one runs where the cache lives.
			if (len(n.src) > 1 || n.inplaceOp) && n.view != nil && n.view.external {
				n.dev = n.view.home
			}
			continue
		}
		for _, s := range n.src {
			owner := s
			if s.cls == view && s.view != nil {
				owner = s.view
			}
			if !owner.external {
				continue
			}
			switch {
			case !owner.isWeight:
				// Only a source in a weights buffer decides where an op
				// runs (ggml_backend_sched_backend_id_from_cur); a KV or
				// state cache does not, so the op is left to its
				// neighbours.
				continue
			case isGPU(owner.home):
				n.dev = owner.home
			case o.Offload && o.OffloadTo != "" && offloadBatch(n) >= minOffloadBatch &&
				(o.MaxAlloc[o.OffloadTo] == 0 || owner.bytes <= o.MaxAlloc[o.OffloadTo]):
				n.dev = o.OffloadTo
			default:
				n.dev = o.CPU
			}
			if !supports(n.dev, n) {
				n.dev = o.CPU
			}
			break
		}
	}
	// An op that ggml makes a view of its input is no view op to the
	// scheduler: its neighbours' backends spread to it.
	nodes := make([]*Tensor, 0, len(g.nodes))
	for _, n := range g.nodes {
		if n.cls != view || n.dev != "" || n.inplaceOp {
			nodes = append(nodes, n)
		}
	}
	o.expand(nodes, false, true)
	o.expand(nodes, true, true)
	o.expand(nodes, false, false)
	o.expand(nodes, true, false)
	for _, n := range nodes {
		if n.dev == "" {
			n.dev = o.CPU
		}
	}
}

func (o *Sched) isGPU(d string) bool { return d != "" && d != o.CPU }

// supports is the device's supports_op as far as sizes go: a GPU cannot
// bind a tensor larger than its largest binding, in or out.
func (o *Sched) supports(dev string, n *Tensor) bool {
	if !o.isGPU(dev) {
		return true
	}
	if o.NoBroadcast3[dev] && n.op == MulMat && len(n.src) >= 2 && max(n.src[0].layout.ne[3], 1) != max(n.src[1].layout.ne[3], 1) {
		return false
	}
	limit := o.MaxAlloc[dev]
	if limit == 0 {
		return true
	}
	if o.bytesOf(n) > limit {
		return false
	}
	for _, s := range n.src {
		if o.bytesOf(s) > limit {
			return false
		}
	}
	return true
}

// expand gives the unassigned nodes the backend of the last assigned one
// before them (after them when reverse), where it supports them; with
// gpuOnly only GPU assignments spread, and a CPU node stops them.
func (o *Sched) expand(nodes []*Tensor, reverse, gpuOnly bool) {
	cur := ""
	for i := range nodes {
		n := nodes[i]
		if reverse {
			n = nodes[len(nodes)-1-i]
		}
		switch {
		case n.dev == "":
			if cur != "" && o.supports(cur, n) {
				n.dev = cur
			}
		case gpuOnly && !o.isGPU(n.dev):
			cur = ""
		default:
			cur = n.dev
		}
	}
}

// maxSplitInputs is GGML_SCHED_MAX_SPLIT_INPUTS, the inputs a split
// holds before the scheduler starts a new one rather than grow the list.
const maxSplitInputs = 30

// Measure gives every node of g a backend, splits g as the scheduler
// runs it, reorders the splits of the backends that do, and replays the
// allocator with one buffer per backend: it returns each buffer's size,
// by device, the backend's additions included.
func (o *Sched) Measure(g *Graph) map[string]int64 {
	o.assign(g)
	split := o.split(g)
	// A handful of devices, so a list is quicker than a map.
	type devAlloc struct {
		dev string
		a   *dynAlloc
	}
	var allocs []devAlloc
	reserveOn(split, func(t *Tensor) *dynAlloc {
		d := t.dev
		if d == "" {
			d = o.CPU
		}
		for _, x := range allocs {
			if x.dev == d {
				return x.a
			}
		}
		bt := o.Buffers[d]
		a := newDynAlloc(bt.Align, bt.MaxSize)
		allocs = append(allocs, devAlloc{d, a})
		return a
	})
	out := make(map[string]int64, len(allocs))
	for _, x := range allocs {
		out[x.dev] = x.a.size() + o.Buffers[x.dev].Pad*int64(len(x.a.chunks))
	}
	return out
}

// split rewrites an assigned graph as the scheduler runs it (pass 5 of
// ggml_backend_sched_split_graph, then the graph copy it allocates): nodes
// are cut into splits of one backend, the inputs a split needs from another
// backend are copied to it at the start of the split, and the split's nodes
// read the copies. A copy is made once per tensor and backend, so a later
// split on the same backend reads the earlier copy and keeps it alive.
func (o *Sched) split(g *Graph) *Graph {
	s := &splitter{o: o, copies: map[copyKey]*Tensor{}}
	s.addAll(g.nodes)
	var deps map[*Tensor][]*Tensor
	keep := func(ds []AllocDep) {
		for _, d := range ds {
			if deps == nil {
				deps = map[*Tensor][]*Tensor{}
			}
			// add_alloc_dep keeps each tensor once per node.
			for _, t := range d.Keep {
				if !slices.Contains(deps[d.Until], t) {
					deps[d.Until] = append(deps[d.Until], t)
				}
			}
		}
	}
	for _, sp := range s.splits {
		switch o.Optimize[sp.dev] {
		case OptVulkan:
			keep(vkReorder(g.nodes[sp.start:sp.end], o.Rules.VulkanFusion))
		case OptCUDA:
			keep(cudaDeps(g.nodes, sp.start, sp.end, o.Rules.CUDATopKDeps, o.Rules.CUDAReduceDeps))
		case OptMetal:
			keep(metalOptimize(g.nodes[sp.start:sp.end], o.Rules.MetalFusion, o.Mem, &o.epoch))
		}
	}
	out := &Graph{leafs: g.leafs, nodes: o.Mem.split[:0]}
	var inputs []*Tensor
	for _, sp := range s.splits {
		out.nodes = append(out.nodes, sp.inputs...)
		for _, n := range g.nodes[sp.start:sp.end] {
			out.nodes = append(out.nodes, n)
			if keep := deps[n]; keep != nil {
				out.nodes = append(out.nodes, o.depNode(keep))
			}
		}
		if o.Copies > 1 {
			inputs = append(inputs, sp.inputs...)
		}
	}
	if o.Copies > 1 {
		out.leafs = o.pipelineLeafs(g.leafs, g.nodes, inputs)
	}
	o.Mem.split = out.nodes // its room serves the next split graph
	return out
}

// splitter cuts a graph into splits (see split).
type splitter struct {
	o      *Sched
	splits []*schedSplit
	// copies are the copies made so far, each once per tensor and backend.
	copies map[copyKey]*Tensor
}

// depNode is the node the scheduler adds after a backend's allocation
// dependency: a GGML_OP_NONE view that reads the kept tensors, which the
// allocator neither places nor counts as a view, so each lives until it
// has run. ggml splits more than GGML_MAX_SRC kept tensors over several
// such nodes, all right after the same node, which frees them at the same
// point as one node does.
func (o *Sched) depNode(keep []*Tensor) *Tensor {
	d := o.Mem.tensor()
	d.op, d.cls = None, view
	d.src = o.Mem.list(len(keep))
	copy(d.src, keep)
	return d
}

// schedSplit is one split: nodes [start, end) of the graph, all on one
// backend (plain views run in whatever split is open), and the copies
// made at its start.
type schedSplit struct {
	dev        string
	inputs     []*Tensor
	start, end int
}

// copyKey names a copy: of tensor t, on backend dev.
type copyKey struct {
	t   *Tensor
	dev string
}

// devOf is the backend whose memory holds t.
func devOf(t *Tensor) string {
	if t.cls == view && t.view != nil {
		if t.view.external {
			return t.view.home
		}
		return t.view.dev
	}
	if t.external {
		return t.home
	}
	return t.dev
}

// needsCopy says whether split backend dev must copy source t in. Only
// one backend's buffers are usable by another here (the CPU's host memory
// is not a GPU's, nor the reverse), so a source elsewhere is copied;
// caches are only read through views, which are.
func needsCopy(t *Tensor, dev string) bool {
	return devOf(t) != dev && !t.cache()
}

// addAll cuts nodes into splits.
func (s *splitter) addAll(nodes []*Tensor) {
	for i, n := range nodes {
		s.add(i, n)
	}
	if len(s.splits) == 0 && len(nodes) > 0 {
		// Only view ops: one split holds them, so that the inputs they
		// read are still placed.
		s.splits = append(s.splits, &schedSplit{dev: devOf(nodes[0]), end: len(nodes)})
	}
}

// add puts node i, n, in the open split or a new one, and points its
// sources on other backends at copies. A view op joins the open split;
// the view ops before the first node that is not one wait for it, and
// the first split, on that node's backend, holds them too.
func (s *splitter) add(i int, n *Tensor) {
	if n.plainView() {
		if len(s.splits) > 0 {
			s.splits[len(s.splits)-1].end = i + 1
		}
		return
	}
	dev := n.dev
	if dev == "" {
		dev = devOf(n)
	}
	var cur *schedSplit
	if len(s.splits) > 0 {
		cur = s.splits[len(s.splits)-1]
	}
	switch {
	case cur == nil:
		cur = &schedSplit{dev: dev}
		s.splits = append(s.splits, cur)
	case cur.dev != dev || s.ends(cur, n, dev):
		cur = &schedSplit{dev: dev, start: i}
		s.splits = append(s.splits, cur)
	}
	cur.end = i + 1
	cloned := false
	for j, src := range n.src {
		if !needsCopy(src, dev) {
			continue
		}
		c := s.copyOf(cur, src, dev)
		if !cloned {
			clone := s.o.Mem.list(len(n.src))
			copy(clone, n.src)
			n.src, cloned = clone, true
		}
		n.src[j] = c
	}
}

// ends says whether split cur, which already copies something in, ends
// before node n: when n needs a weight from another backend, so that the
// memory of the weights copied so far can be reused, and when n needs a
// new copy once the split holds GGML_SCHED_MAX_SPLIT_INPUTS.
func (s *splitter) ends(cur *schedSplit, n *Tensor, dev string) bool {
	if len(cur.inputs) == 0 {
		return false
	}
	for _, src := range n.src {
		if src.isWeight && devOf(src) != dev {
			return true
		}
		if !s.o.Rules.SplitInputsGrow && len(cur.inputs) >= maxSplitInputs && needsCopy(src, dev) && s.copies[copyKey{src, dev}] == nil {
			return true
		}
	}
	return false
}

// copyOf is the copy of t on dev, made at the start of split cur unless
// an earlier split on dev made it.
func (s *splitter) copyOf(cur *schedSplit, t *Tensor, dev string) *Tensor {
	if c := s.copies[copyKey{t, dev}]; c != nil {
		return c
	}
	// The copy is ggml_dup_tensor_layout's: GGML_OP_NONE, which the Vulkan
	// reorder takes for a ready source (a RoPE whose positions were copied
	// in still joins its norm), but a node the allocator places.
	c := s.o.Mem.tensor()
	c.Name, c.bytes, c.op, c.cls, c.dev, c.layout = t.Name, s.o.bytesOf(t), None, other, dev, t.layout
	if !t.external {
		c.src = s.o.Mem.list(1) // the source lives until it is copied
		c.src[0] = t
	}
	s.copies[copyKey{t, dev}] = c
	cur.inputs = append(cur.inputs, c)
	return c
}
