package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/synth"
)

// The figures are from conformance/testdata/golden: llama.cpp's graph node
// count ("graph nodes") and CPU compute buffer ("CPU compute buffer size",
// four decimals) for the synthetic files, with n_ubatch 513 or 512 as
// node-llama-cpp passed them.
func TestSWAGraphs(t *testing.T) {
	tests := []struct {
		shape   string
		quant   synth.Quant
		ctx     int // per sequence
		seqs    int
		ub      int
		fa      bool
		kq8     bool
		swaFull bool
		nodes   int
		mib     float64
	}{
		{"gemma-2-2b", synth.Q8_0, 4096, 1, 513, true, true, false, 1258, 509.9961},
		{"gemma-2-2b", synth.Q8_0, 4096, 1, 513, false, false, false, 1154, 509.9961},
		{"gemma-2-2b", synth.Q8_0, 4096, 4, 513, true, false, false, 998, 514.5313},
		{"gemma-2-2b", synth.Q8_0, 4096, 4, 513, false, false, false, 1180, 510.0225},
		{"gemma-2-2b", synth.Q8_0, 8192, 1, 513, false, false, false, 1154, 509.9961},
		{"gemma-2-2b", synth.Q8_0, 8192, 1, 512, false, false, true, 1154, 513.5020},
		{"gemma-3-1b", synth.Q8_0, 32768, 1, 513, false, false, false, 1177, 560.3443},
		{"gemma-3-1b", synth.Q8_0, 4096, 1, 513, true, true, false, 1359, 517.5108},
		{"gemma-3-1b", synth.Q8_0, 4096, 1, 2049, false, false, false, 1177, 2076.0210},
		{"gemma-3-1b", synth.Q8_0, 4096, 1, 513, false, false, false, 1177, 519.7652},
		{"gemma-3-1b", synth.Q8_0, 4096, 1, 512, false, false, true, 1177, 518.7520},
		{"gemma-3-1b", synth.Q8_0, 4096, 4, 513, true, false, false, 1099, 517.5240},
		{"gemma-3-1b", synth.Q8_0, 4096, 4, 513, false, false, false, 1203, 519.7784},
		{"gemma-3-1b", synth.Q8_0, 512, 1, 512, false, false, false, 1177, 518.7520},
		{"gemma-3-4b", synth.Q4_K_M, 4096, 2, 513, true, false, false, 1435, 528.1663},
		{"gemma-3-4b", synth.Q4_K_M, 8192, 1, 513, false, false, false, 1537, 528.1565},
		{"command-r7b", synth.Q8_0, 16384, 2, 513, true, false, false, 984, 517.0254},
		{"command-r7b", synth.Q8_0, 4096, 1, 513, false, false, false, 1080, 517.0098},
		{"command-r7b", synth.Q8_0, 8192, 1, 512, false, false, true, 1080, 592.0137},
		{"phi-3-mini-4k", synth.Q4_K_M, 4096, 1, 513, true, true, false, 934, 90.8158},
		{"phi-3-mini-4k", synth.Q4_K_M, 4096, 1, 513, false, false, false, 1094, 294.5841},
		{"phi-3-mini-4k", synth.Q4_K_M, 4096, 2, 513, false, false, false, 1126, 295.1583},
	}
	for _, tc := range tests {
		s, ok := synth.Lookup(tc.shape)
		if !ok {
			t.Fatalf("no shape %s", tc.shape)
		}
		m := shapeQuantModel(t, s, tc.quant)
		build := builderFor(m)
		if build == nil {
			t.Fatalf("%s: no builder", tc.shape)
		}
		p := Defaults()
		p.OutputsMax = libraryOutputs
		p.Ctx, p.Parallel, p.Batch, p.UBatch = tc.ctx*tc.seqs, tc.seqs, tc.ub, tc.ub
		p.FlashAttn, p.SWAFull = FlashOff, tc.swaFull
		if tc.fa {
			p.FlashAttn = FlashOn
		}
		if tc.kq8 {
			p.CacheK, p.CacheV = "q8_0", "q8_0"
		}
		c, err := resolveContext(p, m.CtxTrain, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := build(m, c, c.NUBatch, &gb{cpu: "CPU", rules: measuredRules(t, "80fb11a")})
		if len(g.Nodes()) != tc.nodes {
			t.Errorf("%s ctx %dx%d ub %d fa %v: %d nodes, llama.cpp %d", tc.shape, tc.ctx, tc.seqs, tc.ub, tc.fa, len(g.Nodes()), tc.nodes)
		}
		got := float64(cpuComputeBytes(m, c, measuredRules(t, "80fb11a"), build)) / (1 << 20)
		diff := got - tc.mib
		t.Logf("%-14s ctx %5dx%d ub %4d fa %-5v kq8 %-5v full %-5v: replay %9.4f MiB, llama.cpp %9.4f, diff %+.4f", tc.shape, tc.ctx, tc.seqs, tc.ub, tc.fa, tc.kq8, tc.swaFull, got, tc.mib, diff)
		if diff > 0.00005 || diff < -0.00005 {
			t.Errorf("%s ctx %dx%d ub %d fa %v kq8 %v swa-full %v: %.4f MiB, llama.cpp %.4f (diff %+.4f)", tc.shape, tc.ctx, tc.seqs, tc.ub, tc.fa, tc.kq8, tc.swaFull, got, tc.mib, diff)
		}
	}
}

// Variants the description does not cover keep the rough estimate.
func TestSWABuilderDeclines(t *testing.T) {
	s, _ := synth.Lookup("gemma-3-1b")
	m := shapeQuantModel(t, s, synth.Q8_0)
	if builderFor(m) == nil {
		t.Fatal("gemma3 with sliding layers: no builder")
	}
	noSWA := *m
	noSWA.Layers = append([]arch.Layer(nil), m.Layers...)
	for i := range noSWA.Layers {
		noSWA.Layers[i].Attention = arch.Full
	}
	if builderFor(&noSWA) != nil {
		t.Error("gemma3 without sliding layers builds another graph (gemma3<false>)")
	}
	p, _ := synth.Lookup("phi-3-mini-4k")
	phi := *shapeQuantModel(t, p, synth.Q4_K_M)
	if builderFor(&phi) == nil {
		t.Fatal("phi3: no builder")
	}
	phi.NExpert = 16
	if builderFor(&phi) != nil {
		t.Error("phi3 with experts (the MoE branch) is not described")
	}
}
