package catalog

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

// The screen is a closed-form estimate of a variant's best plan: weights,
// f16 KV cache per cell, recurrent state and a rough compute allowance,
// against each memory domain's usable bytes less the fit target. It costs
// microseconds where the accountant's graph replay costs milliseconds.
// Recommend's verdicts and plans are plan.Search's; where nothing fits, the
// screen names the domain that is short and by about how much, which the
// search does not say.

// machine is what the screen needs of a snapshot.
type machine struct {
	snap *hw.Snapshot
	// cpu and gpus are the snapshot's devices, as plan.Devices names them.
	cpu  plan.Device
	gpus []plan.Device
	// gpu is the usable bytes of the GPUs' domains together (0 without a
	// discrete GPU); sys the system (or unified) domain's.
	gpu, sys     int64
	gpuID, sysID string
	hasGPU       bool
	unified      bool
	// cal is the machine's own speed calibration, nil for none.
	cal *speed.Calibration
}

func newMachine(s *hw.Snapshot, fitTarget int64) machine {
	m := machine{snap: s}
	m.cpu, m.gpus = plan.Devices(s)
	if d, err := s.DomainOf(m.cpu.Name); err == nil {
		m.sys, m.sysID = d.Available()-fitTarget, d.ID
		m.unified = d.Kind == hw.KindUnified
	}
	seen := map[string]bool{}
	for _, g := range m.gpus {
		d, err := s.DomainOf(g.Name)
		if err != nil || seen[d.ID] {
			continue
		}
		seen[d.ID] = true
		if d.Kind == hw.KindUnified || d.ID == m.sysID {
			m.unified = true
			continue
		}
		m.hasGPU = true
		avail := d.Available()
		if g.Free > 0 {
			avail = min(avail, g.Free)
		}
		m.gpu += avail - fitTarget
		if m.gpuID == "" {
			m.gpuID = d.ID
		} else {
			m.gpuID += "+" + d.ID
		}
	}
	return m
}

// costs is a model's memory in closed form.
type costs struct {
	layers     int
	layerBytes []int64 // weights per block
	inBytes    int64   // embedding (always in system memory)
	outBytes   int64   // output layer weights
	fullCell   []int64 // f16 KV bytes per cell of each block's full-attention cache
	swaCell    []int64 // f16 KV bytes per cell of each block's sliding-window cache
	window     int
	state      []int64 // recurrent state bytes per sequence of each block
	compute    int64   // compute and output allowance
	ctxTrain   int
}

func costsOf(m *arch.Model) costs {
	c := costs{layers: m.NLayer, layerBytes: make([]int64, m.NLayer), fullCell: make([]int64, m.NLayer),
		swaCell: make([]int64, m.NLayer), state: make([]int64, m.NLayer), window: m.Window, ctxTrain: m.CtxTrain}
	for _, t := range m.Tensors {
		switch {
		case t.Layer == arch.InputLayer:
			c.inBytes += int64(t.Size)
		case t.Layer >= 0 && t.Layer < m.NLayer:
			c.layerBytes[t.Layer] += int64(t.Size)
		default:
			c.outBytes += int64(t.Size)
		}
	}
	if m.TiedOutput {
		// The tied embedding is loaded a second time as the output layer.
		for _, t := range m.Tensors {
			if t.Name == "token_embd.weight" {
				c.outBytes += int64(t.Size)
			}
		}
	}
	maxFF := 0
	for i, l := range m.Layers {
		b := int64(2 * (l.KDim + l.VDim))
		switch l.Attention {
		case arch.Full:
			c.fullCell[i] = b
		case arch.Sliding:
			c.swaCell[i] = b
		}
		if l.Recurrent {
			c.state[i] = int64(4 * (l.RDim + l.SDim))
		}
		maxFF = max(maxFF, l.FF)
	}
	if m.NExpertUsed > 0 {
		maxFF = max(maxFF, m.NExpertUsed*m.NFFExpert)
	}
	const ub = 512
	logits := int64(m.NVocab) * ub * 4
	ffn := int64(2*maxFF+2*m.NEmbd) * ub * 4
	c.compute = max(logits, ffn) + int64(m.NEmbd)*ub*8 + int64(m.NVocab)*4
	return c
}

