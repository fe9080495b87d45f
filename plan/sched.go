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
	// offload is llama.cpp's op_offload: with a batch of at least 32
	// tokens, an op whose weight is in host memory runs on the first GPU,
	// which receives a copy of the weight.
	offload bool
	// offloadTo is that GPU: the first that accepts offloaded ops.
	offloadTo string
}

// viewBytes is the logical size of a view, which a copy to another backend
// must hold.
func viewBytes(t *gtensor) int64 {
	row, _ := gguf.GGMLType(t.layout.typ).RowSize(uint64(t.layout.ne[0]))
	return int64(row) * t.layout.ne[1] * t.layout.ne[2] * t.layout.ne[3]
}

// assign gives every node a backend with the scheduler's passes: ops on
// pre-allocated tensors (weights, caches) run where those live, or on the
// first GPU when their host weight may be offloaded; the rest inherit from
// their neighbours, GPU assignments spreading first.
func assign(g *graph, o schedOptions) {
	isGPU := func(d string) bool { return d != "" && d != o.cpu }
	size := func(t *gtensor) int64 {
		if t.op == opView || (t.external && !t.isWeight) {
			return viewBytes(t)
		}
		return t.bytes
	}
	// supports is the device's supports_op as far as sizes go: a GPU
	// cannot bind a tensor larger than its largest binding, in or out.
	supports := func(dev string, n *gtensor) bool {
		limit := o.maxAlloc[dev]
		if !isGPU(dev) || limit == 0 {
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
			case o.offload && o.offloadTo != "" && !n.gather &&
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

// splitGraph rewrites an assigned graph as the scheduler runs it: nodes
// are cut into splits of one backend, the inputs a split needs from
// another backend are copied to it at the start of the split (one copy per
// tensor and backend, reused by later splits), and the split's nodes read
// the copies. A weight offloaded to a GPU is copied per use, and each such
// use starts a split.
func splitGraph(g *graph, cpu string) *graph {
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
	// Cut the nodes into splits.
	type split struct {
		dev   string
		nodes []*gtensor
	}
	var splits []split
	weightInSplit := false
	for _, n := range g.nodes {
		dev := nodeDev(n)
		needsWeight := false
		if !(n.op == opView && len(n.src) <= 1) {
			for _, s := range n.src {
				if s.isWeight && s.home != dev {
					needsWeight = true
				}
			}
		}
		if n.op == opView && len(n.src) <= 1 && len(splits) > 0 {
			// plain views belong to whatever split is running
			last := &splits[len(splits)-1]
			last.nodes = append(last.nodes, n)
			continue
		}
		if len(splits) == 0 || splits[len(splits)-1].dev != dev || (needsWeight && weightInSplit) {
			splits = append(splits, split{dev: dev})
			weightInSplit = false
		}
		if needsWeight {
			weightInSplit = true
		}
		last := &splits[len(splits)-1]
		last.nodes = append(last.nodes, n)
	}
	out := &graph{leafs: g.leafs}
	copies := map[*gtensor]map[string]*gtensor{}
	for _, sp := range splits {
		var pre []*gtensor
		for _, n := range sp.nodes {
			if n.op == opView && len(n.src) <= 1 {
				continue
			}
			for i, s := range n.src {
				from := devOf(s)
				if from == sp.dev || (s.external && !s.isWeight) {
					continue
				}
				c := copies[s][sp.dev]
				if c == nil || s.isWeight {
					size := s.bytes
					if s.op == opView {
						size = viewBytes(s)
					}
					c = &gtensor{name: s.name + "#" + sp.dev, bytes: size, op: opOther, dev: sp.dev, layout: s.layout}
					if !s.external {
						c.src = []*gtensor{s} // the source lives until it is copied
					}
					if copies[s] == nil {
						copies[s] = map[string]*gtensor{}
					}
					copies[s][sp.dev] = c
					pre = append(pre, c)
				}
				n.src = append([]*gtensor(nil), n.src...)
				n.src[i] = c
			}
		}
		out.nodes = append(out.nodes, pre...)
		out.nodes = append(out.nodes, sp.nodes...)
	}
	return out
}

// splitComputeBytes replays the worst-case graphs on a CPU and GPUs split
// and returns each backend buffer's size, keyed by device name (the CPU's
// buffer is its host buffer type).
func splitComputeBytes(m *arch.Model, c Context, p Profile, cpu Device, gpus []Device, layerDev []string, build graphBuilder) map[string]int64 {
	homes := weightHomes(m, p, cpu, gpus, layerDev)
	kv := make([]string, len(m.Layers))
	for i := range kv {
		kv[i] = layerDev[i]
		if p.NoKVOffload {
			kv[i] = cpu.Name
		}
	}
	o := schedOptions{cpu: cpu.Name, maxAlloc: map[string]int64{}}
	if g := offloadGPU(gpus); g != nil {
		o.offloadTo = g.Name
	}
	align := map[string]int64{cpu.Name: cpuAlign}
	for _, g := range gpus {
		o.gpus = append(o.gpus, g.Name)
		o.maxAlloc[g.Name] = g.MaxAlloc
		align[g.Name] = g.alignment()
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
	for _, tokens := range graphs {
		o.offload = tokens >= 32
		g := build(m, c, tokens, &gb{cpu: cpu.Name, homes: homes, kvDev: kv})
		assign(g, o)
		split := splitGraph(g, cpu.Name)
		allocs := map[string]*dynAlloc{}
		reserveOn(split, func(t *gtensor) *dynAlloc {
			d := t.dev
			if d == "" {
				d = cpu.Name
			}
			if allocs[d] == nil {
				allocs[d] = newDynAlloc(align[d])
			}
			return allocs[d]
		})
		for d, a := range allocs {
			peak[d] = max(peak[d], a.maxSize)
		}
	}
	return peak
}

// weightHomes says where each weight of the graph lives, by GGUF name.
func weightHomes(m *arch.Model, p Profile, cpu Device, gpus []Device, layerDev []string) map[string]home {
	byName := map[string]Device{cpu.Name: cpu}
	for _, g := range gpus {
		byName[g.Name] = g
	}
	out := map[string]home{}
	for _, t := range m.Tensors {
		dev := cpu.Name
		if t.Layer >= 0 && t.Layer <= m.NLayer {
			dev = layerDev[t.Layer]
		}
		k := chooseBuffer(t, byName[dev], cpu, gpus, p.Mmap)
		if p.expertsOnCPU(t) {
			k = cpuOverride(cpu, p.Mmap)
		}
		out[t.Name] = home{device: k.device, bytes: int64(t.Size)}
		if t.Name == "token_embd.weight" && m.TiedOutput {
			dup := t
			dup.Name, dup.Layer = "output.weight", m.NLayer
			dk := chooseBuffer(dup, byName[layerDev[m.NLayer]], cpu, gpus, p.Mmap)
			out["output.weight"] = home{device: dk.device, bytes: int64(t.Size)}
		}
	}
	return out
}
