package plan

import "testing"

// The expected sizes were worked out by hand following ggml-alloc.c's
// rules, step by step, in the comments.
func TestReserveReusesAndFrees(t *testing.T) {
	a := &gtensor{name: "a", bytes: 100, input: true, layout: layout{ne: [4]int64{25}}}
	b := &gtensor{name: "b", bytes: 200, op: opOther, src: []*gtensor{a}, layout: layout{ne: [4]int64{50}}}
	c := &gtensor{name: "c", bytes: 200, op: opInplace, src: []*gtensor{b}, layout: layout{ne: [4]int64{50}}}
	d := &gtensor{name: "d", bytes: 50, op: opOther, src: []*gtensor{c}, output: true}
	var g graph
	g.expand(d)
	if len(g.leafs) != 1 || len(g.nodes) != 3 {
		t.Fatalf("%d leafs, %d nodes", len(g.leafs), len(g.nodes))
	}
	// a at [0,128); b at [128,352); a freed; c reuses b in place; d takes
	// the freed [0,64). The peak is b's end.
	if got := reserve(&g, 32); got != 352 {
		t.Errorf("reserve = %d, want 352", got)
	}
}

func TestReserveNoInplaceAcrossLayouts(t *testing.T) {
	a := &gtensor{name: "a", bytes: 64, input: true}
	b := &gtensor{name: "b", bytes: 256, op: opOther, src: []*gtensor{a}, layout: layout{ne: [4]int64{64}}}
	// Same op kind, different layout: a new allocation while b is live.
	c := &gtensor{name: "c", bytes: 256, op: opInplace, src: []*gtensor{b}, layout: layout{ne: [4]int64{32, 2}}}
	var g graph
	g.expand(c)
	// a [0,64), b [64,320), a freed, c cannot reuse b: best fit among the
	// free blocks is [0,64) (too small), so the last block: [320,576).
	if got := reserve(&g, 32); got != 576 {
		t.Errorf("reserve = %d, want 576", got)
	}
}

func TestDynAllocMerges(t *testing.T) {
	a := newDynAlloc(32)
	x := a.alloc(32)
	y := a.alloc(32)
	z := a.alloc(32)
	a.release(x, 32)
	a.release(z, 32)
	a.release(y, 32) // joins both neighbours
	if len(a.free) != 1 || a.free[0].offset != 0 {
		t.Errorf("free list %v, want one block from 0", a.free)
	}
	if a.maxSize != 96 {
		t.Errorf("max %d", a.maxSize)
	}
}