// need is the bytes a set of blocks [from, to) needs at ctx cells per slot.
func (c costs) need(from, to, ctx, slots int) int64 {
	var n int64
	swa := min(ctx, c.window+512)
	for i := from; i < to; i++ {
		n += c.layerBytes[i] + int64(slots)*(c.fullCell[i]*int64(ctx)+c.swaCell[i]*int64(swa)+c.state[i])
	}
	return n
}

// estimate is the screen's answer.
type estimate struct {
	fits      bool
	ctx       int // per slot
	gpuLayers int // -ngl, the output layer counting as one; 0 without GPU
	limiting  string
	shortfall int64
}

// screen estimates the best plan of the goal: as in plan.Search, speed
// and balanced put the most layers on the GPU that fit at the minimum
// context, then balanced (and quality) take the most context; context
// takes the most context whatever the split.
func screen(c costs, mc machine, goal string, slots, minCtx int) estimate {
	ceiling := c.ctxTrain
	if ceiling <= 0 {
		ceiling = 131072
	}
	minCtx = min(minCtx, ceiling)
	// fitsAt says whether ngl layers on the GPU at ctx cells fit, and if
	// not which side is short and by how much.
	fitsAt := func(ngl, ctx int) (bool, string, int64) {
		nl := c.layers
		onGPU := min(ngl, nl+1) // blocks and output layer
		cpuBlocks := nl + 1 - onGPU
		if cpuBlocks > nl {
			cpuBlocks = nl
		}
		sysNeed := c.inBytes + c.need(0, cpuBlocks, ctx, slots) + int64(slots)*c.compute
		gpuNeed := int64(0)
		if onGPU > 0 {
			gpuNeed = c.need(cpuBlocks, nl, ctx, slots) + c.outBytes + c.compute
		} else {
			sysNeed += c.outBytes
		}
		if !mc.hasGPU {
			sysNeed += gpuNeed
			gpuNeed = 0
		}
		switch {
		case gpuNeed > mc.gpu && sysNeed > mc.sys:
			if gpuNeed-mc.gpu > sysNeed-mc.sys {
				return false, mc.gpuID, gpuNeed - mc.gpu
			}
			return false, mc.sysID, sysNeed - mc.sys
		case gpuNeed > mc.gpu:
			return false, mc.gpuID, gpuNeed - mc.gpu
		case sysNeed > mc.sys:
			return false, mc.sysID, sysNeed - mc.sys
		}
		return true, "", 0
	}
	maxNGL := 0
	if mc.hasGPU {
		maxNGL = c.layers + 1
	}
	// The most layers that fit at the minimum context.
	ngl := -1
	lo, hi := -1, maxNGL
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if ok, _, _ := fitsAt(mid, minCtx); ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	ngl = lo
	if ngl < 0 {
		// Nothing fits: report the split that is shortest of fitting.
		best := estimate{shortfall: 1 << 62}
		for _, n := range []int{0, maxNGL} {
			if _, lim, short := fitsAt(n, minCtx); short < best.shortfall {
				best = estimate{ctx: minCtx, gpuLayers: n, limiting: lim, shortfall: short}
			}
		}
		return best
	}
	if goal == plan.GoalContext && mc.hasGPU {
		ngl = 0
		for n := maxNGL; n >= 0; n -= max(1, maxNGL/8) {
			if ok, _, _ := fitsAt(n, ceiling); ok {
				ngl = n
				break
			}
		}
	}
	ctx := minCtx
	if goal != plan.GoalSpeed {
		lo, hi := minCtx/256, ceiling/256
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if ok, _, _ := fitsAt(ngl, mid*256); ok {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		ctx = lo * 256
	}
	return estimate{fits: true, ctx: ctx, gpuLayers: ngl}
}
