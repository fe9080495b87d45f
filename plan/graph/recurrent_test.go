package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// The figures are the CPU compute buffers ("compute_exact", four decimals)
// and graph node counts ("graph nodes" in llama.cpp's log) of the golden
// llama.cpp loads in conformance/testdata/golden for the recurrent and
// hybrid shapes, batch 512. The replay must agree to the printed precision
// and record as many nodes as the engine's graph.
func TestRecurrentComputeCPU(t *testing.T) {
	l := func(ctx, seqs int, fa bool) load { return load{ctx: ctx * seqs, seqs: seqs, batch: 512, flash: fa} }
	checkReplays(t, []replay{
		{"mamba2-130m", synth.Q8_0, l(4096, 1, false), 1208, 102.7227},
		{"mamba2-130m", synth.Q8_0, l(32768, 1, false), 1208, 102.7227},
		{"mamba2-130m", synth.Q8_0, l(4096, 4, false), 1208, 102.7227},
		{"lfm2-350m", synth.Q8_0, l(4096, 1, false), 578, 148.0098},
		{"lfm2-350m", synth.Q8_0, l(32768, 1, false), 578, 1100.0098},
		{"lfm2-350m", synth.Q8_0, l(4096, 1, true), 548, 132.0020},
		{"lfm2-350m", synth.Q8_0, l(4096, 4, false), 584, 148.0098},
		{"lfm2-1.2b", synth.Q4_K_M, l(4096, 1, false), 578, 286.0098},
		{"lfm2-1.2b", synth.Q4_K_M, l(4096, 4, true), 560, 144.0137},
		{"granite-4.0-h-micro", synth.Q8_0, l(4096, 1, false), 2204, 286.0098},
		{"granite-4.0-h-micro", synth.Q8_0, l(32768, 1, false), 2204, 2134.0098},
		{"granite-4.0-h-micro", synth.Q8_0, l(4096, 1, true), 2184, 204.0020},
		{"granite-4.0-h-micro", synth.Q8_0, l(4096, 4, false), 2208, 286.0098},
		{"falcon-h1-0.5b", synth.Q8_0, l(4096, 1, false), 3103, 90.5098},
		{"falcon-h1-0.5b", synth.Q8_0, l(32768, 1, false), 3103, 594.5098},
		{"falcon-h1-0.5b", synth.Q8_0, l(4096, 1, true), 2923, 70.0332},
		{"falcon-h1-0.5b", synth.Q8_0, l(4096, 4, false), 3139, 82.5098},
		{"qwen3-next-80b-a3b", synth.Q5_K_M, l(4096, 1, false), 5059, 314.7598},
		{"qwen3-next-80b-a3b", synth.Q5_K_M, l(4096, 2, false), 5071, 314.7598},
		{"qwen3-next-80b-a3b", synth.Q5_K_M, l(8192, 1, true), 4999, 308.7520},
	})
}
