package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/synth"
)

// Every architecture of the family is described, and variants the graph
// does not cover keep the rough estimate.
func TestMoeBuilderCoverage(t *testing.T) {
	for _, name := range []string{"qwen1.5-moe-a2.7b", "qwen3-30b-a3b", "gpt-oss-20b", "llama-4-scout"} {
		m := model(t, name, synth.Q8_0)
		if For(m) == nil {
			t.Errorf("%s (%s): no graph builder", name, m.Arch)
		}
	}
	// llama4 with an explicit sliding window of 0 builds llm_build_llama
	// over a unified cache, which this file does not describe.
	m := model(t, "llama-4-scout", synth.Q8_0)
	m.Window = 0
	for i := range m.Layers {
		m.Layers[i].Attention = arch.Full
	}
	if For(m) != nil {
		t.Error("llama4 without chunked attention got the iswa graph")
	}
	// A tensor the graph does not read (here a merged gate_up expert
	// stack) means a variant the description does not cover.
	m = model(t, "qwen3-30b-a3b", synth.Q8_0)
	extra := m.Tensors[len(m.Tensors)-1]
	extra.Name = "blk.0.ffn_gate_up_exps.weight"
	m.Tensors = append(m.Tensors, extra)
	if For(m) != nil {
		t.Error("qwen3moe with an unknown expert tensor got a graph")
	}
}

// The node count of the worst-case graph is the one llama.cpp logs
// ("sched_reserve: graph nodes") for the golden cases with flash
// attention, whose cache writes have no reshapes beyond those described
// here (conformance/testdata/golden/*.vk4.c8192x1.fa.b512.json). It checks
// that every tensor ggml records is described, views included.
func TestMoeGraphNodes(t *testing.T) {
	l := load{ctx: 8192, batch: 512, flash: true}
	checkReplays(t, []replay{
		{"qwen1.5-moe-a2.7b", synth.Q4_K_M, l, 1398, 0},
		{"qwen3-30b-a3b", synth.Q4_K_M, l, 3030, 0},
		{"llama-4-scout", synth.Q4_K_M, l, 2322, 0},
	})
}

// The CPU replay runs for every architecture, and the buffer holds at
// least the logits of a micro-batch, which are an output.
func TestMoeCPUReplay(t *testing.T) {
	for _, name := range []string{"qwen1.5-moe-a2.7b", "qwen3-30b-a3b", "gpt-oss-20b", "llama-4-scout"} {
		m := model(t, name, synth.Q8_0)
		for _, fa := range []bool{false, true} {
			c := load{ctx: 4096, batch: 512, flash: fa}.context(t)
			got := cpuBytes(For(m), c, measuredRules(t, "80fb11a"))
			if logits := int64(4 * m.NVocab * c.NUBatch); got < logits {
				t.Errorf("%s fa %v: %d bytes, less than the logits (%d)", name, fa, got, logits)
			}
		}
	}
}
