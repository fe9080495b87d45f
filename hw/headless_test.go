package hw

import "testing"

func TestHeadless(t *testing.T) {
	free := func(n int64) *int64 { return &n }
	s := &Snapshot{
		Domains: []Domain{
			{ID: "ram", Kind: KindSystem, Capacity: 64 << 30, Free: free(40 << 30)},
			{ID: "gpu0", Kind: KindDevice, Capacity: 24 << 30, Free: free(21 << 30), Reserved: 2 << 30},
			{ID: "gpu1", Kind: KindDevice, Capacity: 8 << 30, Free: free(7 << 30), Reserved: 3 << 30},
		},
		Devices: []Device{
			{Name: "CPU", Type: TypeCPU, Domain: "ram"},
			{Name: "CUDA0", Type: TypeGPU, Domain: "gpu0", Total: 24 << 30, Free: free(21 << 30)},
			{Name: "CUDA1", Type: TypeGPU, Domain: "gpu1", Total: 8 << 30, Free: free(7 << 30)},
		},
	}
	if got := s.Reserve(); got != 5<<30 {
		t.Errorf("Reserve = %d, want %d", got, 5<<30)
	}
	h := s.Headless()
	for _, c := range []struct {
		dom, dev      string
		domFree, view int64
	}{
		{"ram", "", 40 << 30, 0},
		{"gpu0", "CUDA0", 23 << 30, 23 << 30},
		// A reserve larger than the room left is capped at the capacity.
		{"gpu1", "CUDA1", 8 << 30, 8 << 30},
	} {
		if d := h.Domain(c.dom); *d.Free != c.domFree || d.Reserved != 0 {
			t.Errorf("%s: free %d reserved %d, want %d and 0", c.dom, *d.Free, d.Reserved, c.domFree)
		}
		if c.dev != "" {
			if v := h.Device(c.dev); *v.Free != c.view {
				t.Errorf("%s: free %d, want %d", c.dev, *v.Free, c.view)
			}
		}
	}
	if h.Reserve() != 0 {
		t.Errorf("headless reserve %d", h.Reserve())
	}
	// The original is untouched.
	if *s.Domain("gpu0").Free != 21<<30 || s.Domain("gpu0").Reserved != 2<<30 || *s.Device("CUDA0").Free != 21<<30 {
		t.Errorf("Headless changed its receiver: %+v %+v", s.Domains[1], s.Devices[1])
	}
}
