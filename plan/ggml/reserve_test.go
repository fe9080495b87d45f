package ggml

import (
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// The graph allocator's rules (ggml-alloc.c, ggml_gallocr_alloc_graph_impl
// and ggml_dyn_tallocr) on small graphs. Every tensor but the noted ones
// is 64x4 F32, 1024 bytes, a multiple of the 256-byte alignment used, so
// the traces below count in KiB: "a [1,2)" is a at offsets 1024..2048.

const kib = 1024

// TestReserveReusesFreedMemory: a chain of NORMs, which never run in
// place, ping-pongs between two blocks. x [0,1), a [1,2), x freed after a
// (its last use); b takes the freed [0,1) (the best fitting free block
// that is not the last); a freed, merging into the tail; c at [1,2) (the
// last block, which needs no growth); b freed; d at [0,1). The buffer
// never holds more than two tensors: 2 KiB.
func TestReserveReusesFreedMemory(t *testing.T) {
	var c Ctx
	w := c.External("w", gguf.TypeF32, "CPU", 64, 64)
	x := c.Input("x", gguf.TypeF32, 64, 4)
	a := c.MulMat(w, x)
	b := c.Norm(a)
	cc := c.Norm(b)
	d := c.Norm(cc)
	c.Expand(d)
	if got := Reserve(&c.G, 256); got != 2*kib {
		t.Errorf("peak %d, want %d", got, 2*kib)
	}
	for _, o := range []struct {
		t    *Tensor
		name string
		at   int64
	}{{x, "x", 0}, {a, "a", kib}, {b, "b", 0}, {cc, "c", kib}, {d, "d", 0}} {
		if o.t.hn.addr.offset != o.at {
			t.Errorf("%s at %d, want %d", o.name, o.t.hn.addr.offset, o.at)
		}
	}
}

// TestReserveInPlace: an op that ggml_op_can_inplace lists takes its
// parent's memory when it is the parent's last consumer, and the parent
// is the allocator's own (not external, not a view), no output, and of
// the same layout. Each graph below keeps x alive to the end (an output,
// never freed) so that no hole hides what the rule saves: x [0,1), a
// [1,2); in place, b (and the last node) stays at [1,2) and the peak is
// 2 KiB; refused, b goes to [2,3) and the peak is 3 KiB.
func TestReserveInPlace(t *testing.T) {
	tests := []struct {
		name string
		// build records b from a (64x4, computed from x) and returns the
		// last node.
		build   func(c *Ctx, a *Tensor) *Tensor
		peak    int64
		inPlace bool // the last node at a's offset
	}{
		{"scale over its parent", func(c *Ctx, a *Tensor) *Tensor { return c.Scale(a) }, 2 * kib, true},
		{"a chain of in-place ops", func(c *Ctx, a *Tensor) *Tensor {
			return c.Unary(c.Sqr(c.Scale(a)))
		}, 2 * kib, true},
		{"rms_norm", func(c *Ctx, a *Tensor) *Tensor { return c.RMSNorm(a) }, 2 * kib, true},
		{"add over its first source", func(c *Ctx, a *Tensor) *Tensor {
			return c.Add(a, c.External("bias", gguf.TypeF32, "CPU", 64))
		}, 2 * kib, true},
		// NORM is not in ggml_op_can_inplace.
		{"norm", func(c *Ctx, a *Tensor) *Tensor { return c.Norm(a) }, 3 * kib, false},
		// a is read again after b: b is not its last consumer. b [2,3),
		// then the ADD runs in place over b.
		{"a parent read later", func(c *Ctx, a *Tensor) *Tensor {
			return c.Add(c.Scale(a), a)
		}, 3 * kib, false},
		// ggml counts a source slot per child: a ADD of a with itself
		// sees two children of a.
		{"a parent read twice by the op", func(c *Ctx, a *Tensor) *Tensor { return c.Add(a, a) }, 3 * kib, false},
		// Outputs are never overwritten.
		{"an output parent", func(c *Ctx, a *Tensor) *Tensor { return c.Scale(a.SetOutput()) }, 3 * kib, false},
		// A view is never allocated by ggml-alloc, so it is not its own
		// (ggml_gallocr_is_own): the SCALE of a reshape gets new memory,
		// and a dies with the reshape's last use.
		{"a view parent", func(c *Ctx, a *Tensor) *Tensor { return c.Scale(c.Reshape(a, 256)) }, 3 * kib, false},
	}
	for _, tc := range tests {
		var c Ctx
		w := c.External("w", gguf.TypeF32, "CPU", 64, 64)
		x := c.Input("x", gguf.TypeF32, 64, 4).SetOutput()
		a := c.MulMat(w, x)
		last := tc.build(&c, a)
		c.Expand(last)
		if got := Reserve(&c.G, 256); got != tc.peak {
			t.Errorf("%s: peak %d, want %d", tc.name, got, tc.peak)
		}
		if got := last.hn.addr == a.hn.addr; got != tc.inPlace {
			t.Errorf("%s: last node at %d, a at %d, want in place %v", tc.name, last.hn.addr.offset, a.hn.addr.offset, tc.inPlace)
		}
	}
}

// TestReserveInPlaceOverLeafs: an input the allocator placed is its own,
// so an op may overwrite it once it is its last consumer (y [0,1), b
// over it: 1 KiB); an external tensor (a weight, a cache) is in another
// buffer and never overwritten (b [0,1) of the compute buffer, beside
// nothing: 1 KiB, but not at the weight); an input marked output keeps
// its memory (y [0,1), b [1,2): 2 KiB).
func TestReserveInPlaceOverLeafs(t *testing.T) {
	tests := []struct {
		name    string
		leaf    func(c *Ctx) *Tensor
		peak    int64
		inPlace bool
	}{
		{"input", func(c *Ctx) *Tensor { return c.Input("y", gguf.TypeF32, 64, 4) }, kib, true},
		{"output input", func(c *Ctx) *Tensor { return c.Input("y", gguf.TypeF32, 64, 4).SetOutput() }, 2 * kib, false},
		{"external", func(c *Ctx) *Tensor { return c.External("y", gguf.TypeF32, "CPU", 64, 4) }, kib, false},
	}
	for _, tc := range tests {
		var c Ctx
		y := tc.leaf(&c)
		b := c.Scale(y)
		c.Expand(b)
		if got := Reserve(&c.G, 256); got != tc.peak {
			t.Errorf("%s: peak %d, want %d", tc.name, got, tc.peak)
		}
		if got := !y.external && b.hn.addr == y.hn.addr; got != tc.inPlace {
			t.Errorf("%s: in place %v, want %v", tc.name, got, tc.inPlace)
		}
	}
}

// TestReserveViewsKeepSourceAlive: a is read only through the view v,
// whose reader c comes after b. ggml counts v as a view of a (n_views),
// so a is freed only when v's last reader has run: a [0,1), b [1,2), c
// (64x2, 512 bytes) [2,2.5), then a freed; d takes a's [0,1). Peak 2.5
// KiB; were a freed when v was recorded, b would take [0,1) and the peak
// would be 1.5 KiB.
func TestReserveViewsKeepSourceAlive(t *testing.T) {
	var c Ctx
	x := c.External("x", gguf.TypeF32, "CPU", 64, 4)
	a := c.Norm(x)
	v := c.View(a, 64, 2)
	b := c.Norm(x)
	cc := c.Norm(v)
	d := c.Norm(x)
	for _, n := range []*Tensor{a, v, b, cc, d} {
		c.Expand(n)
	}
	if got := Reserve(&c.G, 256); got != 2*kib+512 {
		t.Errorf("peak %d, want %d", got, 2*kib+512)
	}
	if b.hn.addr.offset != kib || cc.hn.addr.offset != 2*kib || d.hn.addr != a.hn.addr {
		t.Errorf("b at %d, c at %d, d at %d, a at %d; want 1024, 2048 and d at a's", b.hn.addr.offset,
			cc.hn.addr.offset, d.hn.addr.offset, a.hn.addr.offset)
	}
}

// TestReserveClampIsAView: ggml_clamp returns ggml_view_tensor(a), so
// ggml-alloc never gives it memory of its own, even where running in place
// would not be allowed (the source has another reader, is an output or a
// view). Reachable: with the CUDA top-k dependency (Rules.CUDATopKDeps)
// the dependency node reads the SUM_ROWS under build_moe_ffn's CLAMP.
//
// Here s = sum_rows(w) is an output (1x4 F32, 32 aligned), c = clamp(s),
// e = sum_rows(c). ggml: s [0,32), c a view of s, e [32,64): 64. The
// in-place reading would give s [0,32), c [32,64), e [64,96): 96.
func TestReserveClampIsAView(t *testing.T) {
	var c Ctx
	w := c.External("w", gguf.TypeF32, "CPU", 8, 4)
	s := c.SumRows(w).SetOutput()
	cl := c.Clamp(s)
	c.Expand(c.SumRows(cl))
	if got := Reserve(&c.G, 32); got != 64 {
		t.Errorf("peak %d, ggml's 64: the clamp took memory of its own", got)
	}
}

// TestReserveWritesIntoCaches: SET_ROWS is a view of the cache it writes
// (ggml_view_tensor): it takes no compute memory, and its rows die with
// it. Leafs first: x [0,1024), idx (4 I64, 32 bytes) [1024,1056); rows
// [1056,2080), x freed; the SET_ROWS frees rows and idx. Peak 2080 bytes
// (align 32), not the 12800 of the F16 cache. ggml_scale_inplace of a
// dying tensor is a view of it too: a second chain adds nothing.
func TestReserveWritesIntoCaches(t *testing.T) {
	var c Ctx
	cache := c.External("cache_k", gguf.TypeF16, "CPU", 64, 100)
	x := c.Input("x", gguf.TypeF32, 64, 4)
	idx := c.Input("idx", gguf.TypeI64, 4)
	rows := c.Norm(x)
	c.Expand(c.SetRows(cache, rows, idx))
	if got := Reserve(&c.G, 32); got != 2080 {
		t.Errorf("peak %d, want 2080", got)
	}
	// x [0,1024), a [1024,2048), x freed, s a view of a, n (NORM of the
	// view) [0,1024): the peak stays 2048.
	var c2 Ctx
	x2 := c2.Input("x", gguf.TypeF32, 64, 4)
	a := c2.Norm(x2)
	s := c2.ScaleInplace(a)
	n := c2.Norm(s)
	c2.Expand(n)
	if got := Reserve(&c2.G, 32); got != 2048 || n.hn.addr.offset != 0 {
		t.Errorf("scale_inplace: peak %d, n at %d; want 2048, 0", got, n.hn.addr.offset)
	}
}

// TestReserveInputsFirst: ggml-alloc places every leaf (and every input)
// before it walks the nodes, so an input read only at the end holds its
// memory from the start. x (64x1, 256 bytes) [0,256); a [256,1280); b
// [1280,2304), a freed; c in a's hole; d over c in place. Peak 2304; had x
// been placed when first read, it would have taken b's freed block and the
// peak would be 2048.
func TestReserveInputsFirst(t *testing.T) {
	var c Ctx
	y := c.External("y", gguf.TypeF32, "CPU", 64, 4)
	x := c.Input("x", gguf.TypeF32, 64)
	d := c.Add(c.Norm(c.Norm(c.Norm(y))), x)
	c.Expand(d)
	if got := Reserve(&c.G, 256); got != 2304 {
		t.Errorf("peak %d, want 2304", got)
	}
	if x.hn.addr.offset != 0 || d.hn.addr.offset != 256 {
		t.Errorf("x at %d, d at %d; want 0 and 256", x.hn.addr.offset, d.hn.addr.offset)
	}
}

// TestReserveAlignment: every block is rounded up to the buffer's
// alignment. x and a are 25 F32, 100 bytes each, both alive at a's
// allocation: twice 100 rounded up.
func TestReserveAlignment(t *testing.T) {
	for _, tc := range []struct{ align, peak int64 }{
		{1, 200}, {4, 200}, {32, 256}, {64, 256}, {128, 256}, {256, 512},
	} {
		var c Ctx
		c.Expand(c.Norm(c.Input("x", gguf.TypeF32, 25)))
		if got := Reserve(&c.G, tc.align); got != tc.peak {
			t.Errorf("align %d: peak %d, want %d", tc.align, got, tc.peak)
		}
	}
}

// TestDynAllocBestFit: ggml_dyn_tallocr_alloc takes the smallest free
// block that fits among those that are not the chunk's last, the later
// of two equal ones (block->size <= best_fit_size), and only then the
// last block, which grows the chunk.
func TestDynAllocBestFit(t *testing.T) {
	a := newDynAlloc(1, 0)
	p0 := a.alloc(300) // [0,300)
	a.alloc(10)        // [300,310)
	p1 := a.alloc(100) // [310,410)
	a.alloc(10)        // [410,420)
	p2 := a.alloc(200) // [420,620)
	a.alloc(10)        // [620,630)
	a.release(p0, 300)
	a.release(p1, 100)
	a.release(p2, 200)
	// Holes of 300, 100 and 200: 150 bytes go to the 200 one, 100 to the
	// 100 one, 400 to the tail at 630.
	for _, s := range []struct{ size, at int64 }{{150, 420}, {100, 310}, {400, 630}} {
		if got := a.alloc(s.size); got.offset != s.at {
			t.Errorf("%d bytes at %d, want %d", s.size, got.offset, s.at)
		}
	}
	if a.size() != 1030 {
		t.Errorf("size %d, want 1030", a.size())
	}
	// Two equal holes: the later one.
	b := newDynAlloc(1, 0)
	h0 := b.alloc(100) // [0,100)
	b.alloc(10)        // [100,110)
	h1 := b.alloc(100) // [110,210)
	b.alloc(10)        // [210,220)
	b.release(h0, 100)
	b.release(h1, 100)
	if got := b.alloc(50); got.offset != 110 {
		t.Errorf("tie at %d, want 110", got.offset)
	}
}
