package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/internal/synth"
)

// BenchmarkAccount70B is one fit assessment's accounting for Llama-3.1-70B
// on the CPU at 8192 context: placement, every buffer, and the compute
// replay of two graphs of 80 layers.
func BenchmarkAccount70B(b *testing.B) {
	m := model(b, "llama-3.1-70b", synth.Q4_K_M)
	p := Defaults()
	p.Ctx = 8192
	cpu := Device{Name: "CPU", Backend: "CPU", Features: []string{"avx2"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Account(m, p, cpu, nil); err != nil {
			b.Fatal(err)
		}
	}
}
