package ggml

import (
	"maps"
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// The scheduler (ggml-backend.cpp, ggml_backend_sched_split_graph) on
// small graphs over a CPU and one or two GPUs: which backend each node
// gets, where the splits are cut, which tensors each split copies in from
// another backend, and what the copies add to each backend's measured
// buffer. Tensors are 64x3 F32 (768 bytes) unless noted.

// schedRules sets the scheduler's rule switches for this file: the one
// place to follow when they are renamed.
func schedRules(o *Sched, growInputs bool) *Sched {
	o.Rules.SplitInputsGrow = growInputs
	return o
}

// newSched is a scheduler over the CPU and the GPUs of bufs.
func newSched(bufs map[string]BufferType) *Sched {
	return schedRules(&Sched{CPU: "CPU", Mem: &Arena{}, Buffers: bufs}, false)
}

// splitWant is a split as the tests state it: its backend, its nodes and
// the tensors it copies in (the originals, in the order it copies them).
type splitWant struct {
	dev    string
	nodes  []*Tensor
	copies []*Tensor
}

// cut assigns g and cuts it into splits (split's first pass), returning
// them in splitWant's terms and the copies, by original and backend.
func cut(o *Sched, g *Graph) ([]splitWant, map[copyKey]*Tensor) {
	o.assign(g)
	s := &splitter{o: o, copies: map[copyKey]*Tensor{}}
	s.addAll(g.nodes)
	orig := map[*Tensor]*Tensor{}
	for k, c := range s.copies {
		orig[c] = k.t
	}
	var out []splitWant
	for _, sp := range s.splits {
		w := splitWant{dev: sp.dev, nodes: g.nodes[sp.start:sp.end]}
		for _, c := range sp.inputs {
			w.copies = append(w.copies, orig[c])
		}
		out = append(out, w)
	}
	return out, s.copies
}

func checkSplits(t *testing.T, name string, got, want []splitWant) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d splits, want %d", name, len(got), len(want))
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.dev != w.dev || !slices.Equal(g.nodes, w.nodes) || !slices.Equal(g.copies, w.copies) {
			t.Errorf("%s: split %d on %s, nodes %v, copies %v; want %s, %v, %v", name, i, g.dev,
				names(g.nodes), names(g.copies), w.dev, names(w.nodes), names(w.copies))
		}
	}
}

func checkBytes(t *testing.T, name string, got, want map[string]int64) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s: buffers %v, want %v", name, got, want)
	}
}

// named names computed tensors so that failures read.
func named(ts map[string]*Tensor) {
	for n, t := range ts {
		if t.Name == "" {
			t.Name = n
		}
	}
}

// twoBackends is a layer on GPU0 and the next on the CPU:
// h1 = w1·inp (w1 on GPU0), h2 = rms_norm(h1), h3 = w2·h2 (w2 on the
// CPU), out = h3 + h1.
func twoBackends() (g *Graph, inp, h1, h2, h3, out *Tensor) {
	var c Ctx
	inp = c.Input("inp", gguf.TypeF32, 64, 3)
	w1 := c.External("w1", gguf.TypeF32, "GPU0", 64, 64).SetWeight(64 * 64 * 4)
	w2 := c.External("w2", gguf.TypeF32, "CPU", 64, 64).SetWeight(64 * 64 * 4)
	h1 = c.MulMat(w1, inp)
	h2 = c.RMSNorm(h1)
	h3 = c.MulMat(w2, h2)
	out = c.Add(h3, h1)
	named(map[string]*Tensor{"h1": h1, "h2": h2, "h3": h3, "out": out})
	c.Expand(out)
	return &c.G, inp, h1, h2, h3, out
}

