package ggml

import "testing"

// The expected sizes were worked out by hand following ggml-alloc.c's
// rules, step by step, in the comments.
func TestReserveReusesAndFrees(t *testing.T) {
	a := &Tensor{Name: "a", bytes: 100, input: true, layout: layout{ne: [4]int64{25}}}
	b := &Tensor{Name: "b", bytes: 200, cls: other, src: []*Tensor{a}, layout: layout{ne: [4]int64{50}}}
	c := &Tensor{Name: "c", bytes: 200, cls: inplace, src: []*Tensor{b}, layout: layout{ne: [4]int64{50}}}
	d := &Tensor{Name: "d", bytes: 50, cls: other, src: []*Tensor{c}, output: true}
	var g Graph
	g.Expand(d)
	if len(g.leafs) != 1 || len(g.nodes) != 3 {
		t.Fatalf("%d leafs, %d nodes", len(g.leafs), len(g.nodes))
	}
	// a at [0,128); b at [128,352); a freed; c reuses b in place; d takes
	// the freed [0,64). The peak is b's end.
	if got := Reserve(&g, 32); got != 352 {
		t.Errorf("reserve = %d, want 352", got)
	}
}

func TestReserveNoInplaceAcrossLayouts(t *testing.T) {
	a := &Tensor{Name: "a", bytes: 64, input: true}
	b := &Tensor{Name: "b", bytes: 256, cls: other, src: []*Tensor{a}, layout: layout{ne: [4]int64{64}}}
	// Same op kind, different layout: a new allocation while b is live.
	c := &Tensor{Name: "c", bytes: 256, cls: inplace, src: []*Tensor{b}, layout: layout{ne: [4]int64{32, 2}}}
	var g Graph
	g.Expand(c)
	// a [0,64), b [64,320), a freed, c cannot reuse b: best fit among the
	// free blocks is [0,64) (too small), so the last block: [320,576).
	if got := Reserve(&g, 32); got != 576 {
		t.Errorf("reserve = %d, want 576", got)
	}
}

func TestDynAllocMerges(t *testing.T) {
	a := newDynAlloc(32, 0)
	x := a.alloc(32)
	y := a.alloc(32)
	z := a.alloc(32)
	a.release(x, 32)
	a.release(z, 32)
	a.release(y, 32) // joins both neighbours
	if len(a.chunks) != 1 || len(a.chunks[0].free) != 1 || a.chunks[0].free[0].offset != 0 {
		t.Errorf("chunks %v, want one with one free block from 0", a.chunks)
	}
	if a.size() != 96 {
		t.Errorf("size %d", a.size())
	}
}

// With a largest buffer size, ggml-alloc measures in chunks: what does not
// fit in the chunks so far starts a new one, and the buffer is their sum.
func TestDynAllocChunks(t *testing.T) {
	a := newDynAlloc(1, 100)
	x := a.alloc(60)
	y := a.alloc(60) // 40 left in the first chunk: a second one
	if x.chunk != 0 || y.chunk != 1 || a.size() != 120 {
		t.Fatalf("x %+v y %+v size %d, want chunks 0 and 1, 120 bytes", x, y, a.size())
	}
	// A small tensor goes where a chunk already has room (the first,
	// freed) rather than where one would have to grow.
	a.release(x, 60)
	z := a.alloc(10)
	if z.chunk != 0 || a.size() != 120 {
		t.Errorf("z %+v, size %d after a 10-byte tensor, want chunk 0 and 120", z, a.size())
	}
	// A tensor larger than the limit gets a chunk of its own size.
	big := a.alloc(250)
	if big.chunk != 2 || big.offset != 0 || a.size() != 120+250 {
		t.Errorf("big %+v, size %d", big, a.size())
	}
	// Unbounded: one chunk, as before.
	u := newDynAlloc(1, 0)
	u.alloc(60)
	u.alloc(60)
	if len(u.chunks) != 1 || u.size() != 120 {
		t.Errorf("unbounded: %d chunks, %d bytes", len(u.chunks), u.size())
	}
}
