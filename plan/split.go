package plan

import (
	"github.com/headroom-llm/headroom/hw"
)

// fillSplit is llama.cpp's fit layer fill for several devices: the
// offloaded layers go to the devices back to front, each taking as many as
// leave its memory domain the target free, the first device the rest. It
// is tried where the default split (in proportion to free memory) failed
// although the GPUs together have room: unequal cards, where the last
// device also carries the output layer and its compute buffer, are the
// usual case. It returns the profile with the split as -ts takes it
// (layers per device) and its assessment when that fits.
func fillSplit(b *boundsMemo, p Profile, a *Assessment) (Profile, *Assessment, bool) {
	m, s, cpu, gpus, target := b.m, b.s, b.cpu, b.gpus, b.target
	if len(gpus) < 2 || len(p.TensorSplit) > 0 || a == nil {
		return p, nil, false
	}
	ngl := p.GPULayers
	if ngl < 0 || ngl > m.NLayer+1 {
		ngl = m.NLayer + 1
	}
	def := map[string]int{}
	for _, dev := range placeLayers(m.NLayer, ngl, nil, gpus, cpu.Name) {
		def[dev]++
	}
	if !roomOnGPUs(a, s, gpus, def, target) {
		return p, nil, false
	}
	domainOf := make([]string, len(gpus))
	for i, g := range gpus {
		if d, err := s.DomainOf(g.Name); err == nil {
			domainOf[i] = d.ID
		}
	}
	counts := make([]float64, len(gpus))
	// with assesses a split as far as domain only needs ("" for all).
	with := func(c []float64, only string) (*Assessment, bool) {
		q := p
		q.GPULayers, q.TensorSplit = ngl, append([]float64(nil), c...)
		a, _, err := b.keeps(q, only)
		return a, err == nil
	}
	marginOf := func(b *Assessment, id string) int64 {
		for _, d := range b.Domains {
			if d.ID == id {
				return d.Margin
			}
		}
		return 0
	}
	// Start from llama.cpp's default split and move layers off each
	// short device, last first: the per-layer cost estimated from the
	// device's own charge gets within a layer or two, and single steps
	// finish.
	remaining := ngl
	for d := len(gpus) - 1; d >= 1; d-- {
		k := min(def[gpus[d].Name], remaining)
		try := func(k int) (int64, bool) {
			c := append([]float64(nil), counts...)
			c[d], c[0] = float64(k), float64(remaining-k)
			b, ok := with(c, domainOf[d])
			if !ok {
				return 0, false
			}
			return marginOf(b, domainOf[d]), true
		}
		margin, ok := try(k)
		if !ok {
			return p, nil, false
		}
		if margin < target && k > 0 {
			if per := perLayer(a, domainOf[d], def[gpus[d].Name]); per > 0 {
				k = max(k-int((target-margin+per-1)/per), 0)
				margin, ok = try(k)
			}
		}
		for ok && margin < target && k > 0 {
			k--
			margin, ok = try(k)
		}
		// Room left over: give the device more, one layer at a time.
		for ok && margin >= target && k < remaining {
			next, ok2 := try(k + 1)
			if !ok2 || next < target {
				break
			}
			k, margin = k+1, next
		}
		if !ok || margin < target {
			k = 0
		}
		counts[d] = float64(k)
		remaining -= k
	}
	counts[0] = float64(remaining)
	q := p
	q.GPULayers, q.TensorSplit = ngl, counts
	final, ok, err := b.keeps(q, "")
	if err != nil || !ok {
		return p, nil, false
	}
	return q, final, true
}

// roomOnGPUs reports whether another split could help: nothing outside
// the GPUs is short (system memory, a device's largest allocation), and
// the GPUs with memory to spare could take the layers the short ones must
// give up. A layer's cost is estimated from the short device's charge per
// layer, an overestimate: a split this check rules out may still have
// fitted, never the other way round.
func roomOnGPUs(a *Assessment, s *hw.Snapshot, gpus []Device, layers map[string]int, target int64) bool {
	perDomain := map[string]int{}
	for _, g := range gpus {
		d, err := s.DomainOf(g.Name)
		if err != nil || d.Kind == hw.KindUnified {
			return false // one pool: a split moves nothing
		}
		perDomain[d.ID] += layers[g.Name]
	}
	if len(perDomain) < 2 || len(a.Breaches) > 0 {
		return false
	}
	var move, spare int64
	for _, d := range a.Domains {
		n, gpu := perDomain[d.ID]
		switch {
		case !gpu:
			if d.Required > 0 && d.Margin < target {
				return false
			}
		case d.Margin < target:
			if n == 0 {
				return false
			}
			per := d.Required / int64(n)
			give := (target - d.Margin + per - 1) / per
			move += give * per
		default:
			spare += d.Margin - target
		}
	}
	return move > 0 && move <= spare
}

// perLayer estimates one layer's charge on a domain: what the domain
// carries over the layers it holds (compute and output included, so an
// overestimate, which errs towards moving a layer too many; the single
// steps after it move it back).
func perLayer(a *Assessment, id string, layers int) int64 {
	if layers <= 0 {
		return 0
	}
	for _, d := range a.Domains {
		if d.ID == id {
			return d.Required / int64(layers)
		}
	}
	return 0
}