// TestSchedTwoBackends: an op runs where its weight is (h1 on GPU0, h3 on
// the CPU); the norm, with no weight, follows h1 onto GPU0 (the GPU pass
// expands first) and out follows h3. A split is cut where the backend
// changes, and each split copies in what it reads from another backend:
// GPU0 the input, the CPU h2 and h1.
//
// Bytes, in split-graph order [inp→GPU0, h1, h2, h2→CPU, h1→CPU, h3, out]:
// GPU0 (512-aligned: 1024 a tensor) inp's copy [0,1024), h1 [1024,2048),
// the copy freed; h1 has a second reader (its CPU copy), so h2 does not
// run in place and takes [0,1024): 2048, plus the buffer's pad of 64.
// CPU (32-aligned) inp [0,768) until its copy; h2's copy [0,768), h1's
// [768,1536), h3 [1536,2304), out over h3 in place: 2304.
func TestSchedTwoBackends(t *testing.T) {
	bufs := map[string]BufferType{"CPU": {Align: 32}, "GPU0": {Align: 512, Pad: 64}}
	g, inp, h1, h2, h3, out := twoBackends()
	o := newSched(bufs)
	splits, copies := cut(o, g)
	for _, d := range []struct {
		t   *Tensor
		dev string
	}{{inp, "CPU"}, {h1, "GPU0"}, {h2, "GPU0"}, {h3, "CPU"}, {out, "CPU"}} {
		if d.t.Backend() != d.dev {
			t.Errorf("%s on %q, want %s", d.t.Name, d.t.Backend(), d.dev)
		}
	}
	checkSplits(t, "two backends", splits, []splitWant{
		{"GPU0", []*Tensor{h1, h2}, []*Tensor{inp}},
		{"CPU", []*Tensor{h3, out}, []*Tensor{h2, h1}},
	})
	// The nodes read the copies.
	if h1.src[1] != copies[copyKey{inp, "GPU0"}] || h3.src[1] != copies[copyKey{h2, "CPU"}] ||
		out.src[1] != copies[copyKey{h1, "CPU"}] || out.src[0] != h3 {
		t.Error("sources not pointed at the copies")
	}
	// The graph the scheduler allocates: each split's copies first.
	g2, inp2, h1b, h2b, h3b, outb := twoBackends()
	o2 := newSched(bufs)
	o2.assign(g2)
	sg := o2.split(g2)
	if len(sg.nodes) != 7 || sg.nodes[0].src[0] != inp2 || sg.nodes[0].dev != "GPU0" ||
		sg.nodes[1] != h1b || sg.nodes[2] != h2b || sg.nodes[3].src[0] != h2b || sg.nodes[3].dev != "CPU" ||
		sg.nodes[4].src[0] != h1b || sg.nodes[4].dev != "CPU" || sg.nodes[5] != h3b || sg.nodes[6] != outb {
		t.Errorf("split graph %v", names(sg.nodes))
	}
	g3, _, _, _, _, _ := twoBackends()
	checkBytes(t, "two backends", newSched(bufs).Measure(g3), map[string]int64{"CPU": 2304, "GPU0": 2048 + 64})
}

// threeBackends: a = w0·inp on GPU0, b = w1·a on GPU1, cc = b + inp,
// d = wout·cc on the CPU, e = d + a.
func threeBackends() (g *Graph, inp, a, b, cc, d, e *Tensor) {
	var c Ctx
	inp = c.Input("inp", gguf.TypeF32, 64, 3)
	weight := func(name, dev string) *Tensor {
		return c.External(name, gguf.TypeF32, dev, 64, 64).SetWeight(64 * 64 * 4)
	}
	w0, w1, wout := weight("w0", "GPU0"), weight("w1", "GPU1"), weight("wout", "CPU")
	a = c.MulMat(w0, inp)
	b = c.MulMat(w1, a)
	cc = c.Add(b, inp)
	d = c.MulMat(wout, cc)
	e = c.Add(d, a)
	named(map[string]*Tensor{"a": a, "b": b, "cc": cc, "d": d, "e": e})
	c.Expand(e)
	return &c.G, inp, a, b, cc, d, e
}

// TestSchedThreeBackends: a copy is made per tensor and backend, so inp
// is copied to GPU0 and to GPU1, and a to GPU1 and to the CPU.
//
// Bytes, in split-graph order [inp→GPU0, a | a→GPU1, inp→GPU1, b, cc |
// cc→CPU, a→CPU, d, e]: GPU0 (256-aligned, 768 a tensor) inp's copy
// [0,768), a [768,1536): 1536. GPU1 (512-aligned, 1024) a's copy [0,1),
// inp's [1,2), b [2,3) KiB, cc over b in place: 3072. CPU (32-aligned)
// inp [0,768) until its second copy; cc's copy [0,768), a's [768,1536),
// d [1536,2304), e over d: 2304.
func TestSchedThreeBackends(t *testing.T) {
	bufs := map[string]BufferType{"CPU": {Align: 32}, "GPU0": {Align: 256}, "GPU1": {Align: 512}}
	g, inp, a, b, cc, d, e := threeBackends()
	splits, _ := cut(newSched(bufs), g)
	checkSplits(t, "three backends", splits, []splitWant{
		{"GPU0", []*Tensor{a}, []*Tensor{inp}},
		{"GPU1", []*Tensor{b, cc}, []*Tensor{a, inp}},
		{"CPU", []*Tensor{d, e}, []*Tensor{cc, a}},
	})
	g2, _, _, _, _, _, _ := threeBackends()
	checkBytes(t, "three backends", newSched(bufs).Measure(g2), map[string]int64{"CPU": 2304, "GPU0": 1536, "GPU1": 3072})
}

