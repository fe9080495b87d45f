package conformance_test

import (
	"github.com/headroom-llm/headroom/builds"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/conformance"
	"github.com/headroom-llm/headroom/plan"
)

// plan.Measured calls a backend measured exactly when llama-server loads
// on it are among the golden cases: no backend is said to be held to
// measurements it has none of, and a backend measured here is not left
// labelled an estimate.
func TestMeasuredBackends(t *testing.T) {
	var have []string
	for _, dir := range []string{"server", "server-de3ff81", "server-cuda"} {
		dir = filepath.Join("testdata", dir)
		if !hasRecords(dir) {
			continue
		}
		cases, err := conformance.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cases {
			c := &cases[i]
			if !c.Server() {
				continue
			}
			b := map[string]string{"cpu": "CPU", "vulkan": "Vulkan", "cuda": "CUDA", "metal": "Metal", "rocm": "ROCm"}[c.Inputs.Profile.Backend]
			if b == "" {
				t.Errorf("%s: backend %q is not one this test knows", c.ID, c.Inputs.Profile.Backend)
			}
			have = append(have, b)
			if len(c.RPCEndpoints()) > 0 {
				have = append(have, "RPC")
			}
		}
	}
	for _, b := range []string{"CPU", "Vulkan", "RPC", "CUDA", "Metal", "ROCm", "SYCL"} {
		_, said := plan.Measured(b)
		if measured := slices.Contains(have, b); said != measured {
			t.Errorf("%s: plan.Measured says %v, the golden sets hold llama-server loads on it: %v", b, said, measured)
		}
	}
}

// de3ff81 is said to be measured on every llama-server case of 80fb11a's
// set (builds.Measured): the two golden sets hold the same cases.
func TestSecondBuildCoversTheSet(t *testing.T) {
	ids := func(dir string) []string {
		cases, err := conformance.Load(filepath.Join("testdata", dir))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i := range cases {
			if cases[i].Server() {
				out = append(out, cases[i].ID)
			}
		}
		slices.Sort(out)
		return out
	}
	old, de := ids("server"), ids("server-de3ff81")
	if !slices.Equal(old, de) {
		t.Errorf("%d cases in server, %d in server-de3ff81; they differ", len(old), len(de))
	}
	if k, ok := builds.Identify("de3ff81"); !ok || !strings.Contains(k.Measured, "every llama-server case of 80fb11a's set") {
		t.Errorf("builds.Measured no longer says what this test holds: %+v", k)
	}
}
