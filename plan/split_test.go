package plan

import (
	"fmt"
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
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
	if a, err := assessOnce(m, q, s, cpu, gpus); err == nil && a.Verdict == Fits && a.LeastMargin() >= o.FitTarget {
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

// llama.cpp places layers with float32 arithmetic on summed shares: with
// five equal GPUs and 65 layers, layer 39 sits exactly on the third
// boundary (39/65 = 0.6f = 3F/5F) and goes to the fourth GPU, so the
// GPUs hold 13 layers each (as a five-MI50 log shows: 13 KV layers on
// each of the first four, 12 and the output on the last).
func TestPlaceLayersFloat32Boundary(t *testing.T) {
	var gpus []Device
	for i := range 5 {
		gpus = append(gpus, Device{Name: fmt.Sprintf("ROCm%d", i), Free: 32752 << 20})
	}
	out := placeLayers(64, -1, nil, gpus, "CPU")
	count := map[string]int{}
	for _, d := range out {
		count[d]++
	}
	for i := range 5 {
		if n := count[fmt.Sprintf("ROCm%d", i)]; n != 13 {
			t.Errorf("ROCm%d holds %d layers, want 13 (%v)", i, n, count)
		}
	}
	if out[39] != "ROCm3" {
		t.Errorf("layer 39 on %s, want ROCm3", out[39])
	}
	// A split of zeros is the default split, by free memory.
	gpus[0].Free = 3 * gpus[1].Free
	if a, b := placeLayers(64, -1, []float64{0, 0, 0, 0, 0}, gpus, "CPU"), placeLayers(64, -1, nil, gpus, "CPU"); !slices.Equal(a, b) {
		t.Errorf("-ts 0,0,0,0,0 places %v, the default split %v", a, b)
	}
}
