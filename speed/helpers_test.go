package speed

import (
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

// shapeModel reads the header synth writes for a shape as a sparse file:
// header bytes, then zeros, so a 70B shape costs a few MiB.
func shapeModel(t testing.TB, s synth.Shape, q synth.Quant) *arch.Model {
	t.Helper()
	m, err := synth.Model(s, q)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// namedModel builds one of synth's built-in shapes.
func namedModel(t testing.TB, name string, q synth.Quant) *arch.Model {
	t.Helper()
	s, ok := synth.Lookup(name)
	if !ok {
		t.Fatalf("no shape %s", name)
	}
	return shapeModel(t, s, q)
}

// retypeQ4_0 turns an F16 model into the layout llama.cpp's quantizer
// writes for a Q4_0 file (LLAMA_FTYPE_MOSTLY_Q4_0): every matrix Q4_0
// except output.weight, which gets Q6_K; 1-D norms stay F32. synth has no
// Q4_0 recipe, and the calibration data is Q4_0.
func retypeQ4_0(t testing.TB, m *arch.Model) {
	t.Helper()
	for i := range m.Tensors {
		tn := &m.Tensors[i]
		if len(tn.Shape) < 2 {
			continue
		}
		typ := gguf.TypeQ4_0
		if strings.HasPrefix(tn.Name, "output.weight") {
			typ = gguf.TypeQ6_K
		}
		row, ok := typ.RowSize(tn.Shape[0])
		if !ok {
			t.Fatalf("%s: %d elements are not whole %s blocks", tn.Name, tn.Shape[0], typ)
		}
		tn.Type, tn.Size = typ, row*(tn.Elements()/tn.Shape[0])
	}
}

// fileBytes sums a model's tensor sizes: the GGUF data size without
// alignment padding, which is what llama-bench prints as "size".
func fileBytes(m *arch.Model) int64 {
	var n int64
	for _, tn := range m.Tensors {
		n += int64(tn.Size)
	}
	return n
}

// preset loads a built-in machine.
func preset(t testing.TB, name string) *hw.Snapshot {
	t.Helper()
	s, err := hw.LoadMachine(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// account plans a profile of m on machine s as the fit command does.
func account(t testing.TB, m *arch.Model, p plan.Profile, s *hw.Snapshot) *plan.Result {
	t.Helper()
	cpu, gpus := plan.Devices(s)
	r, err := plan.Account(m, p, cpu, gpus)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// profile is llama-server's defaults at context ctx with ngl layers.
func profile(ctx, ngl int) plan.Profile {
	p := plan.Defaults()
	p.Ctx, p.GPULayers = ctx, ngl
	return p
}
