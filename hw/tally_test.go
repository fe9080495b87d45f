package hw

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const gib30 = int64(1) << 30

func TestTally(t *testing.T) {
	tests := []struct {
		name     string
		preset   string
		charges  []Charge
		domains  map[string][4]int64 // id -> model, context, compute, auxiliary
		fits     bool
		limiting string
		breaches []Breach
	}{
		{
			name:   "Mac: CPU and MTL0 charge one unified pool",
			preset: "m4-max-128",
			charges: []Charge{
				{"CPU_Mapped", ChargeModel, 1 * gib30, 0}, {"MTL0", ChargeModel, 60 * gib30, 0},
				{"MTL0", ChargeContext, 8 * gib30, 0}, {"MTL0", ChargeCompute, 2 * gib30, 0}, {"CPU", ChargeCompute, gib30 / 2, 0},
				{"CPU", ChargeAuxiliary, gib30 / 4, 0},
			},
			domains:  map[string][4]int64{"unified": {61 * gib30, 8 * gib30, 2*gib30 + gib30/2, gib30 / 4}},
			fits:     true,
			limiting: "unified",
		},
		{
			name:   "2x3090: three domains, the second card over",
			preset: "2x-rtx-3090",
			charges: []Charge{
				{"CPU_Mapped", ChargeModel, gib30, 0}, {"CUDA_Host", ChargeCompute, gib30 / 8, 0},
				{"CUDA0", ChargeModel, 20 * gib30, 0}, {"CUDA0", ChargeContext, 2 * gib30, 0},
				{"CUDA1", ChargeModel, 22 * gib30, 0}, {"CUDA1", ChargeContext, 2 * gib30, 0}, {"CUDA1", ChargeCompute, gib30, 0},
			},
			domains: map[string][4]int64{
				"ram":  {gib30, 0, gib30 / 8, 0},
				"gpu0": {20 * gib30, 2 * gib30, 0, 0},
				"gpu1": {22 * gib30, 2 * gib30, gib30, 0},
			},
			fits:     false,
			limiting: "gpu1",
		},
		{
			name:     "Mac: Metal's working set is a device-local limit",
			preset:   "m4-16",
			charges:  []Charge{{"MTL0", ChargeModel, 11 * gib30, 0}},
			domains:  map[string][4]int64{"unified": {11 * gib30, 0, 0, 0}},
			fits:     false,
			limiting: "unified",
			breaches: []Breach{{Device: "MTL0", Limit: "device_total", Bytes: 11 * gib30, Allowed: 16 * gib30 / 3 * 2}},
		},
		{
			name:     "nothing charged",
			preset:   "cpu-32",
			domains:  map[string][4]int64{"ram": {}},
			fits:     true,
			limiting: "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustPreset(t, tc.preset)
			got, err := s.Tally(tc.charges)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Domains) != len(s.Domains) {
				t.Fatalf("%d domains listed, want all %d", len(got.Domains), len(s.Domains))
			}
			for _, u := range got.Domains {
				want := tc.domains[u.ID]
				if [4]int64{u.Model, u.Context, u.Compute, u.Auxiliary} != want {
					t.Errorf("%s: model/context/compute/auxiliary = %d/%d/%d/%d, want %v", u.ID, u.Model, u.Context, u.Compute, u.Auxiliary, want)
				}
				if u.Required != want[0]+want[1]+want[2]+want[3] || u.Margin != u.Available-u.Required {
					t.Errorf("%s: required %d, available %d, margin %d", u.ID, u.Required, u.Available, u.Margin)
				}
				if u.Available != s.Domain(u.ID).Available() {
					t.Errorf("%s: available %d, want the domain's %d", u.ID, u.Available, s.Domain(u.ID).Available())
				}
			}
			if got.Fits != tc.fits || got.Limiting != tc.limiting {
				t.Errorf("fits %v, limiting %q; want %v, %q", got.Fits, got.Limiting, tc.fits, tc.limiting)
			}
			if !reflect.DeepEqual(got.Breaches, tc.breaches) {
				t.Errorf("breaches %+v, want %+v", got.Breaches, tc.breaches)
			}
		})
	}
}

func TestTallyUnifiedAvailable(t *testing.T) {
	// The usable share, not the capacity, is what a unified pool offers.
	s := mustPreset(t, "strix-halo-128")
	got, err := s.Tally([]Charge{{"Vulkan0", ChargeModel, 70 * gib30, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if u := got.Domains[0]; u.Available != 63968<<20 || u.Margin >= 0 || got.Fits {
		t.Errorf("Strix Halo at default GTT: %+v", u)
	}
	s = mustPreset(t, "strix-halo-128-gtt96")
	if got, _ := s.Tally([]Charge{{"ROCm0", ChargeModel, 70 * gib30, 0}}); !got.Fits {
		t.Errorf("Strix Halo with GTT at 96 GiB should fit 70 GiB: %+v", got)
	}
}

func TestTallyMaxAlloc(t *testing.T) {
	s := mustPreset(t, "rtx-4090")
	s.Device("Vulkan0").MaxAlloc = 4 * gib30
	// A 6 GiB buffer of small tensors is fine (ggml splits it); one 5 GiB
	// tensor is not.
	got, err := s.Tally([]Charge{{"Vulkan0", ChargeModel, 6 * gib30, 3 * gib30}, {"Vulkan0", ChargeModel, 5 * gib30, 5 * gib30}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Breach{{Device: "Vulkan0", Limit: "max_alloc", Bytes: 5 * gib30, Allowed: 4 * gib30}}
	if got.Fits || got.Limiting != "gpu0" || !reflect.DeepEqual(got.Breaches, want) {
		t.Errorf("fits %v, limiting %q, breaches %+v", got.Fits, got.Limiting, got.Breaches)
	}
}

func TestTallyErrors(t *testing.T) {
	s := mustPreset(t, "rtx-4090")
	tests := []struct {
		charge Charge
		err    string
	}{
		{Charge{"CUDA3", ChargeModel, 1, 0}, `charges[0]: hw: "CUDA3" is neither a device view nor a buffer type`},
		{Charge{"CUDA0", "kv", 1, 0}, `kind is "kv", expected model, context, compute, auxiliary or serving`},
		{Charge{"CUDA0", ChargeModel, -1, 0}, "bytes is -1, expected zero or more"},
	}
	for _, tc := range tests {
		if _, err := s.Tally([]Charge{tc.charge}); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: error %v, want %q", tc.charge, err, tc.err)
		}
	}
}

func TestDomainUseJSON(t *testing.T) {
	// The contract 'headroom fit --json' prints for each domain.
	b, _ := json.Marshal(DomainUse{ID: "gpu0", Kind: KindDevice, Views: []string{"CUDA0"}})
	want := `{"id":"gpu0","kind":"device","views":["CUDA0"],"model":0,"context":0,"compute":0,"auxiliary":0,"serving":0,"required":0,"available":0,"margin":0}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
