package launch

import (
	"testing"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/hw"
)

// TestReclaiming holds the arithmetic of the snapshot a provider's load
// is planned on: a reclaimable started booking's need is added back to a
// probe's free figure, up to the domain's size; other bookings change
// nothing (admission holds them back), and a preset's free memory stays
// its size.
func TestReclaiming(t *testing.T) {
	const gib = int64(1) << 30
	free := func(n int64) *int64 { return &n }
	booking := func(id string, started bool, gpu, ram int64) admission.Booking {
		return admission.Booking{ID: id, Model: id + ".gguf", Started: started, Need: map[string]int64{"gpu0": gpu, "ram": ram}}
	}
	reclaim := func(ids ...string) func(admission.Booking) bool {
		return func(b admission.Booking) bool {
			for _, id := range ids {
				if b.ID == id {
					return true
				}
			}
			return false
		}
	}
	tests := []struct {
		name string
		// gpuFree and ramFree are the probe's figures; nil a preset's.
		gpuFree, ramFree *int64
		held             []admission.Booking
		reclaim          func(admission.Booking) bool
		wantGPU, wantRAM int64
		wantKept         []string
	}{
		{name: "nothing booked", gpuFree: free(20 * gib), ramFree: free(50 * gib), reclaim: reclaim(),
			wantGPU: 20 * gib, wantRAM: 50 * gib},
		// A probe taken with x's server running: 24 GiB card, x holds
		// 22 GiB of it. Reclaimable, x's memory is free again.
		{name: "probe, idle model reclaimable", gpuFree: free(2 * gib), ramFree: free(60 * gib),
			held: []admission.Booking{booking("x", true, 22*gib, 4*gib)}, reclaim: reclaim("x"),
			wantGPU: 24 * gib, wantRAM: 64 * gib},
		{name: "probe, pinned model stays", gpuFree: free(2 * gib), ramFree: free(60 * gib),
			held: []admission.Booking{booking("x", true, 22*gib, 4*gib)}, reclaim: reclaim(),
			wantGPU: 2 * gib, wantRAM: 60 * gib, wantKept: []string{"x"}},
		// A server that grew past its booking: what the probe sees beyond
		// the booking stays lacking.
		{name: "probe, grown server", gpuFree: free(1 * gib), ramFree: free(60 * gib),
			held: []admission.Booking{booking("x", true, 22*gib, 4*gib)}, reclaim: reclaim("x"),
			wantGPU: 23 * gib, wantRAM: 64 * gib},
		// A server smaller than its booking: never more than the size.
		{name: "probe, booking above use", gpuFree: free(6 * gib), ramFree: free(62 * gib),
			held: []admission.Booking{booking("x", true, 22*gib, 4*gib)}, reclaim: reclaim("x"),
			wantGPU: 24 * gib, wantRAM: 64 * gib},
		// A load not started holds nothing a probe sees: nothing to add.
		{name: "probe, reclaimable load not started", gpuFree: free(24 * gib), ramFree: free(64 * gib),
			held: []admission.Booking{booking("y", false, 10*gib, 1*gib)}, reclaim: reclaim("y"),
			wantGPU: 24 * gib, wantRAM: 64 * gib},
		{name: "probe, one reclaimable and one staying", gpuFree: free(2 * gib), ramFree: free(56 * gib),
			held:    []admission.Booking{booking("x", true, 12*gib, 4*gib), booking("z", true, 10*gib, 4*gib)},
			reclaim: reclaim("x"), wantGPU: 14 * gib, wantRAM: 60 * gib, wantKept: []string{"z"}},
		// A preset observes no free memory: it stays the size, and the
		// models that stay are admission's to hold back.
		{name: "preset", held: []admission.Booking{booking("x", true, 12*gib, 4*gib), booking("z", true, 10*gib, 4*gib)},
			reclaim: reclaim("x"), wantGPU: 24 * gib, wantRAM: 64 * gib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &hw.Snapshot{
				Domains: []hw.Domain{
					{ID: "ram", Kind: hw.KindSystem, Capacity: 64 * gib, Free: tc.ramFree},
					{ID: "gpu0", Kind: hw.KindDevice, Capacity: 24 * gib, Free: tc.gpuFree},
				},
				Devices: []hw.Device{
					{Name: "CPU", Type: hw.TypeCPU, Domain: "ram"},
					{Name: "CUDA0", Type: hw.TypeGPU, Domain: "gpu0", Total: 24 * gib, Free: tc.gpuFree},
				},
			}
			got, kept := Reclaiming(s, tc.held, tc.reclaim)
			if g := domainFree(got, "gpu0"); g != tc.wantGPU {
				t.Errorf("gpu0 free %d MiB, want %d MiB", g>>20, tc.wantGPU>>20)
			}
			if g := got.Devices[1].Free; g != nil && *g != tc.wantGPU {
				t.Errorf("CUDA0 free %d MiB, want %d MiB", *g>>20, tc.wantGPU>>20)
			}
			if r := domainFree(got, "ram"); r != tc.wantRAM {
				t.Errorf("ram free %d MiB, want %d MiB", r>>20, tc.wantRAM>>20)
			}
			var ids []string
			for _, b := range kept {
				ids = append(ids, b.ID)
			}
			if len(ids) != len(tc.wantKept) || (len(ids) > 0 && ids[0] != tc.wantKept[0]) {
				t.Errorf("kept %v, want %v", ids, tc.wantKept)
			}
			if tc.gpuFree != nil && *s.Domains[1].Free != *tc.gpuFree {
				t.Error("the snapshot given was changed")
			}
		})
	}
}

func domainFree(s *hw.Snapshot, id string) int64 {
	for _, d := range s.Domains {
		if d.ID == id {
			if d.Free == nil {
				return d.Capacity
			}
			return *d.Free
		}
	}
	return -1
}
