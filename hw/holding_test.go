package hw

import "testing"

func TestHolding(t *testing.T) {
	const gib = int64(1) << 30
	s, err := LoadMachine("rtx-4090")
	if err != nil {
		t.Fatal(err)
	}
	var gpuDomain string
	for _, v := range s.Devices {
		if v.Type != TypeCPU {
			gpuDomain = v.Domain
		}
	}
	d := s.Domain(gpuDomain)
	if d == nil || d.Free != nil {
		t.Fatalf("want a preset GPU domain without a free figure, got %+v", d)
	}
	size := d.Available()
	live := *s
	live.Domains = append([]Domain(nil), s.Domains...)
	live.Devices = append([]Device(nil), s.Devices...)
	busy := size - 4*gib // something else uses 4 GiB
	for i := range live.Domains {
		if live.Domains[i].ID == gpuDomain {
			live.Domains[i].Free = &busy
		}
	}
	for i := range live.Devices {
		if live.Devices[i].Domain == gpuDomain {
			live.Devices[i].Free = &busy
		}
	}
	cases := []struct {
		name          string
		snap          *Snapshot
		starting, all int64
		want          int64
	}{
		{"nothing held", s, 0, 0, size},
		{"preset: a finished load counts against the size", s, 0, 10 * gib, size - 10*gib},
		{"preset: a starting load too", s, 6 * gib, 6 * gib, size - 6*gib},
		{"live: a starting load comes off the free figure", &live, 6 * gib, 6 * gib, size - 10*gib},
		{"live: a finished load shows in the free figure already", &live, 0, 3 * gib, size - 4*gib},
		{"live: a finished load the free figure missed", &live, 0, 20 * gib, size - 20*gib},
		{"never below zero", s, 0, 100 * gib, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := c.snap.Holding(map[string]int64{gpuDomain: c.starting}, map[string]int64{gpuDomain: c.all})
			if got := h.Domain(gpuDomain).Available(); got != c.want {
				t.Errorf("domain available %d MiB, want %d MiB", got>>20, c.want>>20)
			}
			for _, v := range h.Devices {
				if v.Domain != gpuDomain || v.Type == TypeCPU {
					continue
				}
				free := v.Total
				if v.Free != nil {
					free = *v.Free
				}
				if free > c.want {
					t.Errorf("view %s free %d MiB, want at most %d MiB", v.Name, free>>20, c.want>>20)
				}
			}
			if s.Domain(gpuDomain).Free != nil || *live.Domain(gpuDomain).Free != busy {
				t.Error("the receiver was changed")
			}
		})
	}
}