// TestSchedLeadingViewsJoinFirstSplit: ggml_backend_sched_split_graph
// (pass 5) gives the first split the backend of the first node that is
// not a view op, and the view ops before it run in it: a graph that
// starts with a reshape of a host input has no CPU split holding only the
// reshape, and the GPU split (and so the Vulkan or Metal reorder, which
// runs per split) sees it.
func TestSchedLeadingViewsJoinFirstSplit(t *testing.T) {
	var c Ctx
	x := c.Input("x", gguf.TypeF32, 64, 3)
	r := c.Reshape(x, 64, 3)
	h := c.MulMat(c.External("w", gguf.TypeF32, "GPU0", 64, 64).SetWeight(64*64*4), r)
	c.Expand(h)
	splits, _ := cut(newSched(map[string]BufferType{"CPU": {Align: 32}, "GPU0": {Align: 32}}), &c.G)
	checkSplits(t, "leading view", splits, []splitWant{{"GPU0", []*Tensor{r, h}, []*Tensor{r}}})
	// A graph of view ops alone is one split, on the backend of the
	// memory the first one views.
	var c2 Ctx
	x2 := c2.Input("x", gguf.TypeF32, 64, 3)
	v := c2.View(x2, 32, 3)
	c2.Expand(v)
	splits, _ = cut(newSched(map[string]BufferType{"CPU": {Align: 32}}), &c2.G)
	checkSplits(t, "views only", splits, []splitWant{{"CPU", []*Tensor{v}, nil}})
}

// TestSchedPlacesClamp: ggml_clamp's result is a view of its input but
// CLAMP is no view op, so the scheduler's expansion gives it its
// neighbours' backend as it does any node.
func TestSchedPlacesClamp(t *testing.T) {
	var c Ctx
	w := c.External("w", gguf.TypeF32, "GPU0", 64, 64).SetWeight(64 * 64 * 4)
	cl := c.Clamp(c.SumRows(c.MulMat(w, c.Input("x", gguf.TypeF32, 64, 3))))
	c.Expand(cl)
	o := newSched(map[string]BufferType{"CPU": {Align: 32}, "GPU0": {Align: 32}})
	o.assign(&c.G)
	if cl.Backend() != "GPU0" {
		t.Errorf("clamp on %q, want GPU0", cl.Backend())
	}
}

// TestSchedReusesCopies: the scheduler copies a tensor to a backend once
// (tensor_id_copy): a later split on GPU0 that reads x again reads the
// copy the first GPU0 split made, which stays alive until then, and copies
// in only what is new to it (b).
//
// Bytes: GPU0 (256-aligned) x's copy [0,768), a [768,1536) until its CPU
// copy; b's copy [768,1536), c [1536,2304), d over c in place: 2304. CPU
// x [0,768) until copied, a's copy [0,768), b [768,1536): 1536.
func TestSchedReusesCopies(t *testing.T) {
	build := func() (g *Graph, x, a, b, cc, d *Tensor) {
		var c Ctx
		x = c.Input("x", gguf.TypeF32, 64, 3)
		weight := func(name, dev string) *Tensor {
			return c.External(name, gguf.TypeF32, dev, 64, 64).SetWeight(64 * 64 * 4)
		}
		a = c.MulMat(weight("wg", "GPU0"), x)
		b = c.MulMat(weight("wc", "CPU"), a)
		cc = c.MulMat(weight("wg2", "GPU0"), b)
		d = c.Add(cc, x)
		named(map[string]*Tensor{"a": a, "b": b, "c": cc, "d": d})
		c.Expand(d)
		return &c.G, x, a, b, cc, d
	}
	bufs := map[string]BufferType{"CPU": {Align: 32}, "GPU0": {Align: 256}}
	g, x, a, b, cc, d := build()
	splits, copies := cut(newSched(bufs), g)
	checkSplits(t, "reused copy", splits, []splitWant{
		{"GPU0", []*Tensor{a}, []*Tensor{x}},
		{"CPU", []*Tensor{b}, []*Tensor{a}},
		{"GPU0", []*Tensor{cc, d}, []*Tensor{b}},
	})
	if d.src[1] != copies[copyKey{x, "GPU0"}] || a.src[1] != d.src[1] {
		t.Error("d does not read the first split's copy of x")
	}
	g2, _, _, _, _, _ := build()
	checkBytes(t, "reused copy", newSched(bufs).Measure(g2), map[string]int64{"CPU": 1536, "GPU0": 2304})
}

