package hw

import (
	"strings"
	"testing"
)

// TestPresets builds every preset and checks that each figure says where it
// came from.
func TestPresets(t *testing.T) {
	f, err := loadPresetFile()
	if err != nil {
		t.Fatal(err)
	}
	required := []string{"rtx-4090", "rtx-3090", "2x-rtx-3090", "rtx-5090", "rtx-5070-ti", "rtx-5070",
		"m4-16", "m3-pro-18", "m4-pro-24", "m3-pro-36", "m4-pro-48", "m4-max-64", "m4-max-128",
		"strix-halo-128", "dgx-spark", "cpu-32"}
	names := map[string]bool{}
	for _, p := range Presets() {
		names[p.Name] = true
	}
	for _, n := range required {
		if !names[n] {
			t.Errorf("preset %s is missing", n)
		}
	}
	for _, p := range f.Presets {
		if _, err := p.snapshot(); err != nil {
			t.Errorf("%v", err)
		}
		if p.Summary == "" {
			t.Errorf("%s: no summary", p.Name)
		}
		for _, d := range p.Domains {
			if d.CapacitySource == "" || (d.Usable != "" && d.UsableSource == "") ||
				(d.BandwidthGBps > 0 && d.BandwidthSource == "") {
				t.Errorf("%s, domain %s: a figure without its source", p.Name, d.ID)
			}
		}
		for _, d := range p.Devices {
			if len(d.Features) > 0 && d.FeaturesSource == "" {
				t.Errorf("%s, device %s: features without their source", p.Name, d.Name)
			}
			if d.Total != "" && d.TotalSource == "" {
				t.Errorf("%s, device %s: total without its source", p.Name, d.Name)
			}
		}
	}
	for _, b := range f.Bandwidths {
		if b.Source == "" || b.GBps <= 0 {
			t.Errorf("bandwidth %s: %g GB/s from %q", b.Name, b.GBps, b.Source)
		}
	}
}

// TestAppleWorkingSet keeps the probe's default rule and the Mac presets in
// agreement with the measured values they both cite.
func TestAppleWorkingSet(t *testing.T) {
	measured := map[int64]float64{16: 10.67, 32: 21.33, 36: 27, 48: 36, 64: 48, 128: 96} // GiB, from llama.cpp logs
	for gb, want := range measured {
		got := float64(appleWorkingSet(gb<<30)) / (1 << 30)
		if got < want-0.01 || got > want+0.01 {
			t.Errorf("%d GB: working set %.2f GiB, measured %.2f", gb, got, want)
		}
	}
	for _, p := range Presets() {
		s := mustPreset(t, p.Name)
		if mtl := s.Device("MTL0"); mtl != nil {
			u := s.Domain("unified")
			// The 24 GB preset carries a working set measured on a newer
			// macOS instead of the default rule.
			rule := u.Usable == appleWorkingSet(u.Capacity) || p.Name == "m4-pro-24"
			if !rule || mtl.Total != u.Usable {
				t.Errorf("%s: usable %d, MTL0 total %d, rule %d", p.Name, u.Usable, mtl.Total, appleWorkingSet(u.Capacity))
			}
		}
	}
}

func TestKnownBandwidth(t *testing.T) {
	tests := []struct {
		name   string
		memory int64
		want   float64
	}{
		{"NVIDIA GeForce RTX 3090", 24 << 30, 936},
		{"NVIDIA GeForce RTX 3090 Ti", 24 << 30, 0}, // a different part, not in the table
		{"NVIDIA GeForce RTX 5070 Ti", 16 << 30, 896},
		{"NVIDIA GeForce RTX 5070", 12 << 30, 672},
		{"NVIDIA GeForce RTX 3060", 12 << 30, 360},
		{"NVIDIA GeForce RTX 3060", 8 << 30, 0}, // the 8 GB card has a narrower bus
		{"Apple M4 Max", 128 << 30, 546},
		{"Apple M4 Max", 36 << 30, 0},
		{"Apple M4", 16 << 30, 120},
		{"Apple M1 Pro", 16 << 30, 0},
		{"AMD Radeon 8060S Graphics (RADV GFX1151)", 128 << 30, 256},
		{"", 0, 0},
	}
	for _, tc := range tests {
		if got, src := knownBandwidth(tc.name, tc.memory); got != tc.want || (got > 0) != (src != "") {
			t.Errorf("knownBandwidth(%q) = %g (%q), want %g", tc.name, got, src, tc.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		base int64
		want int64
		err  string
	}{
		{"24 GiB", 0, 24 << 30, ""},
		{"127600748 KiB", 0, 127600748 << 10, ""},
		{"63968 MiB", 0, 63968 << 20, ""},
		{"75%", 128 << 30, 96 << 30, ""},
		{"2/3", 16 << 30, 16 << 30 / 3 * 2, ""},
		{"24 GB", 0, 0, `unit "GB", expected B, KiB`},
		{"75%", 0, 0, "percentage of a known capacity"},
		{"3/2", 16, 0, "0 < n <= d"},
		{"lots", 0, 0, "expected a number and a unit"},
	}
	for _, tc := range tests {
		got, err := parseSize(tc.in, tc.base)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseSize(%q): error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseSize(%q, %d) = %d, %v; want %d", tc.in, tc.base, got, err, tc.want)
		}
	}
}
