package speed

import (
	"reflect"
	"testing"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

// EstimateProfile places without the compute replay; its estimates must be
// Estimate's of the full accounting, fill by fill, and a profile that
// cannot be placed gets none.
func TestEstimateProfile(t *testing.T) {
	for _, tc := range []struct {
		name, shape, machine string
		q                    synth.Quant
		ngl                  int
	}{
		{"dense, all layers on the GPU", "tinyllama-1.1b", "rtx-4090", synth.Q4_K_M, 999},
		{"sliding window, half offloaded", "gemma-3-1b", "rtx-3060-12", synth.Q8_0, 13},
		{"recurrent on the CPU", "mamba2-130m", "cpu-32", synth.Q8_0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := namedModel(t, tc.shape, tc.q)
			snap, err := hw.LoadMachine(tc.machine)
			if err != nil {
				t.Fatal(err)
			}
			p := plan.Defaults()
			p.Ctx, p.GPULayers = 4096, tc.ngl
			cpu, gpus := plan.Devices(snap)
			r, err := plan.Account(m, p, cpu, gpus)
			if err != nil {
				t.Fatal(err)
			}
			got := EstimateProfile(m, p, cpu, gpus, snap, 0, 4096)
			if len(got) != 2 {
				t.Fatalf("%d estimates for two fills", len(got))
			}
			for i, fill := range []int{0, 4096} {
				want, err := Estimate(m, r, snap, fill)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got[i], want) {
					t.Errorf("fill %d: %+v, want the full accounting's %+v", fill, got[i], want)
				}
			}
			bad := p
			bad.CacheK = "nonsense"
			if e := EstimateProfile(m, bad, cpu, gpus, snap, 0); e == nil || len(e) != 0 {
				t.Errorf("a profile that cannot be placed: %+v, want an empty list", e)
			}
		})
	}
}
