package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// This file models how ggml_backend_sched (ggml-backend.cpp) runs one graph
// over several backends, as far as the compute buffers care: which backend
// each node runs on, which tensors are copied between backends at the
// start of each split, and then one allocator replay per backend buffer.

// schedOptions describe the devices for a split graph.
type schedOptions struct {
	cpu      string
	gpus     []string         // in llama.cpp's device order
	maxAlloc map[string]int64 // largest tensor each GPU can bind
	// offload is llama.cpp's op_offload: an op whose weight is in host
	// memory may run on the first GPU, which receives a copy of the
	// weight, when the GPU's offload_op accepts the op (offloadBatch).
	offload bool
	// offloadTo is that GPU: the first that accepts offloaded ops.
	offloadTo string
	// cacheTypes are the element types of the caches, by the names the
	// graph descriptions give them.
	cacheTypes map[string]gguf.GGMLType
	// mem holds the graph's tensors, and the split's copies.
	mem *arena
	// reorders are the devices whose backend reorders a split's nodes
	// before it is allocated (Vulkan's graph_optimize, vkorder.go).
	reorders map[string]bool
	// noBroadcast3 are the devices whose matrix multiplication cannot
	// broadcast its first operand across dimension 3 (Vulkan's
	// supports_op refuses a->ne[3] != b->ne[3]): with several KV streams
	// MLA's decompression by attn_v_b stays where its weight is.
	noBroadcast3 map[string]bool
	// copies is the scheduler's n_copies: more than 1 under pipeline
	// parallelism (sched_pipeline.go).
	copies int
}

