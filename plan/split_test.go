package plan

import (
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/synth"
)

// unequalCards is a 24 GB and a 12 GB card beside 64 GB of RAM.
func unequalCards(t *testing.T) *hw.Snapshot {
	t.Helper()
	s, err := hw.LoadMachine("rtx-3090+rtx-3060")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSplitFillsBackToFront: on unequal cards llama.cpp's default split
// (in proportion to free memory) leaves the second card, which also holds
// the output layer and its compute buffer, short; filling it first, as
// llama.cpp's fit does, keeps more layers on the GPUs. The plan says so
// with -ts.
func TestSplitFillsBackToFront(t *testing.T) {
	m := model(t, "llama-3.1-70b", synth.Q4_K_M)
	s := unequalCards(t)
	o := DefaultSearch()
	o.Parallel = 1
	p, err := Search(m, s, o)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Chosen
	if c == nil {
		t.Fatalf("no plan: %v", p.Explain)
	}
	if len(c.Profile.TensorSplit) != 2 || !slices.Contains(c.Flags, "-ts") {
		t.Fatalf("plan %v: want a -ts split over the two cards", c.Flags)
	}
	// The same profile with llama.cpp's default split does not keep the
	// target free: the split is what made it fit.
	cpu, gpus := Devices(s)
	q := c.Profile
	q.TensorSplit = nil
	if a, err := assessOnce(m, q, s, cpu, gpus); err == nil && a.Verdict == Fits && minMargin(a) >= o.FitTarget {
		t.Errorf("the default split fits too (%v); the -ts is not needed", c.Flags)
	}
	fit := FitLikeLlamaCpp(m, s, 1, 4096, o.FitTarget)
	if c.GPULayers < fit.GPULayers || (c.GPULayers == fit.GPULayers && c.CtxPerSlot < fit.Ctx) {
		t.Errorf("plan keeps %d layers at %d cells, llama.cpp's fit rules %d at %d", c.GPULayers, c.CtxPerSlot, fit.GPULayers, fit.Ctx)
	}
	for _, d := range c.Result.Domains {
		if d.Required > 0 && d.Margin < o.FitTarget {
			t.Errorf("domain %s keeps %d MiB free, less than the target", d.ID, d.Margin>>20)
		}
	}
	t.Logf("plan %v; llama.cpp fit rules: %d layers at %d cells", c.Flags, fit.GPULayers, fit.Ctx)
}
