package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// Phi-3's golden loads (conformance/testdata/golden), as TestGemmaGraphs
// holds gemma's.
func TestPhi3Graphs(t *testing.T) {
	checkReplays(t, []replay{
		{"phi-3-mini-4k", synth.Q4_K_M, swaLoad(4096, 1, 513, true, true, false), 934, 90.8158},
		{"phi-3-mini-4k", synth.Q4_K_M, swaLoad(4096, 1, 513, false, false, false), 1094, 294.5841},
		{"phi-3-mini-4k", synth.Q4_K_M, swaLoad(4096, 2, 513, false, false, false), 1126, 295.1583},
	})
}

// The MoE branch of phi3.cpp is another graph, which the family does not
// describe.
func TestPhi3Declines(t *testing.T) {
	phi := *model(t, "phi-3-mini-4k", synth.Q4_K_M)
	if For(&phi) == nil {
		t.Fatal("phi3: no builder")
	}
	phi.NExpert = 16
	if For(&phi) != nil {
		t.Error("phi3 with experts (the MoE branch) is not described")
	}
}