// TestSchedOffload: with op offload, a product whose weight is in host
// memory runs on the first GPU when its batch reaches 32 columns
// (GGML_OP_OFFLOAD_MIN_BATCH) and the GPU can bind the weight; the weight
// is copied in, and a node that needs a further weight from another
// backend starts a new split, so that the copies' memory can be reused.
//
// Bytes at 32 tokens (x and a 64x32 F32, 8192 bytes; weights 16384),
// GPU0 256-aligned: w1's copy [0,16384), x's [16384,24576), a
// [24576,32768); both copies freed, w2's copy takes [0,16384) and b
// [16384,24576): 32768. The CPU holds x alone: 8192. At 31 tokens
// nothing moves: x [0,7936), a [7936,15872), b in x's place: 15872.
func TestSchedOffload(t *testing.T) {
	build := func(tokens int64) (g *Graph, x, w1, w2, a, b *Tensor) {
		var c Ctx
		x = c.Input("x", gguf.TypeF32, 64, tokens)
		w1 = c.External("w1", gguf.TypeF32, "CPU", 64, 64).SetWeight(64 * 64 * 4)
		w2 = c.External("w2", gguf.TypeF32, "CPU", 64, 64).SetWeight(64 * 64 * 4)
		a = c.MulMat(w1, x)
		b = c.MulMat(w2, a)
		named(map[string]*Tensor{"a": a, "b": b})
		c.Expand(b)
		return &c.G, x, w1, w2, a, b
	}
	offload := func(maxAlloc int64) *Sched {
		o := newSched(map[string]BufferType{"CPU": {Align: 32}, "GPU0": {Align: 256}})
		o.Offload, o.OffloadTo, o.MaxAlloc = true, "GPU0", map[string]int64{"GPU0": maxAlloc}
		return o
	}
	g, x, w1, w2, a, b := build(32)
	splits, _ := cut(offload(0), g)
	checkSplits(t, "offload", splits, []splitWant{
		{"GPU0", []*Tensor{a}, []*Tensor{w1, x}},
		{"GPU0", []*Tensor{b}, []*Tensor{w2}},
	})
	g, _, _, _, _, _ = build(32)
	checkBytes(t, "offload", offload(0).Measure(g), map[string]int64{"CPU": 8192, "GPU0": 32768})

	// Below the batch, or with a weight larger than the GPU can bind,
	// the products stay with their weights: one CPU split, no copies.
	for _, tc := range []struct {
		name     string
		tokens   int64
		maxAlloc int64
		cpu      int64
	}{
		{"31 tokens", 31, 0, 15872},
		{"weight over the binding limit", 32, 16000, 16384}, // x, a 8192 each
	} {
		g, _, _, _, a, b := build(tc.tokens)
		splits, _ := cut(offload(tc.maxAlloc), g)
		checkSplits(t, tc.name, splits, []splitWant{{"CPU", []*Tensor{a, b}, nil}})
		g, _, _, _, _, _ = build(tc.tokens)
		checkBytes(t, tc.name, offload(tc.maxAlloc).Measure(g), map[string]int64{"CPU": tc.cpu})
	}
}

// TestSchedSplitInputs: before de3ff81 a split that holds
// GGML_SCHED_MAX_SPLIT_INPUTS (30) copies ends before a node that needs
// one more; with the rule off it grows. A GPU0 chain reads 31 host
// inputs, one a node.
func TestSchedSplitInputs(t *testing.T) {
	build := func() (g *Graph, xs, chain []*Tensor) {
		var c Ctx
		for i := range 31 {
			xs = append(xs, c.Input("x", gguf.TypeF32, 8))
			var s *Tensor
			if i == 0 {
				s = c.Scale(xs[0])
			} else {
				s = c.Add(chain[i-1], xs[i])
			}
			s.SetBackend("GPU0")
			chain = append(chain, s)
		}
		c.Expand(chain[30])
		return &c.G, xs, chain
	}
	bufs := map[string]BufferType{"CPU": {Align: 32}, "GPU0": {Align: 32}}
	g, xs, chain := build()
	splits, _ := cut(newSched(bufs), g)
	checkSplits(t, "30 inputs", splits, []splitWant{
		{"GPU0", chain[:30], xs[:30]},
		{"GPU0", chain[30:], xs[30:]},
	})
	g, xs, chain = build()
	splits, _ = cut(schedRules(newSched(bufs), true), g)
	checkSplits(t, "growing inputs", splits, []splitWant{{"GPU0", chain, xs}})
}

