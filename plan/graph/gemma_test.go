package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/synth"
)

// swaLoad is a load of the sliding-window goldens: ctx cells per
// sequence, batch and micro-batch ub (513 or 512, as node-llama-cpp passed
// them), q8 for q8_0 caches.
func swaLoad(ctx, seqs, ub int, fa, q8, swaFull bool) load {
	l := load{ctx: ctx * seqs, seqs: seqs, batch: ub, ubatch: ub, flash: fa, swaFull: swaFull}
	if q8 {
		l.cacheK, l.cacheV = "q8_0", "q8_0"
	}
	return l
}

// The figures are from conformance/testdata/golden: llama.cpp's graph node
// count ("graph nodes") and CPU compute buffer ("CPU compute buffer size",
// four decimals) for the synthetic files.
func TestGemmaGraphs(t *testing.T) {
	checkReplays(t, []replay{
		{"gemma-2-2b", synth.Q8_0, swaLoad(4096, 1, 513, true, true, false), 1258, 509.9961},
		{"gemma-2-2b", synth.Q8_0, swaLoad(4096, 1, 513, false, false, false), 1154, 509.9961},
		{"gemma-2-2b", synth.Q8_0, swaLoad(4096, 4, 513, true, false, false), 998, 514.5313},
		{"gemma-2-2b", synth.Q8_0, swaLoad(4096, 4, 513, false, false, false), 1180, 510.0225},
		{"gemma-2-2b", synth.Q8_0, swaLoad(8192, 1, 513, false, false, false), 1154, 509.9961},
		{"gemma-2-2b", synth.Q8_0, swaLoad(8192, 1, 512, false, false, true), 1154, 513.5020},
		{"gemma-3-1b", synth.Q8_0, swaLoad(32768, 1, 513, false, false, false), 1177, 560.3443},
		{"gemma-3-1b", synth.Q8_0, swaLoad(4096, 1, 513, true, true, false), 1359, 517.5108},
		{"gemma-3-1b", synth.Q8_0, swaLoad(4096, 1, 2049, false, false, false), 1177, 2076.0210},
		{"gemma-3-1b", synth.Q8_0, swaLoad(4096, 1, 513, false, false, false), 1177, 519.7652},
		{"gemma-3-1b", synth.Q8_0, swaLoad(4096, 1, 512, false, false, true), 1177, 518.7520},
		{"gemma-3-1b", synth.Q8_0, swaLoad(4096, 4, 513, true, false, false), 1099, 517.5240},
		{"gemma-3-1b", synth.Q8_0, swaLoad(4096, 4, 513, false, false, false), 1203, 519.7784},
		{"gemma-3-1b", synth.Q8_0, swaLoad(512, 1, 512, false, false, false), 1177, 518.7520},
		{"gemma-3-4b", synth.Q4_K_M, swaLoad(4096, 2, 513, true, false, false), 1435, 528.1663},
		{"gemma-3-4b", synth.Q4_K_M, swaLoad(8192, 1, 513, false, false, false), 1537, 528.1565},
	})
}

// Without sliding layers gemma3 builds another graph (gemma3<false>),
// which the family does not describe.
func TestGemmaDeclines(t *testing.T) {
	m := model(t, "gemma-3-1b", synth.Q8_0)
	if For(m) == nil {
		t.Fatal("gemma3 with sliding layers: no builder")
	}
	noSWA := *m
	noSWA.Layers = append([]arch.Layer(nil), m.Layers...)
	for i := range noSWA.Layers {
		noSWA.Layers[i].Attention = arch.Full
	}
	if For(&noSWA) != nil {
		t.Error("gemma3 without sliding layers builds another graph (gemma3<false>)")
	}
}
