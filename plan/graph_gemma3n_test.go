package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/synth"
)

// The CPU compute buffers ("compute_exact") and graph node counts of the
// golden Gemma 3n loads (conformance/testdata/golden/gemma-3n-e2b.*): the
// replay must agree to the printed precision and record the engine's
// nodes, the shared-KV layers' Q-only attention included.
func TestGemma3nComputeCPU(t *testing.T) {
	s, ok := synth.Lookup("gemma-3n-e2b")
	if !ok {
		t.Fatal("no gemma-3n-e2b shape")
	}
	m := shapeQuantModel(t, s, synth.Q8_0)
	build := builderFor(m)
	if build == nil {
		t.Fatal("gemma3n: no graph builder")
	}
	for _, tc := range []struct {
		ctx, seqs int
		fa        FlashAttn
		mib       float64
		nodes     int
	}{
		{4096, 1, FlashOff, 525.5264, 2861},
		{4096, 2, FlashOff, 525.5420, 2881},
		{8192, 1, FlashOn, 521.5186, 2731},
	} {
		p := Defaults()
		p.OutputsMax = libraryOutputs
		// node-llama-cpp asked these loads for a batch of 513 (the
		// goldens' n_batch and n_ubatch).
		p.Ctx, p.Parallel, p.FlashAttn, p.Batch, p.UBatch = tc.ctx*tc.seqs, tc.seqs, tc.fa, 513, 513
		c, err := resolveContext(p, m.CtxTrain, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := build(m, c, c.NUBatch, &gb{cpu: "CPU", rules: measuredRules(t, "80fb11a")})
		got := float64(cpuComputeBytes(m, c, measuredRules(t, "80fb11a"), build)) / (1 << 20)
		if d := got - tc.mib; d > 0.00005 || d < -0.00005 {
			t.Errorf("ctx %d x%d fa %s: %.4f MiB, llama.cpp %.4f", tc.ctx, tc.seqs, tc.fa, got, tc.mib)
		}
		if len(g.Nodes()) != tc.nodes {
			t.Errorf("ctx %d x%d fa %s: %d graph nodes, llama.cpp's graph has %d", tc.ctx, tc.seqs, tc.fa, len(g.Nodes()), tc.nodes)
		}
	}
	// A layer that would read a later layer's cache is not Gemma 3n's
	// graph: the builder declines rather than describe something else.
	bad := *m
	bad.Layers = append([]arch.Layer(nil), m.Layers...)
	bad.Layers[25].KVLayer = 27
	if gemma3nBuilder(&bad) != nil {
		t.Error("a builder for a layer sharing a later layer's cache")
	}
}
