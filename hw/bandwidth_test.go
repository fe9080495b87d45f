package hw

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mapStore is a BandwidthStore in memory.
type mapStore map[string]Measured

func (m mapStore) Load(k string) (Measured, bool) { v, ok := m[k]; return v, ok }
func (m mapStore) Save(k string, v Measured)      { m[k] = v }

// TestBandwidthKept: a machine is measured once; later probes plan with
// the kept figure and say when it was taken, until the hardware changes
// or a remeasure is asked for. The fake measurer gives a new figure each
// call, as a real one does.
func TestBandwidthKept(t *testing.T) {
	store := mapStore{}
	calls := 0
	probe := func(fixture string, remeasure bool) *Domain {
		t.Helper()
		dir := filepath.Join("testdata", "probe", fixture)
		s, err := Probe(context.Background(), ProbeOptions{
			Root: os.DirFS(filepath.Join(dir, "root")), Runner: fakeRunner{filepath.Join(dir, "cmd")}, GOOS: "linux", Host: "t",
			Now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
			MeasureBandwidth: func(context.Context) (float64, string, error) {
				calls++
				return 40 + float64(calls), "measured here: test", nil
			},
			Bandwidth: store, Remeasure: remeasure,
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range s.Domains {
			if s.Domains[i].Kind == KindSystem {
				return &s.Domains[i]
			}
		}
		t.Fatal("no system domain")
		return nil
	}
	for _, tt := range []struct {
		step      string
		fixture   string
		remeasure bool
		gbps      float64
		calls     int
		kept      bool
	}{
		{"first probe measures", "cpu-cgroup2", false, 41, 1, false},
		{"second probe keeps it", "cpu-cgroup2", false, 41, 1, true},
		{"other hardware measures", "cpu-cgroup1", false, 42, 2, false},
		{"the first again keeps its own", "cpu-cgroup2", false, 41, 2, true},
		{"--remeasure measures again", "cpu-cgroup2", true, 43, 3, false},
		{"and that figure is kept", "cpu-cgroup2", false, 43, 3, true},
	} {
		before := calls
		d := probe(tt.fixture, tt.remeasure)
		said := strings.HasSuffix(d.BandwidthSource, "on 2026-03-04 (kept until the hardware changes; --remeasure measures again)")
		if d.BandwidthGBps != tt.gbps || calls != tt.calls || !said || (calls == before) != tt.kept {
			t.Errorf("%s: %g GB/s (%q) after %d measurements; want %g after %d, kept %v", tt.step, d.BandwidthGBps, d.BandwidthSource, calls, tt.gbps, tt.calls, tt.kept)
		}
	}
}

// A measurement taken while the machine was busy is low: measuring again
// keeps the higher figure, whichever came first.
func TestBandwidthKeepsHigher(t *testing.T) {
	store := mapStore{}
	dir := filepath.Join("testdata", "probe", "cpu-cgroup2")
	for _, tt := range []struct {
		measured, want float64
	}{{17.9, 17.9}, {40.2, 40.2}, {25, 40.2}, {41, 41}} {
		s, err := Probe(context.Background(), ProbeOptions{
			Root: os.DirFS(filepath.Join(dir, "root")), Runner: fakeRunner{filepath.Join(dir, "cmd")}, GOOS: "linux", Host: "t",
			Now:              time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
			MeasureBandwidth: func(context.Context) (float64, string, error) { return tt.measured, "measured here: test", nil },
			Bandwidth:        store, Remeasure: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range s.Domains {
			if d.Kind == KindSystem && d.BandwidthGBps != tt.want {
				t.Errorf("measured %g: kept %g GB/s, want %g", tt.measured, d.BandwidthGBps, tt.want)
			}
		}
	}
}
