package launch

import (
	"testing"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/hw"
)

// TestBesideBookings holds the arithmetic of the snapshot a provider's
// load is planned on: reclaimable bookings count as free (their started
// servers' memory added back to a probe's free figure), the others are
// held back as admission holds them, and free never passes the domain's
// size less what is kept.
func TestBesideBookings(t *testing.T) {
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
		wantKept         int
	}{
		{name: "nothing booked", gpuFree: free(20 * gib), ramFree: free(50 * gib), reclaim: reclaim(),
			wantGPU: 20 * gib, wantRAM: 50 * gib},
		// A probe taken with x's server running: 24 GiB card, x holds
		// 22 GiB of it. Reclaimable, x's memory is free again.
		{name: "probe, idle model reclaimable", gpuFree: free(2 * gib), ramFree: free(60 * gib),
			held: []admission.Booking{booking("x", true, 22*gib, 4*gib)}, reclaim: reclaim("x"),
			wantGPU: 24 * gib, wantRAM: 64 * gib},
		{name: "probe, pinned model kept", gpuFree: free(2 * gib), ramFree: free(60 * gib),
			held: []admission.Booking{booking("x", true, 22*gib, 4*gib)}, reclaim: reclaim(),
			wantGPU: 2 * gib, wantRAM: 60 * gib, wantKept: 1},
		// A server that grew past its booking: what the probe sees less
		// than the booking stays lacking, never more than the size.
		{name: "probe, grown server", gpuFree: free(1 * gib), ramFree: free(60 * gib),
			held: []admission.Booking{booking("x", true, 22*gib, 4*gib)}, reclaim: reclaim("x"),
			wantGPU: 23 * gib, wantRAM: 64 * gib},
		// Another headroom's load not started yet: the probe does not
		// see it, the plan holds it back.
		{name: "probe, kept load starting", gpuFree: free(24 * gib), ramFree: free(64 * gib),
			held: []admission.Booking{booking("y", false, 10*gib, 1*gib)}, reclaim: reclaim(),
			wantGPU: 14 * gib, wantRAM: 63 * gib, wantKept: 1},
		{name: "probe, one reclaimable and one kept", gpuFree: free(2 * gib), ramFree: free(56 * gib),
			held:    []admission.Booking{booking("x", true, 12*gib, 4*gib), booking("z", true, 10*gib, 4*gib)},
			reclaim: reclaim("x"), wantGPU: 14 * gib, wantRAM: 60 * gib, wantKept: 1},
		// A preset knows no free figure: bookings count against the size.
		{name: "preset, one reclaimable and one kept",
			held:    []admission.Booking{booking("x", true, 12*gib, 4*gib), booking("z", true, 10*gib, 4*gib)},
			reclaim: reclaim("x"), wantGPU: 14 * gib, wantRAM: 60 * gib, wantKept: 1},
		{name: "preset, all reclaimable",
			held:    []admission.Booking{booking("x", true, 12*gib, 4*gib), booking("z", true, 10*gib, 4*gib)},
			reclaim: reclaim("x", "z"), wantGPU: 24 * gib, wantRAM: 64 * gib},
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
			got, kept := BesideBookings(s, tc.held, tc.reclaim)
			if g := domainFree(got, "gpu0"); g != tc.wantGPU {
				t.Errorf("gpu0 free %d MiB, want %d MiB", g>>20, tc.wantGPU>>20)
			}
			if g := got.Devices[1].Free; g != nil && *g != tc.wantGPU {
				t.Errorf("CUDA0 free %d MiB, want %d MiB", *g>>20, tc.wantGPU>>20)
			}
			if r := domainFree(got, "ram"); r != tc.wantRAM {
				t.Errorf("ram free %d MiB, want %d MiB", r>>20, tc.wantRAM>>20)
			}
			if len(kept) != tc.wantKept {
				t.Errorf("kept %d bookings, want %d", len(kept), tc.wantKept)
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
