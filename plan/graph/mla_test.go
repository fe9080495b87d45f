package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// The golden loads of the DeepSeek-layout shapes (conformance/testdata/
// golden, node-llama-cpp 3.21.1, batch 512) and the engine's graph node
// count ("graph nodes" in sched_reserve), which checks that the
// description records the same tensors as llama.cpp.
func TestMLAGraphNodes(t *testing.T) {
	checkReplays(t, []replay{
		{"deepseek-v2-lite", synth.Q4_K_M, load{ctx: 4096, seqs: 1, batch: 512}, 1818, 0},
		{"deepseek-v2-lite", synth.Q4_K_M, load{ctx: 8192, seqs: 1, batch: 512, flash: true}, 1764, 0},
		{"deepseek-v2-lite", synth.Q4_K_M, load{ctx: 8192, seqs: 2, batch: 512}, 1845, 0},
		{"glm-4.5-air", synth.Q8_0, load{ctx: 4096, seqs: 1, batch: 512}, 3105, 0},
		{"glm-4.5-air", synth.Q8_0, load{ctx: 8192, seqs: 1, batch: 512, flash: true}, 2875, 0},
		{"glm-4.5-air", synth.Q8_0, load{ctx: 8192, seqs: 2, batch: 512}, 3151, 0},
	})
}

// The NextN block of glm4moe is in the file and in the cache but not in
// the graph.
func TestMLAGraphLayersSkipNextN(t *testing.T) {
	m := model(t, "glm-4.5-air", synth.Q8_0)
	if got := mlaGraphLayers(m); got != m.NLayer-1 {
		t.Errorf("graph layers %d, want %d", got, m.NLayer-1)
	}
	d := model(t, "deepseek-v2-lite", synth.Q4_K_M)
	if got := mlaGraphLayers(d); got != d.NLayer {
		t.Errorf("deepseek2 graph layers %d, want %d", got, d.NLayer)
	}
}
