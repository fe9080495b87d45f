package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/synth"
)

func model(t testing.TB, shape string, q synth.Quant) *arch.Model {
	t.Helper()
	s, ok := synth.Lookup(shape)
	if !ok {
		t.Fatalf("no shape %s", shape)
	}
	return shapeQuantModel(t, s, q)
}

// shapeQuantModel reads the header synth writes for a shape, as a sparse
// file: header bytes, then zeros, so even a 70B shape costs a few MiB.
func shapeQuantModel(t testing.TB, s synth.Shape, q synth.Quant) *arch.Model {
	t.Helper()
	m, err := synth.Model(s, q)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mib converts llama.cpp's printed "%8.2f MiB" back to the bytes range it
// stands for and reports whether n falls in it.
func printedMiB(n int64, printed float64) bool {
	return int64(printed*(1<<20)-0.005*(1<<20)) <= n && n <= int64(printed*(1<<20)+0.005*(1<<20))
}

// The figures are from llama.cpp's log for a TinyLlama-shaped Q4_K_M
// file loaded on the CPU backend (AVX2) with n_ctx 4096, one sequence,
// flash attention off, batch 512 (node-llama-cpp 3.21.1).
func TestTinyLlamaCPU(t *testing.T) {
	m := model(t, "tinyllama-1.1b", synth.Q4_K_M)
	p := Defaults()
	p.Ctx, p.FlashAttn, p.Batch = 4096, FlashOff, 512
	cpu := Device{Name: "CPU", Backend: "CPU", Features: []string{"avx2"}}
	r, err := Account(m, p, cpu, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"CPU_Mapped/model": 636.18, "CPU_REPACK/model": 455.06, "CPU/kv": 88.00, "CPU/output": 0.12}
	for _, b := range r.Buffers {
		key := b.BufferType + "/" + string(b.Kind)
		if w, ok := want[key]; ok {
			if !printedMiB(b.Bytes, w) {
				t.Errorf("%s: %d bytes = %.2f MiB, llama.cpp printed %.2f", key, b.Bytes, float64(b.Bytes)/(1<<20), w)
			}
			delete(want, key)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing buffers %v in\n%s", want, r)
	}
}

// byType sums the buffers of one kind by buffer type.
func byType(bufs []Buffer, kind BufferKind) map[string]int64 {
	out := map[string]int64{}
	for _, b := range bufs {
		if b.Kind == kind {
			out[b.BufferType] += b.Bytes
		}
	}
	return out
}
