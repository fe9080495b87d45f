package plan

import (
	"github.com/headroom-llm/headroom/builds"
	"testing"

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
	tests := []struct {
		seq            bool // use_parallel_residual false
		ctx, seqs      int
		fa             bool
		cacheK, cacheV string
		nodes          int
		mib            float64
	}{
		{false, 4096, 1, false, "f16", "f16", 943, 156.0078},
		{false, 4096, 1, true, "f16", "f16", 823, 36.0117},
		{false, 4096, 4, false, "f16", "f16", 967, 156.0078},
		{false, 4096, 1, false, "q8_0", "f16", 1087, 172.0703},
		{false, 4096, 1, true, "q8_0", "q8_0", 1111, 36.0899},
		{true, 4096, 1, false, "f16", "f16", 943, 156.0078},
		{true, 4096, 1, true, "f16", "f16", 823, 32.0117},
	}
	for _, tc := range tests {
		s, _ := synth.Lookup("pythia-1.4b")
		s.SequentialResidual = tc.seq
		m := shapeQuantModel(t, s, synth.Q4_K_M)
		if m.ParallelResidual == tc.seq {
			t.Fatalf("sequential %v: ParallelResidual %v", tc.seq, m.ParallelResidual)
		}
		build := builderFor(m)
		if build == nil {
			t.Fatal("gptneox: no builder")
		}
		p := Defaults()
		p.Ctx, p.Parallel, p.Batch, p.UBatch = tc.ctx*tc.seqs, tc.seqs, 512, 512
		p.FlashAttn = FlashOff
		if tc.fa {
			p.FlashAttn = FlashOn
		}
		p.CacheK, p.CacheV = tc.cacheK, tc.cacheV
		c, err := resolveContext(p, m.CtxTrain, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := build(m, c, c.NUBatch, &gb{cpu: "CPU", rules: measuredRules(t, "80fb11a")})
		if len(g.Nodes()) != tc.nodes {
			t.Errorf("seq %v ctx %dx%d fa %v K %s V %s: %d nodes, llama.cpp %d", tc.seq, tc.ctx, tc.seqs, tc.fa, tc.cacheK, tc.cacheV, len(g.Nodes()), tc.nodes)
		}
		got := float64(cpuComputeBytes(m, c, measuredRules(t, "80fb11a"), build)) / (1 << 20)
		if diff := got - tc.mib; diff > 0.00005 || diff < -0.00005 {
			t.Errorf("seq %v ctx %dx%d fa %v K %s V %s: %.4f MiB, llama.cpp %.4f (diff %+.4f)", tc.seq, tc.ctx, tc.seqs, tc.fa, tc.cacheK, tc.cacheV, got, tc.mib, diff)
		}
	}
}

// A file without the biases gptneox.cpp's loader requires is not a
// graph the builder describes.
func TestGPTNeoXBuilderDeclines(t *testing.T) {
	s, _ := synth.Lookup("pythia-1.4b")
	m := *shapeQuantModel(t, s, synth.Q4_K_M)
	if builderFor(&m) == nil {
		t.Fatal("gptneox: no builder")
	}
	for i, tn := range m.Tensors {
		if tn.Name == "blk.0.attn_qkv.bias" {
			m.Tensors = append(m.Tensors[:i:i], m.Tensors[i+1:]...)
			break
		}
	}
	if builderFor(&m) != nil {
		t.Error("gptneox without the QKV bias is described")
	}
}

// Early 2025's build_gptneox (without Rules.QKVViews) copied Q, K and V out of the
// fused projection, three n_embd x tokens copies a layer; later builds
// take strided views and copy only V, for a transposed cache. Both copy
// the merged heads of the attention's output once a layer.
func TestGPTNeoXQKVCont(t *testing.T) {
	m, c, graph := ruleGraphs(t, "pythia-1.4b", synth.Q4_K_M, 2048, FlashOff)
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
