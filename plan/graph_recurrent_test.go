package plan

import (
	"github.com/headroom-llm/headroom/builds"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/synth"
)

// The figures are the CPU compute buffers ("compute_exact", four decimals)
// and graph node counts ("graph nodes" in llama.cpp's log) of the golden
// llama.cpp loads in conformance/testdata/golden for the recurrent and
// hybrid shapes, batch 512. The replay must agree to the printed precision
// and record as many nodes as the engine's graph.
func TestRecurrentComputeCPU(t *testing.T) {
	tests := []struct {
		shape     string
		quant     synth.Quant
		ctx, seqs int
		fa        FlashAttn
		mib       float64
		nodes     int
	}{
		{"mamba2-130m", synth.Q8_0, 4096, 1, FlashOff, 102.7227, 1208},
		{"mamba2-130m", synth.Q8_0, 32768, 1, FlashOff, 102.7227, 1208},
		{"mamba2-130m", synth.Q8_0, 4096, 4, FlashOff, 102.7227, 1208},
		{"lfm2-350m", synth.Q8_0, 4096, 1, FlashOff, 148.0098, 578},
		{"lfm2-350m", synth.Q8_0, 32768, 1, FlashOff, 1100.0098, 578},
		{"lfm2-350m", synth.Q8_0, 4096, 1, FlashOn, 132.0020, 548},
		{"lfm2-350m", synth.Q8_0, 4096, 4, FlashOff, 148.0098, 584},
		{"lfm2-1.2b", synth.Q4_K_M, 4096, 1, FlashOff, 286.0098, 578},
		{"lfm2-1.2b", synth.Q4_K_M, 4096, 4, FlashOn, 144.0137, 560},
		{"granite-4.0-h-micro", synth.Q8_0, 4096, 1, FlashOff, 286.0098, 2204},
		{"granite-4.0-h-micro", synth.Q8_0, 32768, 1, FlashOff, 2134.0098, 2204},
		{"granite-4.0-h-micro", synth.Q8_0, 4096, 1, FlashOn, 204.0020, 2184},
		{"granite-4.0-h-micro", synth.Q8_0, 4096, 4, FlashOff, 286.0098, 2208},
		{"falcon-h1-0.5b", synth.Q8_0, 4096, 1, FlashOff, 90.5098, 3103},
		{"falcon-h1-0.5b", synth.Q8_0, 32768, 1, FlashOff, 594.5098, 3103},
		{"falcon-h1-0.5b", synth.Q8_0, 4096, 1, FlashOn, 70.0332, 2923},
		{"falcon-h1-0.5b", synth.Q8_0, 4096, 4, FlashOff, 82.5098, 3139},
		{"qwen3-next-80b-a3b", synth.Q5_K_M, 4096, 1, FlashOff, 314.7598, 5059},
		{"qwen3-next-80b-a3b", synth.Q5_K_M, 4096, 2, FlashOff, 314.7598, 5071},
		{"qwen3-next-80b-a3b", synth.Q5_K_M, 8192, 1, FlashOn, 308.7520, 4999},
	}
	for _, tc := range tests {
		s, ok := synth.Lookup(tc.shape)
		if !ok {
			t.Fatalf("no shape %s", tc.shape)
		}
		m := shapeQuantModel(t, s, tc.quant)
		build := builderFor(m)
		if build == nil {
			t.Errorf("%s: no builder", tc.shape)
			continue
		}
		p := Defaults()
		p.OutputsMax = libraryOutputs
		p.Ctx, p.Parallel, p.FlashAttn, p.Batch = tc.ctx*tc.seqs, tc.seqs, tc.fa, 512
		c, err := resolveContext(p, m.CtxTrain, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := build(m, c, c.NUBatch, &gb{cpu: "CPU", rules: measuredRules(t, "80fb11a")})
		got := float64(cpuComputeBytes(m, c, measuredRules(t, "80fb11a"), build)) / (1 << 20)
		diff := got - tc.mib
		if diff > 0.00005 || diff < -0.00005 {
			t.Errorf("%s ctx %d x%d fa %s: %.4f MiB, llama.cpp %.4f (diff %+.4f)", tc.shape, tc.ctx, tc.seqs, tc.fa, got, tc.mib, diff)
		}
		if len(g.Nodes()) != tc.nodes {
			t.Errorf("%s ctx %d x%d fa %s: %d graph nodes, llama.cpp's graph has %d", tc.shape, tc.ctx, tc.seqs, tc.fa, len(g.Nodes()), tc.nodes)
		}
		t.Logf("%-20s ctx %5d x%d fa %-3s: replay %9.4f MiB, llama.cpp %9.4f, diff %+.4f; nodes %d/%d", tc.shape, tc.ctx, tc.seqs, tc.fa, got, tc.mib, diff, len(g.Nodes()), tc.nodes)
	}
}

// Models the description does not cover keep the rough estimate.
func TestRecurrentBuilderDeclines(t *testing.T) {
	s, _ := synth.Lookup("tinyllama-1.1b")
	if graphFamilies("mamba2")(shapeModel(t, s)) != nil {
		t.Error("llama: a recurrent builder")
	}
	// Qwen3-Next in the legacy form (one ssm_in for q, k, v and z) runs
	// other nodes than the description's.
	s, _ = synth.Lookup("qwen3-next-80b-a3b")
	m := shapeQuantModel(t, s, synth.Q5_K_M)
	if qwen3nextBuilder(m) == nil {
		t.Fatal("qwen3next: no builder for the split projections")
	}
	legacy := arch.Tensor{Layer: 0}
	legacy.Name, legacy.Shape = "blk.0.ssm_in.weight", []uint64{2048, 12288}
	m.Tensors = append(m.Tensors, legacy)
	if qwen3nextBuilder(m) != nil {
		t.Error("qwen3next with a legacy ssm_in: a builder")
	}
}

// de3ff81 records the gated delta net's L2 norms of q and k as an RMS
// norm and a scale (build_gdn_l2_norm): issue #12's re-measurement with
// that build counted 5131 graph nodes for Qwen3-Next where 80fb11a has
// 5059, the two more nodes of each of its 36 linear-attention layers.
func TestGDNNormNodes(t *testing.T) {
	m := model(t, "qwen3-next-80b-a3b", synth.Q5_K_M)
	build := builderFor(m)
	for _, tc := range []struct {
		rules builds.Rules
		nodes int
	}{{measuredRules(t, "80fb11a"), 5059}, {measuredRules(t, "de3ff81"), 5131}} {
		p := Defaults()
		p.OutputsMax, p.Rules = libraryOutputs, &tc.rules
		p.Ctx, p.Parallel, p.FlashAttn, p.Batch = 4096, 1, FlashOff, 512
		c, err := resolveContext(p, m.CtxTrain, nil)
		if err != nil {
			t.Fatal(err)
		}
		if g := build(m, c, c.NUBatch, &gb{cpu: "CPU", rules: tc.rules}); len(g.Nodes()) != tc.nodes {
			t.Errorf("%+v: %d graph nodes, want %d", tc.rules, len(g.Nodes()), tc.nodes)
		}
	}
}
