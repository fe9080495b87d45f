package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
	"github.com/headroom-llm/headroom/synth"
)

// Older builds' inputs (without Rules.MaskF16 and EmbdSelect): an F32 mask
// that the graph casts to F16 for flash attention, and no unused vector
// input beside the token lookup.
func TestOlderBuildInputs(t *testing.T) {
	_, _, _, graph := ruleGraphs(t, "llama-3.2-1b", synth.Q8_0, 4096, true)
	inputs := func(r builds.Rules) (names map[string]gguf.GGMLType, casts int) {
		g := graph(r)
		names = map[string]gguf.GGMLType{}
		for _, l := range g.Leafs() {
			names[l.Name] = l.Type()
		}
		for _, n := range g.Nodes() {
			if n.Op() == ggml.Cpy && n.Type() == gguf.TypeF16 {
				casts++
			}
		}
		return names, casts
	}
	now, casts := inputs(measuredRules(t, "80fb11a"))
	if now["kq_mask"] != gguf.TypeF16 || casts != 0 {
		t.Errorf("80fb11a: mask %v, %d casts; want an F16 input and none", now["kq_mask"], casts)
	}
	if _, ok := now["inp_embd"]; !ok {
		t.Error("80fb11a: no vector input")
	}
	old, casts := inputs(measuredRules(t, "80fb11a", func(r *builds.Rules) { r.MaskF16, r.EmbdSelect = false, false }))
	if old["kq_mask"] != gguf.TypeF32 || casts != 1 {
		t.Errorf("older build: mask %v, %d casts; want an F32 input cast once", old["kq_mask"], casts)
	}
	if _, ok := old["inp_embd"]; ok {
		t.Error("older build: the vector input is made")
	}
}