// elemType is the element type ggml gives t: a view keeps the type of the
// tensor it views. The graph descriptions lay most caches out as f32
// placeholders (the caches are sized elsewhere), but llama.cpp stores K and
// V in the context's cache types, and a view of a cache that a split copies
// to another backend is copied in that type.
func (o schedOptions) elemType(t *gtensor) gguf.GGMLType {
	owner := t
	if t.op == opView && t.view != nil {
		owner = t.view
	}
	if owner.external && !owner.isWeight {
		if typ, ok := o.cacheTypes[owner.name]; ok {
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
func (o schedOptions) bytesOf(t *gtensor) int64 {
	if t.span > 0 {
		return t.span
	}
	if t.op != opView && !(t.external && !t.isWeight) {
		return t.bytes
	}
	row, _ := o.elemType(t).RowSize(uint64(t.layout.ne[0]))
	return int64(row) * t.layout.ne[1] * t.layout.ne[2] * t.layout.ne[3]
}

// minOffloadBatch is the batch size from which Vulkan's offload_op takes an
// op (op_offload_min_batch_size: GGML_OP_OFFLOAD_MIN_BATCH, 32 by default).
const minOffloadBatch = 32

// offloadBatch is the batch size Vulkan's offload_op judges op n by
// (ggml_vk_get_op_batch_size), n reading weight w: none for GET_ROWS, whose
// lookup reads a few rows of its table; the columns (ne[1]) of a matrix
// multiplication and the tokens (ne[2]) of an expert multiplication; the
// rows of any other op, so that ADD_ID, which adds a bias row per selected
// expert and token, counts both. An op whose first source is its weight is
// a multiplication or a lookup here; an expert multiplication also reads
// the ids of the selected experts, a third source.
func offloadBatch(n, w *gtensor) int64 {
	ne := n.layout.ne
	switch {
	case len(n.src) == 0 || n.src[0] != w:
		return ne[1] * ne[2] * ne[3]
	case n.gather:
		return 0
	case len(n.src) == 3:
		return ne[2]
	default:
		return ne[1]
	}
}

// assign gives every node a backend with the scheduler's passes: ops on
// pre-allocated tensors (weights, caches) run where those live, or on the
// first GPU when their host weight may be offloaded; the rest inherit from
// their neighbours, GPU assignments spreading first.
func assign(g *graph, o schedOptions) {
	isGPU := func(d string) bool { return d != "" && d != o.cpu }
	size := o.bytesOf
	// supports is the device's supports_op as far as sizes go: a GPU
	// cannot bind a tensor larger than its largest binding, in or out.
	supports := func(dev string, n *gtensor) bool {
		if !isGPU(dev) {
			return true
		}
		if o.noBroadcast3[dev] && n.kind == kMulMat && len(n.src) >= 2 && max(n.src[0].layout.ne[3], 1) != max(n.src[1].layout.ne[3], 1) {
			return false
		}
		limit := o.maxAlloc[dev]
		if limit == 0 {
			return true
		}
		if size(n) > limit {
			return false
		}
		for _, s := range n.src {
			if size(s) > limit {
				return false
			}
		}
		return true
	}
	for _, t := range g.leafs {
		if !t.external {
			t.dev = o.cpu // graph inputs are set by the host
		}
	}
	for _, n := range g.nodes {
		if n.op == opView {
			if len(n.src) > 1 && n.view != nil && n.view.external {
				n.dev = n.view.home // a write into a cache (set_rows)
			}
			continue
		}
		for _, s := range n.src {
			owner := s
			if s.op == opView && s.view != nil {
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
			case o.offload && o.offloadTo != "" && offloadBatch(n, owner) >= minOffloadBatch &&
				(o.maxAlloc[o.offloadTo] == 0 || owner.bytes <= o.maxAlloc[o.offloadTo]):
				n.dev = o.offloadTo
			default:
				n.dev = o.cpu
			}
			if !supports(n.dev, n) {
				n.dev = o.cpu
			}
			break
		}
	}
	nodes := make([]*gtensor, 0, len(g.nodes))
	for _, n := range g.nodes {
		if n.op != opView || n.dev != "" {
			nodes = append(nodes, n)
		}
	}
	expand := func(reverse, gpuOnly bool) {
		cur := ""
		for i := range nodes {
			n := nodes[i]
			if reverse {
				n = nodes[len(nodes)-1-i]
			}
			switch {
			case n.dev == "":
				if cur != "" && supports(cur, n) {
					n.dev = cur
				}
			case gpuOnly && !isGPU(n.dev):
				cur = ""
			default:
				cur = n.dev
			}
		}
	}
	expand(false, true)
	expand(true, true)
	expand(false, false)
	expand(true, false)
	for _, n := range nodes {
		if n.dev == "" {
			n.dev = o.cpu
		}
	}
}

// maxSplitInputs is GGML_SCHED_MAX_SPLIT_INPUTS, the inputs a split
// holds before the scheduler starts a new one rather than grow the list.
const maxSplitInputs = 30

// splitGraph rewrites an assigned graph as the scheduler runs it (pass 5 of
// ggml_backend_sched_split_graph, then the graph copy it allocates): nodes
// are cut into splits of one backend, the inputs a split needs from another
// backend are copied to it at the start of the split, and the split's nodes
// read the copies. A copy is made once per tensor and backend, so a later
// split on the same backend reads the earlier copy and keeps it alive.
func splitGraph(g *graph, o schedOptions) *graph {
	devOf := func(t *gtensor) string {
		if t.op == opView && t.view != nil {
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
	nodeDev := func(n *gtensor) string {
		if n.dev != "" {
			return n.dev
		}
		return devOf(n)
	}
	// plain views are not scheduled: they run in whatever split is open
	// and read their sources where they are.
	plainView := func(n *gtensor) bool { return n.op == opView && len(n.src) <= 1 && !n.inplace }
	// needsCopy says whether split backend dev must copy source s in. Only
	// one backend's buffers are usable by another here (the CPU's host
	// memory is not a GPU's, nor the reverse), so a source elsewhere is
	// copied; caches are only read through views, which are.
	needsCopy := func(s *gtensor, dev string) bool {
		return devOf(s) != dev && !(s.external && !s.isWeight)
	}
	// A split's nodes are g.nodes[start:end]: every node joins the split
	// open when it comes.
	type split struct {
		dev        string
		inputs     []*gtensor // the copies made at the start of the split
		start, end int
	}
	var splits []*split
	// A copy is named after its source; its dev says where it is.
	type copyKey struct {
		t   *gtensor
		dev string
	}
	copies := map[copyKey]*gtensor{}
	for i, n := range g.nodes {
		if plainView(n) && len(splits) > 0 {
			splits[len(splits)-1].end = i + 1
			continue
		}
		dev := nodeDev(n)
		var cur *split
		if len(splits) > 0 {
			cur = splits[len(splits)-1]
		}
		// A split that already copies something in ends before a node
		// that needs a weight from another backend, so the memory of the
		// weights copied so far can be reused, and before a node that
		// needs a new copy once it holds GGML_SCHED_MAX_SPLIT_INPUTS.
		newSplit := cur == nil || cur.dev != dev
		if !newSplit && len(cur.inputs) > 0 && !plainView(n) {
			for _, s := range n.src {
				if s.isWeight && devOf(s) != dev {
					newSplit = true
					break
				}
				if len(cur.inputs) >= maxSplitInputs && needsCopy(s, dev) && copies[copyKey{s, dev}] == nil {
					newSplit = true
					break
				}
			}
		}
		if newSplit {
			cur = &split{dev: dev, start: i}
			splits = append(splits, cur)
		}
		cur.end = i + 1
		if plainView(n) {
			continue
		}
		cloned := false
		for j, s := range n.src {
			if !needsCopy(s, dev) {
				continue
			}
			c := copies[copyKey{s, dev}]
			if c == nil {
				c = o.mem.tensor()
				c.name, c.bytes, c.op, c.dev, c.layout = s.name, o.bytesOf(s), opOther, dev, s.layout
				// The copy is ggml_dup_tensor_layout's: GGML_OP_NONE, which
				// the Vulkan reorder takes for a ready source (a RoPE whose
				// positions were copied in still joins its norm).
				c.kind = kNone
				if !s.external {
					c.src = o.mem.list(1) // the source lives until it is copied
					c.src[0] = s
				}
				copies[copyKey{s, dev}] = c
				cur.inputs = append(cur.inputs, c)
			}
			if !cloned {
				clone := o.mem.list(len(n.src))
				copy(clone, n.src)
				n.src, cloned = clone, true
			}
			n.src[j] = c
		}
	}
	if g.kinds {
		for _, sp := range splits {
			if o.reorders[sp.dev] {
				vkReorder(g.nodes[sp.start:sp.end])
			}
		}
	}
	out := &graph{leafs: g.leafs, nodes: o.mem.split[:0]}
	var splitInputs []*gtensor
	for _, sp := range splits {
		out.nodes = append(out.nodes, sp.inputs...)
		out.nodes = append(out.nodes, g.nodes[sp.start:sp.end]...)
		splitInputs = append(splitInputs, sp.inputs...)
	}
	if o.copies > 1 {
		out.leafs = pipelineLeafs(g.leafs, g.nodes, splitInputs, o)
	}
	o.mem.split = out.nodes // its room serves the next split graph
	return out
}

// splitComputeBytes replays the worst-case graphs on a CPU and GPUs split
// and returns each backend buffer's size, keyed by device name (the CPU's
// buffer is its host buffer type).
func splitComputeBytes(m *arch.Model, c Context, p Profile, cpu Device, gpus []Device, layerDev []string, homes map[string]home, mem *arena, build graphBuilder) map[string]int64 {
	if mem == nil {
		mem = &arena{}
	}
	kv := make([]string, len(m.Layers))
	for i := range kv {
		kv[i] = layerDev[i]
		if p.NoKVOffload {
			kv[i] = cpu.Name
		}
	}
	o := schedOptions{cpu: cpu.Name, maxAlloc: map[string]int64{},
		cacheTypes: map[string]gguf.GGMLType{"cache_k": c.TypeK, "cache_v": c.TypeV}}
	if g := offloadGPU(gpus); g != nil {
		o.offloadTo = g.Name
	}
	align := map[string]int64{cpu.Name: cpuAlign}
	chunk, pad := map[string]int64{}, map[string]int64{}
	if h := hostGPU(gpus); h != nil {
		chunk[cpu.Name] = h.computeChunk() // the host buffer type's
		align[cpu.Name] = h.hostAlignment()
		pad[cpu.Name] = h.hostPad() // added to each chunk's buffer
	}
	o.reorders, o.noBroadcast3 = map[string]bool{}, map[string]bool{}
	for _, g := range gpus {
		o.gpus = append(o.gpus, g.Name)
		o.reorders[g.Name] = g.Backend == "Vulkan"
		o.noBroadcast3[g.Name] = g.Backend == "Vulkan"
		o.maxAlloc[g.Name] = g.MaxAlloc
		align[g.Name] = g.alignment()
		chunk[g.Name] = g.computeChunk()
	}
	peak := map[string]int64{}
	// As on the CPU, the one-token-per-sequence graph only matters when
	// there are more sequences than micro-batch tokens: every tensor the
	// allocator places grows with the token count, and without op offload
	// it copies no weights.
	graphs := []int{c.NUBatch}
	if c.NSeq > c.NUBatch {
		graphs = append(graphs, c.NSeq)
	}
	o.offload = true // llama.cpp's default
	o.copies = schedCopies(m, p, gpus, layerDev)
	for _, tokens := range graphs {
		mem.reset() // the last graph is done with
		o.mem = mem
		b := &gb{cpu: cpu.Name, homes: homes, kvDev: kv, layerDev: layerDev, mem: mem}
		b.g.nodes, b.g.leafs = mem.nodes[:0], mem.leafs[:0]
		g := build(m, c, tokens, b)
		mem.nodes, mem.leafs = b.g.nodes, b.g.leafs
		pinLayerNorms(g, layerDev, tokens < 32 || fullOffload(m, p))
		assign(g, o)
		split := splitGraph(g, o)
		// One allocator per backend buffer; a handful of devices, so a
		// list is quicker than a map.
		type devAlloc struct {
			dev string
			a   *dynAlloc
		}
		var allocs []devAlloc
		reserveOn(split, func(t *gtensor) *dynAlloc {
			d := t.dev
			if d == "" {
				d = cpu.Name
			}
			for _, x := range allocs {
				if x.dev == d {
					return x.a
				}
			}
			a := newDynAlloc(align[d], chunk[d])
			allocs = append(allocs, devAlloc{d, a})
			return a
		})
		for _, x := range allocs {
			peak[x.dev] = max(peak[x.dev], x.a.size()+pad[x.dev]*int64(len(x.a.chunks)))
		}
	}
	return peak
}

// weightHomes says where each weight of the graph lives, by GGUF name.
func weightHomes(m *arch.Model, p Profile, cpu Device, gpus []Device, layerDev []string) map[string]home {
	homes := make(map[string]home, len(m.Tensors)+1)
	weightsInto(m, p, cpu, gpus, layerDev, homes)
	return homes
}
