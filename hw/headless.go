package hw

// Reserve is the memory a desktop session holds across the snapshot's
// domains: what running headless would give back.
func (s *Snapshot) Reserve() int64 {
	var n int64
	for _, d := range s.Domains {
		n += d.Reserved
	}
	return n
}

// Headless returns a copy of the snapshot as it would be with the desktop
// session stopped: each domain's reserve is free again (never beyond its
// capacity), and so is every view of that domain that reported free
// memory. The receiver is not changed.
func (s *Snapshot) Headless() *Snapshot {
	h := *s
	h.Domains = append([]Domain(nil), s.Domains...)
	h.Devices = append([]Device(nil), s.Devices...)
	for i := range h.Domains {
		d := &h.Domains[i]
		if d.Reserved <= 0 {
			continue
		}
		if d.Free != nil {
			f := min(*d.Free+d.Reserved, d.Capacity)
			d.Free = &f
		}
		for j := range h.Devices {
			v := &h.Devices[j]
			if v.Domain != d.ID || v.Free == nil {
				continue
			}
			f := *v.Free + d.Reserved
			if v.Total > 0 {
				f = min(f, v.Total)
			}
			v.Free = &f
		}
		d.Reserved = 0
	}
	return &h
}
