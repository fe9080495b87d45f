package ggml

import (
	"github.com/headroom-llm/headroom/builds"
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// moeTail records build_moe_ffn's end: the experts' outputs (embd x used
// x tokens) weighted by the router, one view per expert and the ADDs that
// sum them; mutate may change the graph before the sum is expanded.
func moeTail(c *Ctx, embd, used, tokens int64, mutate func(weighted *Tensor, views []*Tensor)) (experts, weights, sum *Tensor) {
	x := c.Input("x", gguf.TypeF32, embd, 1, tokens)
	experts = c.Repeat(x, embd, used, tokens)
	weights = c.Input("w", gguf.TypeF32, 1, used, tokens)
	weighted := c.Mul(experts, weights)
	c.Expand(weighted)
	views := make([]*Tensor, used)
	for i := range views {
		views[i] = c.View(weighted, embd, tokens)
		c.Expand(views[i])
	}
	if mutate != nil {
		mutate(weighted, views)
	}
	sum = views[0]
	for _, v := range views[1:] {
		sum = c.Add(sum, v)
		c.Expand(sum)
	}
	return experts, weights, sum
}

func onCUDA(g *Graph) {
	for _, n := range g.nodes {
		n.SetBackend("CUDA0")
	}
}

func cudaSched(opt Optimizer) *Sched {
	// A build with the fused weighted reduction (from b10751).
	return &Sched{CPU: "CPU", Mem: &Arena{}, Optimize: map[string]Optimizer{"CUDA0": opt}, Rules: builds.Rules{CUDAReduceDeps: true},
		Buffers: map[string]BufferType{"CPU": {Align: 32}, "CUDA0": {Align: 128}}}
}

// The weighted reduction keeps the unweighted outputs and the weights
// until the last ADD, so the weighting MUL cannot run in place: the
// buffer grows by exactly one embd x used x tokens f32 tensor.
func TestCUDAMoEReduceDeps(t *testing.T) {
	const embd, used, tokens = 64, 4, 8
	var c Ctx
	experts, weights, sum := moeTail(&c, embd, used, tokens, nil)
	deps := cudaDeps(c.G.nodes, 0, len(c.G.nodes), false, true)
	if len(deps) != 1 || deps[0].Until != sum || !slices.Equal(deps[0].Keep, []*Tensor{experts, weights}) {
		t.Fatalf("deps %+v, want experts and weights kept until the last ADD", deps)
	}
	if d := cudaDeps(c.G.nodes, 0, len(c.G.nodes), false, false); len(d) != 0 {
		t.Errorf("a build before the fused reduction added %d deps", len(d))
	}
	sizes := map[Optimizer]int64{}
	for _, opt := range []Optimizer{OptNone, OptCUDA} {
		var c Ctx
		moeTail(&c, embd, used, tokens, nil)
		onCUDA(&c.G)
		sizes[opt] = cudaSched(opt).Measure(&c.G)["CUDA0"]
	}
	if grow := sizes[OptCUDA] - sizes[OptNone]; grow != embd*used*tokens*4 {
		t.Errorf("CUDA0 %d -> %d bytes, want %d more", sizes[OptNone], sizes[OptCUDA], embd*used*tokens*4)
	}
}

// What ggml_cuda_match_moe_weighted_reduction refuses leaves the graph
// alone.
func TestCUDAMoEReduceRefuses(t *testing.T) {
	tests := []struct {
		name   string
		used   int64
		mutate func(weighted *Tensor, views []*Tensor)
	}{
		{"one expert", 1, nil},
		{"more experts than the kernel takes", 16, nil},
		{"the weighted tensor is an output", 4, func(w *Tensor, _ []*Tensor) { w.SetOutput() }},
	}
	for _, tc := range tests {
		var c Ctx
		moeTail(&c, 64, tc.used, 8, tc.mutate)
		if d := cudaDeps(c.G.nodes, 0, len(c.G.nodes), true, true); len(d) != 0 {
			t.Errorf("%s: %d deps", tc.name, len(d))
		}
	}
	// A view read outside the sum is used outside the run.
	var c Ctx
	_, _, sum := moeTail(&c, 64, 4, 8, nil)
	c.Expand(c.Add(sum, c.G.nodes[3]))
	if d := cudaDeps(c.G.nodes, 0, len(c.G.nodes), true, true); len(d) != 0 {
		t.Errorf("a view used after the sum: %d deps", len(d))
	}
}

// topK records build_moe_ffn's selection with softmax gating and the
// weights' normalization, then the node that reads them.
func topK(c *Ctx, experts, used, tokens int64) (run []*Tensor, next *Tensor) {
	logits := c.Input("logits", gguf.TypeF32, experts, tokens)
	probs := c.SoftMax(logits, nil, nil)
	sel := c.View(c.Argsort(probs), used, tokens)
	w := c.GetRows(c.Reshape(probs, 1, experts, tokens), sel)
	w2 := c.Reshape(w, used, tokens)
	w = c.Reshape(c.Div(w2, c.Clamp(c.SumRows(w2))), 1, used, tokens)
	c.Expand(w)
	next = c.Mul(c.Input("x", gguf.TypeF32, 1, used, tokens), w)
	c.Expand(next)
	return c.G.nodes[:len(c.G.nodes)-1], next
}

// de3ff81's top-k dependency keeps every node of the run and what it
// reads until the node after it, for expert counts with a kernel.
func TestCUDATopKDeps(t *testing.T) {
	var c Ctx
	run, next := topK(&c, 128, 8, 16)
	want := []Op{SoftMax, Reshape, Argsort, View, GetRows, Reshape, SumRows, Clamp, Div, Reshape}
	var ops []Op
	for _, n := range run {
		ops = append(ops, n.op)
	}
	if !slices.Equal(ops, want) {
		t.Fatalf("recorded %v, want %v", ops, want)
	}
	deps := cudaDeps(c.G.nodes, 0, len(c.G.nodes), true, true)
	if len(deps) != 1 || deps[0].Until != next {
		t.Fatalf("deps %+v, want one until the MUL after the run", deps)
	}
	for _, n := range run {
		if !slices.Contains(deps[0].Keep, n) {
			t.Errorf("%v not kept", n.op)
		}
	}
	if !slices.Contains(deps[0].Keep, c.G.leafs[0]) {
		t.Error("the logits are not kept")
	}
	if d := cudaDeps(c.G.nodes, 0, len(c.G.nodes), false, true); len(d) != 0 {
		t.Errorf("80fb11a's rules added %d top-k deps", len(d))
	}
	// The probabilities read again after the run cannot be fused away.
	var c3 Ctx
	run, _ = topK(&c3, 128, 8, 16)
	c3.Expand(c3.Scale(run[0]))
	if d := cudaDeps(c3.G.nodes, 0, len(c3.G.nodes), true, true); len(d) != 0 {
		t.Errorf("probabilities used after the run: %d deps", len(d))
	}
	// 60 experts (Qwen1.5-MoE) have no kernel instance.
	var c2 Ctx
	topK(&c2, 60, 4, 16)
	if d := cudaDeps(c2.G.nodes, 0, len(c2.G.nodes), true, true); len(d) != 0 {
		t.Errorf("60 experts: %d deps", len(d))
	}
}
