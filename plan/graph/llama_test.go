package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/synth"
)

// The llama.cpp figures are the "CPU compute buffer size is N MiB" lines
// (four decimals) logged by node-llama-cpp 3.21.1's llama.cpp on the CPU
// backend for TinyLlama-shaped files and variants of them: one layer,
// n_embd 4096 with 64-wide heads, 16 heads of 128. The replay must agree to
// the printed precision.
func TestComputeReplayCPU(t *testing.T) {
	base, _ := synth.Lookup("tinyllama-1.1b")
	one := base
	one.Layers = 1
	wide := base
	wide.Embd, wide.HeadDim = 4096, 64
	h16 := base
	h16.Heads, h16.HeadDim = 16, 128
	tests := []struct {
		name    string
		s       synth.Shape
		ctx, ub int
		fa      bool
		mib     float64
	}{
		{"tinyllama", base, 4096, 512, false, 285.0098},
		{"tinyllama", base, 2048, 512, false, 153.0098},
		{"tinyllama", base, 8192, 512, false, 549.0098},
		{"tinyllama", base, 4096, 256, false, 142.5049},
		{"tinyllama", base, 4096, 512, true, 70.5020},
		{"tinyllama", base, 2048, 512, true, 70.5020},
		{"tinyllama", base, 8192, 512, true, 70.5020},
		{"tinyllama", base, 4096, 256, true, 35.2510},
		{"1 layer", one, 4096, 512, false, 285.0098},
		{"1 layer", one, 4096, 512, true, 70.5020},
		{"embd 4096", wide, 4096, 512, false, 305.0098},
		{"embd 4096", wide, 4096, 512, true, 106.5137},
		{"16 heads", h16, 4096, 512, false, 158.0098},
		{"16 heads", h16, 4096, 512, true, 70.5020},
	}
	rules := measuredRules(t, "80fb11a")
	models := map[string]*arch.Model{}
	for _, tc := range tests {
		m := models[tc.name]
		if m == nil {
			m = shapeModel(t, tc.s, synth.Q8_0)
			models[tc.name] = m
		}
		c := load{ctx: tc.ctx, batch: tc.ub, flash: tc.fa}.context(t)
		got := float64(cpuBytes(For(m), c, rules)) / (1 << 20)
		diff := got - tc.mib
		if diff > 0.00005 || diff < -0.00005 {
			t.Errorf("%s ctx %d ub %d fa %v: %.4f MiB, llama.cpp %.4f (diff %+.4f)", tc.name, tc.ctx, tc.ub, tc.fa, got, tc.mib, diff)
		}
	}
}
