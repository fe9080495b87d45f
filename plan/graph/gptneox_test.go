package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/plan/ggml"
	"github.com/headroom-llm/headroom/synth"
)

// The parallel-residual figures are the llama-server goldens of
// pythia-1.4b (conformance/testdata/server): the engine's graph node count
// ("graph nodes") and CPU compute buffer (the context destructor's four
// decimals). The sequential ones are llama-server 80fb11a loads of the same
// file written with use_parallel_residual false (-c 4096 -np 1 -ngl 0
// --fit off), which no golden keeps.
func TestGPTNeoXGraphs(t *testing.T) {
	rules := measuredRules(t, "80fb11a")
	tests := []struct {
		seq   bool // use_parallel_residual false
		l     load
		nodes int
		mib   float64
	}{
		{false, load{ctx: 4096, seqs: 1}, 943, 156.0078},
		{false, load{ctx: 4096, seqs: 1, flash: true}, 823, 36.0117},
		{false, load{ctx: 16384, seqs: 4}, 967, 156.0078},
		{false, load{ctx: 4096, seqs: 1, cacheK: "q8_0", cacheV: "f16"}, 1087, 172.0703},
		{false, load{ctx: 4096, seqs: 1, flash: true, cacheK: "q8_0", cacheV: "q8_0"}, 1111, 36.0899},
		{true, load{ctx: 4096, seqs: 1}, 943, 156.0078},
		{true, load{ctx: 4096, seqs: 1, flash: true}, 823, 32.0117},
	}
	for _, tc := range tests {
		s, _ := synth.Lookup("pythia-1.4b")
		s.SequentialResidual = tc.seq
		m := shapeModel(t, s, synth.Q4_K_M)
		if m.ParallelResidual == tc.seq {
			t.Fatalf("sequential %v: ParallelResidual %v", tc.seq, m.ParallelResidual)
		}
		build := For(m)
		if build == nil {
			t.Fatal("gptneox: no builder")
		}
		tc.l.batch, tc.l.ubatch, tc.l.server = 512, 512, true
		c := tc.l.context(t)
		g := build(c, c.NUBatch, Placement{CPU: "CPU", Rules: rules})
		if len(g.Nodes()) != tc.nodes {
			t.Errorf("seq %v %v: %d nodes, llama.cpp %d", tc.seq, tc.l, len(g.Nodes()), tc.nodes)
		}
		got := float64(cpuBytes(build, c, rules)) / (1 << 20)
		if diff := got - tc.mib; diff > 0.00005 || diff < -0.00005 {
			t.Errorf("seq %v %v: %.4f MiB, llama.cpp %.4f (diff %+.4f)", tc.seq, tc.l, got, tc.mib, diff)
		}
	}
}

// A file without the biases gptneox.cpp's loader requires is not a
// graph the family describes.
func TestGPTNeoXDeclines(t *testing.T) {
	m := *model(t, "pythia-1.4b", synth.Q4_K_M)
	if For(&m) == nil {
		t.Fatal("gptneox: no builder")
	}
	for i, tn := range m.Tensors {
		if tn.Name == "blk.0.attn_qkv.bias" {
			m.Tensors = append(m.Tensors[:i:i], m.Tensors[i+1:]...)
			break
		}
	}
	if For(&m) != nil {
		t.Error("gptneox without the QKV bias is described")
	}
}

// Early 2025's build_gptneox (without Rules.QKVViews) copied Q, K and V out of the
// fused projection, three n_embd x tokens copies a layer; later builds
// take strided views and copy only V, for a transposed cache. Both copy
// the merged heads of the attention's output once a layer.
func TestGPTNeoXQKVCont(t *testing.T) {
	m, c, _, graph := ruleGraphs(t, "pythia-1.4b", synth.Q4_K_M, 2048, false)
	conts := func(r builds.Rules) int {
		n := 0
		g := graph(r)
		for _, x := range g.Nodes() {
			if x.Op() == ggml.Cont && x.Ne() == [4]int64{int64(m.NEmbd), int64(c.NUBatch), 1, 1} {
				n++
			}
		}
		return n
	}
	layers := len(m.Layers)
	if got := conts(measuredRules(t, "80fb11a")); got != 2*layers {
		t.Errorf("now: %d copies of n_embd x tokens, want %d (V, and the merged heads)", got, 2*layers)
	}
	if got := conts(measuredRules(t, "80fb11a", func(r *builds.Rules) { r.QKVViews = false })); got != 4*layers {
		t.Errorf("QKVCont: %d copies, want %d (Q, K, V and the merged heads)", got, 4*layers)
	}
}