// TestSchedCopySizes: a copy holds ggml_nbytes of what it copies. A view
// of a cache is copied in the cache's type (the graph's F32 placeholder
// is an F16 cache: 64 F16 x 10 rows, 1280 bytes, not 2560), and a
// strided view from its first element to its last (32 F32, then 2 rows of
// the 96-wide tensor's 384-byte stride: 128 + 768 = 896, not 384).
//
// GPU0 (128-aligned), in split-graph order [v→GPU0, kv→GPU0, u, kv, att]:
// v's copy [0,896), kv's [896,2176), u (64x3, 768) [2176,2944), v's copy
// freed, att (10x3 F32, 120 → 128) in its hole: 2944. The CPU holds x
// [0,768) and p (96x3, 1152) [768,1920): 1920.
func TestSchedCopySizes(t *testing.T) {
	build := func() (g *Graph, p, v, u, kv, att *Tensor) {
		var c Ctx
		x := c.Input("x", gguf.TypeF32, 64, 3)
		kc := c.External("cache_k", gguf.TypeF32, "CPU", 64, 100)
		wc := c.External("wc", gguf.TypeF32, "CPU", 64, 96).SetWeight(64 * 96 * 4)
		wg := c.External("wg", gguf.TypeF32, "GPU0", 32, 64).SetWeight(32 * 64 * 4)
		p = c.MulMat(wc, x)
		v = c.View(p, 32, 3).Strided(96 * 4)
		u = c.MulMat(wg, v)
		c.Expand(u)
		kv = c.View(kc, 64, 10)
		att = c.MulMat(kv, u)
		named(map[string]*Tensor{"p": p, "v": v, "u": u, "kv": kv, "att": att})
		c.Expand(att)
		return &c.G, p, v, u, kv, att
	}
	sched := func() *Sched {
		o := newSched(map[string]BufferType{"CPU": {Align: 32}, "GPU0": {Align: 128}})
		o.CacheTypes = map[string]gguf.GGMLType{"cache_k": gguf.TypeF16}
		return o
	}
	g, p, v, u, kv, att := build()
	splits, copies := cut(sched(), g)
	// The views run in whatever split is open.
	checkSplits(t, "copy sizes", splits, []splitWant{
		{"CPU", []*Tensor{p, v}, nil},
		{"GPU0", []*Tensor{u, kv, att}, []*Tensor{v, kv}},
	})
	if n := copies[copyKey{v, "GPU0"}].bytes; n != 896 {
		t.Errorf("strided view's copy %d bytes, want 896", n)
	}
	if n := copies[copyKey{kv, "GPU0"}].bytes; n != 1280 {
		t.Errorf("cache view's copy %d bytes, want 1280", n)
	}
	g, _, _, _, _, _ = build()
	checkBytes(t, "copy sizes", sched().Measure(g), map[string]int64{"CPU": 1920, "GPU0": 2944})
}

// TestSchedPipelineCopies: running pipeline parallel (n_copies 4), the
// scheduler keeps four copies of every graph input a node reads and of
// every tensor a split copies in, all flagged input and output: ggml-alloc
// places them before anything else and never frees them.
//
// twoBackends again, 512-aligned GPU0: four copies of inp's copy [0,4096),
// h1 [4096,5120), h2 (h1 has a second reader) [5120,6144): 6144. CPU
// (32-aligned): four of inp, four of h2's copy, four of h1's, 768 bytes
// each, [0,9216); h3 [9216,9984), out over it: 9984.
func TestSchedPipelineCopies(t *testing.T) {
	g, inp, _, _, _, _ := twoBackends()
	o := newSched(map[string]BufferType{"CPU": {Align: 32}, "GPU0": {Align: 512}})
	o.Copies = MaxCopies
	checkBytes(t, "pipeline", o.Measure(g), map[string]int64{"CPU": 9984, "GPU0": 6144})
	if !inp.input || !inp.output {
		t.Error("the graph input is not pinned")
	}
}
