package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/synth"
)

// The CPU compute buffers ("compute_exact") and graph node counts of the
// golden Gemma 3n loads (conformance/testdata/golden/gemma-3n-e2b.*): the
// replay must agree to the printed precision and record the engine's
// nodes, the shared-KV layers' Q-only attention included. node-llama-cpp
// asked these loads for a batch of 513 (the goldens' n_batch and
// n_ubatch).
func TestGemma3nComputeCPU(t *testing.T) {
	checkReplays(t, []replay{
		{"gemma-3n-e2b", synth.Q8_0, load{ctx: 4096, seqs: 1, batch: 513, ubatch: 513}, 2861, 525.5264},
		{"gemma-3n-e2b", synth.Q8_0, load{ctx: 8192, seqs: 2, batch: 513, ubatch: 513}, 2881, 525.5420},
		{"gemma-3n-e2b", synth.Q8_0, load{ctx: 8192, seqs: 1, batch: 513, ubatch: 513, flash: true}, 2731, 521.5186},
	})
	// A layer that would read a later layer's cache is not Gemma 3n's
	// graph: the family declines rather than describe something else.
	m := model(t, "gemma-3n-e2b", synth.Q8_0)
	bad := *m
	bad.Layers = append([]arch.Layer(nil), m.Layers...)
	bad.Layers[25].KVLayer = 27
	if (gemma3n{}).graphOf(&bad) != nil {
		t.Error("a graph for a layer sharing a later layer's cache")
	}
}
