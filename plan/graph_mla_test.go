package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// mlaCase is one golden load's profile (conformance/testdata/golden,
// node-llama-cpp 3.21.1) and the engine's graph node count ("graph nodes"
// in sched_reserve), which checks that the description records the same
// tensors as llama.cpp.
type mlaCase struct {
	shape string
	quant synth.Quant
	ctx   int // per sequence
	seqs  int
	fa    FlashAttn
	nodes int
}

var mlaCases = []mlaCase{
	{"deepseek-v2-lite", synth.Q4_K_M, 4096, 1, FlashOff, 1818},
	{"deepseek-v2-lite", synth.Q4_K_M, 8192, 1, FlashOn, 1764},
	{"deepseek-v2-lite", synth.Q4_K_M, 4096, 2, FlashOff, 1845},
	{"glm-4.5-air", synth.Q8_0, 4096, 1, FlashOff, 3105},
	{"glm-4.5-air", synth.Q8_0, 8192, 1, FlashOn, 2875},
	{"glm-4.5-air", synth.Q8_0, 4096, 2, FlashOff, 3151},
}

func TestMLAGraphNodes(t *testing.T) {
	for _, tc := range mlaCases {
		s, ok := synth.Lookup(tc.shape)
		if !ok {
			t.Fatal(tc.shape)
		}
		m := shapeQuantModel(t, s, tc.quant)
		build := builderFor(m)
		if build == nil {
			t.Fatalf("%s: no builder", tc.shape)
		}
		p := Defaults()
		p.OutputsMax = libraryOutputs
		p.Ctx, p.Parallel, p.FlashAttn, p.Batch = tc.ctx*tc.seqs, tc.seqs, tc.fa, 512
		c, err := resolveContext(p, m.CtxTrain, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := build(m, c, c.NUBatch, &gb{cpu: "CPU", rules: measuredRules(t, "80fb11a")})
		want := tc.nodes
		if len(g.Nodes()) != want {
			t.Errorf("%s ctx %d x%d fa %s: %d nodes, want %d (engine %d)", tc.shape, tc.ctx, tc.seqs, tc.fa, len(g.Nodes()), want, tc.nodes)
		}
	}
}

// The NextN block of glm4moe is in the file and in the cache but not in
// the graph.
func TestMLAGraphLayersSkipNextN(t *testing.T) {
	s, _ := synth.Lookup("glm-4.5-air")
	m := shapeQuantModel(t, s, synth.Q8_0)
	if got := mlaGraphLayers(m); got != m.NLayer-1 {
		t.Errorf("graph layers %d, want %d", got, m.NLayer-1)
	}
	d, _ := synth.Lookup("deepseek-v2-lite")
	if got := mlaGraphLayers(shapeQuantModel(t, d, synth.Q4_K_M)); got != d.Layers {
		t.Errorf("deepseek2 graph layers %d, want %d", got, d.Layers)
	}
}
