package cli

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestRecommendIsPlan: every configuration recommend shows as fitting is
// exactly what 'headroom plan' gives for that variant on that machine:
// the same context per slot, slots, GPU layers, cache type and flags.
func TestRecommendIsPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("plans every fitting catalog variant twice")
	}
	for _, machine := range []string{"cpu-32", "rtx-4090"} {
		t.Run(machine, func(t *testing.T) {
			code, out, errs := run(t, "recommend", "--machine", machine, "--json")
			if code != 0 {
				t.Fatalf("recommend: exit %d: %s", code, errs)
			}
			var rec struct {
				Rows []struct {
					Entry   string `json:"entry"`
					Quant   string `json:"quant"`
					Enabled bool   `json:"enabled"`
					Plan    *struct {
						CtxPerSlot int      `json:"ctx_per_slot"`
						Slots      int      `json:"slots"`
						GPULayers  int      `json:"gpu_layers"`
						CacheType  string   `json:"cache_type"`
						Flags      []string `json:"flags"`
					} `json:"plan"`
				} `json:"configurations"`
			}
			if err := json.Unmarshal([]byte(out), &rec); err != nil {
				t.Fatal(err)
			}
			fits := 0
			for _, r := range rec.Rows {
				if !r.Enabled {
					continue
				}
				fits++
				ref := r.Entry + "/" + r.Quant
				code, out, errs := run(t, "plan", ref, "--machine", machine, "--json", "--quiet")
				if code != 0 {
					t.Errorf("%s: recommend says it fits, plan exits %d: %s", ref, code, errs)
					continue
				}
				var p struct {
					Chosen struct {
						CtxPerSlot int `json:"ctx_per_slot"`
						GPULayers  int `json:"gpu_layers"`
						Profile    struct {
							Parallel int    `json:"parallel"`
							CacheK   string `json:"cache_type_k"`
						} `json:"profile"`
						Flags []string `json:"flags"`
					} `json:"chosen"`
				}
				if err := json.Unmarshal([]byte(out), &p); err != nil {
					t.Fatalf("%s: %v", ref, err)
				}
				c, rp := p.Chosen, r.Plan
				if c.CtxPerSlot != rp.CtxPerSlot || c.GPULayers != rp.GPULayers || c.Profile.Parallel != rp.Slots ||
					c.Profile.CacheK != rp.CacheType || !slices.Equal(c.Flags, rp.Flags) {
					t.Errorf("%s: recommend plans %d cells x %d slots, %d layers, %s cache (%v); plan gives %d x %d, %d, %s (%v)",
						ref, rp.CtxPerSlot, rp.Slots, rp.GPULayers, rp.CacheType, rp.Flags,
						c.CtxPerSlot, c.Profile.Parallel, c.GPULayers, c.Profile.CacheK, c.Flags)
				}
			}
			if fits == 0 {
				t.Fatal("nothing fits")
			}
			t.Logf("%d fitting rows agree with plan", fits)
		})
	}
}
