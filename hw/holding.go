package hw

// Holding returns a copy of the snapshot with the memory of models that
// headroom itself has admitted taken out, so that a new load is judged
// beside them. starting holds, per domain, the bytes of loads admitted but
// not yet finished: a fresh snapshot cannot show them yet, so they come off
// what was free. all holds every admitted load, finished or not; it comes
// off the domain's usable size, because a finished load is not always
// visible as used memory (weights mapped from a file look like reclaimable
// page cache) and a preset has no free figure at all. Each domain keeps
// the smaller of the two, and so does each of its device views.
// The receiver is not changed.
func (s *Snapshot) Holding(starting, all map[string]int64) *Snapshot {
	h := *s
	h.Domains = append([]Domain(nil), s.Domains...)
	h.Devices = append([]Device(nil), s.Devices...)
	for i := range h.Domains {
		d := &h.Domains[i]
		if starting[d.ID] == 0 && all[d.ID] == 0 {
			continue
		}
		size := d.Capacity
		if d.Usable > 0 && d.Usable < size {
			size = d.Usable
		}
		free := size
		if d.Free != nil {
			free = *d.Free
		}
		f := max(min(free-starting[d.ID], size-all[d.ID]), 0)
		d.Free = &f
		for j := range h.Devices {
			v := &h.Devices[j]
			if v.Domain != d.ID || v.Type == TypeCPU {
				continue
			}
			total := v.Total
			if total <= 0 {
				total = size
			}
			vf := total
			if v.Free != nil {
				vf = *v.Free
			}
			g := max(min(vf-starting[d.ID], total-all[d.ID]), 0)
			v.Free = &g
		}
	}
	return &h
}
