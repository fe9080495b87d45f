package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/synth"
)

func moeShape(t *testing.T, name string, q synth.Quant) *arch.Model {
	t.Helper()
	s, ok := synth.Lookup(name)
	if !ok {
		t.Fatalf("no shape %q", name)
	}
	return shapeQuantModel(t, s, q)
}

// Every architecture of the family is described, and variants the graph
// does not cover keep the rough estimate.
func TestMoeBuilderCoverage(t *testing.T) {
	for _, name := range []string{"qwen1.5-moe-a2.7b", "qwen3-30b-a3b", "gpt-oss-20b", "llama-4-scout"} {
		m := moeShape(t, name, synth.Q8_0)
		if builderFor(m) == nil {
			t.Errorf("%s (%s): no graph builder", name, m.Arch)
		}
	}
	// llama4 with an explicit sliding window of 0 builds llm_build_llama
	// over a unified cache, which this file does not describe.
	m := moeShape(t, "llama-4-scout", synth.Q8_0)
	m.Window = 0
	for i := range m.Layers {
		m.Layers[i].Attention = arch.Full
	}
	if builderFor(m) != nil {
		t.Error("llama4 without chunked attention got the iswa graph")
	}
	// A tensor the graph does not read (here a merged gate_up expert
	// stack) means a variant the description does not cover.
	m = moeShape(t, "qwen3-30b-a3b", synth.Q8_0)
	extra := m.Tensors[len(m.Tensors)-1]
	extra.Name = "blk.0.ffn_gate_up_exps.weight"
	m.Tensors = append(m.Tensors, extra)
	if builderFor(m) != nil {
		t.Error("qwen3moe with an unknown expert tensor got a graph")
	}
}

// The node count of the worst-case graph is the one llama.cpp logs
// ("sched_reserve: graph nodes") for the golden cases with flash
// attention, whose cache writes have no reshapes beyond those described
// here (conformance/testdata/golden/*.vk4.c8192x1.fa.b512.json). It checks
// that every tensor ggml records is described, views included.
func TestMoeGraphNodes(t *testing.T) {
	tests := []struct {
		shape string
		nodes int
	}{
		{"qwen1.5-moe-a2.7b", 1398},
		{"qwen3-30b-a3b", 3030},
		{"llama-4-scout", 2322},
	}
	for _, tc := range tests {
		m := moeShape(t, tc.shape, synth.Q4_K_M)
		p := Defaults()
		p.OutputsMax = libraryOutputs
		p.Ctx, p.FlashAttn, p.Batch = 8192, FlashOn, 512
		c, err := resolveContext(p, m.CtxTrain, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := builderFor(m)(m, c, c.NUBatch, &gb{cpu: "CPU", rules: measuredRules(t, "80fb11a")})
		if len(g.Nodes()) != tc.nodes {
			t.Errorf("%s: %d nodes, llama.cpp %d", tc.shape, len(g.Nodes()), tc.nodes)
		}
	}
}

// The CPU replay runs for every architecture, and the buffer holds at
// least the logits of a micro-batch, which are an output.
func TestMoeCPUReplay(t *testing.T) {
	for _, name := range []string{"qwen1.5-moe-a2.7b", "qwen3-30b-a3b", "gpt-oss-20b", "llama-4-scout"} {
		m := moeShape(t, name, synth.Q8_0)
		for _, fa := range []FlashAttn{FlashOff, FlashOn} {
			p := Defaults()
			p.OutputsMax = libraryOutputs
			p.Ctx, p.FlashAttn, p.Batch = 4096, fa, 512
			c, err := resolveContext(p, m.CtxTrain, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := cpuComputeBytes(m, c, measuredRules(t, "80fb11a"), builderFor(m))
			if logits := int64(4 * m.NVocab * c.NUBatch); got < logits {
				t.Errorf("%s fa %s: %d bytes, less than the logits (%d)", name, fa, got, logits)
			}
		}
	}
}
