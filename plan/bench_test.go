package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
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

// BenchmarkFit120BMoE assesses a gpt-oss-120b-shaped model (36 layers,
// 128 experts of which 4 are used, MXFP4 experts) on two RTX 3090s and
// system RAM: placement, every buffer, and the per-domain verdict.
func BenchmarkFit120BMoE(b *testing.B) {
	m, snap := gptOSS120BOn2x3090(b)
	p := Defaults()
	p.Ctx, p.GPULayers = 8192, 20
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Assess(m, nil, p, snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlan120BMoE searches the best plan for a gpt-oss-120b-shaped
// model over two RTX 3090s and system RAM.
func BenchmarkPlan120BMoE(b *testing.B) {
	m, snap := gptOSS120BOn2x3090(b)
	o := DefaultSearch()
	b.ReportAllocs()
	for b.Loop() {
		p, err := Search(m, snap, o)
		if err != nil || p.Chosen == nil {
			b.Fatalf("%v %v", err, p)
		}
	}
}

// gptOSS120BOn2x3090 is gpt-oss-20b's shape grown to gpt-oss-120b's 36
// layers of 128 experts (checked to be 110-125B parameters), and the
// 2x-rtx-3090 preset.
func gptOSS120BOn2x3090(b *testing.B) (*arch.Model, *hw.Snapshot) {
	b.Helper()
	s, ok := synth.Lookup("gpt-oss-20b")
	if !ok {
		b.Fatal("no gpt-oss shape")
	}
	s.Name, s.Layers = "gpt-oss-120b", 36
	moe := *s.MoE
	moe.Experts = 128
	s.MoE = &moe
	m := shapeQuantModel(b, s, synth.MXFP4_MOE)
	var got uint64
	for _, t := range m.Tensors {
		got += t.Elements()
	}
	if got < 110e9 || got > 125e9 {
		b.Fatalf("%d parameters is not 120B-class", got)
	}
	snap, err := hw.LoadMachine("2x-rtx-3090")
	if err != nil {
		b.Fatal(err)
	}
	return m, snap
}
