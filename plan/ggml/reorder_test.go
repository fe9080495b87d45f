package ggml

import (
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// The Vulkan and Metal backends' graph optimizers on small graphs whose
// right order is worked out by hand, and what the order does to the
// measured buffer.

// reorderRules sets the scheduler's rule switches for this file (80fb11a's
// rules, or de3ff81's with fusion).
func reorderRules(o *Sched, fusion bool) *Sched {
	o.Rules.VulkanFusion, o.Rules.MetalFusion = fusion, fusion
	return o
}

// twoHeads records two independent products of x, each reduced to its
// row sums, and their sum: [a, a2, c, c2, f]. x is 16x4 F32 (256 bytes),
// a and c 64x4 (1024), a2, c2 and f 1x4 (16 bytes, 256 aligned).
func twoHeads() (g *Graph, a, a2, c2nd, c2, f *Tensor) {
	var c Ctx
	x := c.Input("x", gguf.TypeF32, 16, 4)
	wq := c.External("wq", gguf.TypeF32, "CPU", 16, 64).SetWeight(16 * 64 * 4)
	wk := c.External("wk", gguf.TypeF32, "CPU", 16, 64).SetWeight(16 * 64 * 4)
	a = c.MulMat(wq, x)
	a2 = c.SumRows(a)
	c2nd = c.MulMat(wk, x)
	c2 = c.SumRows(c2nd)
	f = c.Add(a2, c2)
	named(map[string]*Tensor{"a": a, "a2": a2, "c": c2nd, "c2": c2, "f": f})
	c.Expand(f)
	return &c.G, a, a2, c2nd, c2, f
}

// TestReorderTwoHeads: both reorders run the two products together.
//
// Vulkan, from the first unplaced node a: a2 reads a (not ready), c is
// independent (taken), c2 reads c (which does not fuse with it), f reads
// a2: the set is {a, c}. Then {a2, c2}, then f: [a, c, a2, c2, f].
//
// Metal: a joins the empty set; a2 reads a, a barrier, before which the
// look-ahead takes c (it touches nothing of a's and nothing of a2's), and
// not c2 (reads c) nor f (reads a2); after the barrier a2, then c2 (it
// reads nothing a2 writes), then f behind a barrier: the same order.
//
// The buffer (256-aligned): as recorded, x [0,256), a [256,1280), a2
// [1280,1536), a freed; c in a's hole, x freed, c2 in x's, f over a2 in
// place: 1536. Reordered, a and c live together: x [0,256), a
// [256,1280), c [1280,2304), and the small ones fit in the holes: 2304.
func TestReorderTwoHeads(t *testing.T) {
	for _, fusion := range []bool{false, true} {
		for _, opt := range []Optimizer{OptVulkan, OptMetal} {
			g, a, a2, c, c2, f := twoHeads()
			switch opt {
			case OptVulkan:
				vkReorder(g.nodes, fusion)
			case OptMetal:
				var epoch uint32
				metalOptimize(g.nodes, fusion, &Arena{}, &epoch)
			}
			if want := []*Tensor{a, c, a2, c2, f}; !slices.Equal(g.nodes, want) {
				t.Errorf("optimizer %d fusion %v: order %v, want %v", opt, fusion, names(g.nodes), names(want))
			}
		}
		for _, m := range []struct {
			opt  Optimizer
			peak int64
		}{{OptNone, 1536}, {OptVulkan, 2304}, {OptMetal, 2304}} {
			o := reorderRules(&Sched{CPU: "CPU", Mem: &Arena{}, Optimize: map[string]Optimizer{"CPU": m.opt},
				Buffers: map[string]BufferType{"CPU": {Align: 256}}}, fusion)
			g, _, _, _, _, _ := twoHeads()
			if got := o.Measure(g)["CPU"]; got != m.peak {
				t.Errorf("optimizer %d fusion %v: %d bytes, want %d", m.opt, fusion, got, m.peak)
			}
		}
	}
}

// TestVulkanKeepsFusedRuns: [n = rms_norm(x), m = n*w, d = m+bias, p =
// wp·y]. Before de3ff81 the reorder keeps RMS_NORM and its MUL together
// (they fuse, so m may follow n in one set) but not the ADD, which depends
// on m and does not fuse with a MUL in that rule; p, independent, joins
// the set: [n, m, p, d]. de3ff81 keeps the RMS_NORM, MUL, ADD run in place
// when it starts the unplaced nodes: [n, m, d, p].
func TestVulkanKeepsFusedRuns(t *testing.T) {
	for _, tc := range []struct {
		fusion bool
		order  []int
	}{{false, []int{0, 1, 3, 2}}, {true, []int{0, 1, 2, 3}}} {
		var c Ctx
		n := c.RMSNorm(c.Input("x", gguf.TypeF32, 64, 4))
		m := c.Mul(n, c.External("w", gguf.TypeF32, "CPU", 64))
		d := c.Add(m, c.External("bias", gguf.TypeF32, "CPU", 64))
		c.Expand(d)
		p := c.MulMat(c.External("wp", gguf.TypeF32, "CPU", 64, 64), c.Input("y", gguf.TypeF32, 64, 4))
		c.Expand(p)
		recorded := slices.Clone(c.G.nodes)
		if deps := vkReorder(c.G.nodes, tc.fusion); deps != nil {
			t.Errorf("fusion %v: deps %v", tc.fusion, deps)
		}
		var want []*Tensor
		for _, i := range tc.order {
			want = append(want, recorded[i])
		}
		if !slices.Equal(c.G.nodes, want) {
			t.Errorf("fusion %v: order %v, want %v", tc.fusion, names(c.G.nodes), names(want))
		}
	}
}

// TestVulkanTopKDeps: de3ff81 keeps a top-k MoE selection in place (the
// first of its patterns, ten nodes from the SOFT_MAX) and keeps what the
// run reads from outside, the logits, alive until its last node, or the
// SCALE right after it, which the shader fuses too. 80fb11a adds nothing.
func TestVulkanTopKDeps(t *testing.T) {
	for _, scaled := range []bool{false, true} {
		var c Ctx
		logits := c.Input("logits", gguf.TypeF32, 128, 16)
		probs := c.SoftMax(logits, nil, nil)
		sel := c.View(c.Argsort(probs), 8, 16)
		w2 := c.Reshape(c.GetRows(c.Reshape(probs, 1, 128, 16), sel), 8, 16)
		w := c.Reshape(c.Div(w2, c.Clamp(c.SumRows(w2))), 1, 8, 16)
		until := w
		if scaled {
			until = c.Scale(w)
		}
		c.Expand(c.Mul(c.Input("x", gguf.TypeF32, 1, 8, 16), until))
		recorded := slices.Clone(c.G.nodes)
		if d := vkReorder(slices.Clone(c.G.nodes), false); d != nil {
			t.Errorf("80fb11a: deps %v", d)
		}
		deps := vkReorder(c.G.nodes, true)
		if len(deps) != 1 || deps[0].Until != until || !slices.Equal(deps[0].Keep, []*Tensor{logits}) {
			t.Errorf("scaled %v: deps %+v, want the logits kept until node %v", scaled, deps, names([]*Tensor{until}))
		}
		if !slices.Equal(c.G.nodes, recorded) {
			t.Errorf("scaled %v: the run moved: %v", scaled, names(c.G.nodes))
		}
	}
}

// TestMetalReorder: the Metal optimizer moves a later node before a
// barrier when it touches nothing the current set or the nodes it skips
// write. [a = w1·x, b = scale(a), c = w2·x, d = b+c]: b reads a (a
// barrier); c touches neither a nor b and moves up; d reads b and c:
// [a, c, b, d].
//
// With a fused run, [a = w1·x, s = scale(a), n = rms_norm(y), m = n*wn,
// d = glu(s, m)]: both rules pack n and m into one node (80fb11a's ADD,
// NORM, RMS_NORM runs; de3ff81's RMS_NORM+MUL pattern), which moves past
// s as one: [a, n, m, s, d]. de3ff81 also keeps the run's outside sources
// (y, wn) alive until m.
func TestMetalReorder(t *testing.T) {
	for _, fusion := range []bool{false, true} {
		var c Ctx
		x := c.Input("x", gguf.TypeF32, 64, 4)
		weight := func(name string, ne ...int64) *Tensor { return c.External(name, gguf.TypeF32, "CPU", ne...) }
		a := c.MulMat(weight("w1", 64, 64), x)
		b := c.Scale(a)
		cc := c.MulMat(weight("w2", 64, 64), x)
		d := c.Add(b, cc)
		c.Expand(d)
		var epoch uint32
		if deps := metalOptimize(c.G.nodes, fusion, &Arena{}, &epoch); deps != nil {
			t.Errorf("fusion %v: deps %v", fusion, deps)
		}
		if want := []*Tensor{a, cc, b, d}; !slices.Equal(c.G.nodes, want) {
			t.Errorf("fusion %v: order %v, want a, c, b, d", fusion, names(c.G.nodes))
		}

		var c2 Ctx
		y := c2.Input("y", gguf.TypeF32, 64, 4)
		wn := c2.External("wn", gguf.TypeF32, "CPU", 64)
		a = c2.MulMat(c2.External("w1", gguf.TypeF32, "CPU", 64, 64), c2.Input("x", gguf.TypeF32, 64, 4))
		s := c2.Scale(a)
		c2.Expand(s)
		n := c2.RMSNorm(y)
		m := c2.Mul(n, wn)
		d = c2.GLU(s, m)
		c2.Expand(d)
		deps := metalOptimize(c2.G.nodes, fusion, &Arena{}, &epoch)
		if want := []*Tensor{a, n, m, s, d}; !slices.Equal(c2.G.nodes, want) {
			t.Errorf("fusion %v: order %v, want a, n, m, s, d", fusion, names(c2.G.nodes))
		}
		var want []AllocDep
		if fusion {
			want = []AllocDep{{Until: m, Keep: []*Tensor{y, wn}}}
		}
		if len(deps) != len(want) || len(want) == 1 && (deps[0].Until != m || !slices.Equal(deps[0].Keep, want[0].Keep)) {
			t.Errorf("fusion %v: deps %+v, want %+v", fusion, deps, want)
		}
	}
}
