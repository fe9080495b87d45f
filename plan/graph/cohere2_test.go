package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// Command R7B's golden loads (conformance/testdata/golden), as
// TestGemmaGraphs holds gemma's.
func TestCohere2Graphs(t *testing.T) {
	checkReplays(t, []replay{
		{"command-r7b", synth.Q8_0, swaLoad(16384, 2, 513, true, false, false), 984, 517.0254},
		{"command-r7b", synth.Q8_0, swaLoad(4096, 1, 513, false, false, false), 1080, 517.0098},
		{"command-r7b", synth.Q8_0, swaLoad(8192, 1, 512, false, false, true), 1080, 592.0137},
	})
}
