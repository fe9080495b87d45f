package speed

import (
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// BenchmarkEstimate is one speed estimate for Llama-3.1-70B Q4_K_M on the
// rtx-4090 preset with 40 of 81 layers offloaded at 8192 context: the
// catalog ranks about a hundred such configurations, and all of them
// together should take well under 100 ms.
func BenchmarkEstimate(b *testing.B) {
	m := namedModel(b, "llama-3.1-70b", synth.Q4_K_M)
	s := preset(b, "rtx-4090")
	r := account(b, m, profile(8192, 40), s)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Estimate(m, r, s, 8192); err != nil {
			b.Fatal(err)
		}
	}
}
