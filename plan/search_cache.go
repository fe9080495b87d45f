package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
)

// cacheChoice is a K and V cache type pair the search tries, and whether
// it loads the weights instead of mapping the file (--no-mmap).
type cacheChoice struct {
	k, v   string
	noMmap bool
}

// cacheSearch is what the search for one cache type needs: the model, the
// machine and the limits search derived from the options.
type cacheSearch struct {
	m                          *arch.Model
	s                          *hw.Snapshot
	o                          SearchOptions
	cpu                        Device
	gpus                       []Device
	maxLayers, minCtx, ceiling int
	unified                    bool
	build                      graphBuilder
}

// run searches the best profiles with caches cc: the most layers, then
// the most context, for each layer choice the goal asks about, every one
// checked by an exact accounting.
func (cs *cacheSearch) run(cc cacheChoice) []Candidate {
	m, o, cpu, gpus := cs.m, cs.o, cs.cpu, cs.gpus
	maxLayers, minCtx, ceiling, unified := cs.maxLayers, cs.minCtx, cs.ceiling, cs.unified
	fx := o.Fixed
	memo := newBoundsMemoWith(m, cs.s, cpu, gpus, o.FitTarget, cs.build)
	var out []Candidate
	profile := func(ngl, moe, perSlot int) Profile {
		p := o.Base
		p.CPUMoE = moe
		p.Parallel, p.KVUnified = o.Parallel, false
		p.Ctx = perSlot * o.Parallel
		if fx.Ctx > 0 {
			p.Ctx = fx.Ctx
		}
		p.GPULayers = ngl
		p.CacheK, p.CacheV = cc.k, cc.v
		if cc.noMmap {
			p.Mmap = false
		}
		if cc.v != "f16" {
			p.FlashAttn = FlashOn
		}
		return p
	}
	// eval checks a profile with llama.cpp's default split and, on
	// several devices where that fails, with layers filled back to
	// front as llama.cpp's fit fills them; it returns the profile that
	// fits, split included.
	// The bisections ask about nearby contexts at one layer count
	// many times; a split that worked for that count is tried before
	// filling again.
	type layers struct{ ngl, moe int }
	splits := map[layers][]float64{}
	// A fill that failed fails again with more context or more
	// layers: remember the least of each that failed.
	failCtx, failNgl := map[layers]int{}, map[[2]int]int{}
	hopeless := func(l layers, perSlot int) bool {
		c, ok := failCtx[l]
		n, ok2 := failNgl[[2]int{l.moe, perSlot}]
		return ok && perSlot >= c || ok2 && l.ngl >= n
	}
	eval := func(ngl, moe, perSlot int) (Profile, *Assessment, bool) {
		l := layers{ngl, moe}
		p := profile(ngl, moe, perSlot)
		a, ok, err := memo.keeps(p, "")
		if err != nil {
			return p, nil, false
		}
		if ok {
			return p, a, true
		}
		if ts, ok := splits[l]; ok {
			q := p
			q.TensorSplit = ts
			if b, ok, err := memo.keeps(q, ""); err == nil && ok {
				return q, b, true
			}
		}
		if hopeless(l, perSlot) {
			return p, a, false
		}
		if q, b, ok := fillSplit(memo, p, a); ok {
			splits[l] = q.TensorSplit
			return q, b, true
		}
		if c, ok := failCtx[l]; !ok || perSlot < c {
			failCtx[l] = perSlot
		}
		if n, ok := failNgl[[2]int{moe, perSlot}]; !ok || ngl < n {
			failNgl[[2]int{moe, perSlot}] = ngl
		}
		return p, a, false
	}
	// A mixture of experts that does not fit whole: llama.cpp's fit
	// keeps every layer's attention and dense weights on the GPUs and
	// sends the routed experts of the first layers to system memory
	// (--n-cpu-moe), which reads far less per token from system
	// memory than whole layers there. leastExperts finds the fewest
	// such layers that fit: as for layers, the fewest that could do
	// without compute buffers needs no replay, and the replayed search
	// counts up from there.
	// A user's -ot decides where tensors go; the search does not add
	// --n-cpu-moe's overrides to it.
	moeable := m.NExpert > 0 && len(gpus) > 0 && !unified && fx.GPULayers == nil && len(o.Base.Overrides) == 0
	leastExperts := func() (int, bool) {
		lo, hi := 1, m.NLayer
		for lo < hi {
			mid := (lo + hi) / 2
			if memo.mayKeep(profile(maxLayers, mid, minCtx)) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		for n := lo; n <= m.NLayer; n++ {
			if _, _, ok := eval(maxLayers, n, minCtx); ok {
				return n, true
			}
		}
		return 0, false
	}
	// Where dense-first placement fits, it has more on the GPUs than
	// any partial offload, which cannot win then (except on context):
	// that search is skipped.
	var moeFirst *layers
	if moeable && o.Goal != GoalContext {
		if _, _, whole := eval(maxLayers, 0, minCtx); !whole {
			if n, ok := leastExperts(); ok {
				moeFirst = &layers{maxLayers, n}
			}
		}
	}
	// The most layers that fit at the minimum context (bisection:
	// fewer GPU layers never need more GPU memory).
	ngl := -1
	switch {
	case moeFirst != nil:
		ngl = maxLayers
	case fx.GPULayers != nil:
		n := min(max(*fx.GPULayers, 0), maxLayers)
		if _, _, ok := eval(n, 0, minCtx); ok {
			ngl = n
		}
	case unified:
		if _, _, ok := eval(maxLayers, 0, minCtx); ok {
			ngl = maxLayers
		}
	default:
		// Without compute buffers, which only add, the most layers
		// that could fit is found with no replay; the replayed search
		// then counts down from it, since compute buffers seldom cost
		// more than a layer or two, and bisects below if they do.
		lo, hi := -1, maxLayers
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if memo.mayKeep(profile(mid, 0, minCtx)) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		top := lo
		for n := top; n >= 0 && n >= top-2; n-- {
			if _, _, ok := eval(n, 0, minCtx); ok {
				ngl = n
				break
			}
		}
		if ngl < 0 && top-3 >= 0 {
			lo, hi = -1, top-3
			for lo < hi {
				mid := (lo + hi + 1) / 2
				if _, _, ok := eval(mid, 0, minCtx); ok {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			ngl = lo
		}
	}
	if ngl < 0 {
		return nil
	}
	layerChoices := []layers{{ngl, 0}}
	if o.Goal == GoalContext && !unified && ngl > 0 && fx.GPULayers == nil {
		layerChoices = append(layerChoices, layers{0, 0})
	}
	switch {
	case moeFirst != nil:
		layerChoices = []layers{*moeFirst}
	case moeable && o.Goal == GoalContext && ngl < maxLayers:
		if n, ok := leastExperts(); ok {
			layerChoices = append(layerChoices, layers{maxLayers, n})
		}
	}
	for _, lc := range layerChoices {
		n := lc.ngl
		perSlot := minCtx
		if o.Goal != GoalSpeed && fx.Ctx == 0 {
			lo, hi := minCtx/256, ceiling/256
			for lo < hi {
				mid := (lo + hi + 1) / 2
				if _, _, ok := eval(n, lc.moe, mid*256); ok {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			perSlot = lo * 256
		}
		if o.Goal == GoalContext && lc == (layers{0, 0}) && ngl > 0 {
			// The most context was found with every layer in system
			// memory; keep on the GPUs as many layers as fit beside it
			// (fewer layers never need more GPU memory: bisection).
			n = cs.mostLayersAt(eval, ngl, perSlot)
		}
		prof, a, ok := eval(n, lc.moe, perSlot)
		if !ok {
			continue
		}
		c := Candidate{Profile: prof, CtxPerSlot: perSlot, GPULayers: n, MinMargin: minMargin(a), Result: a}
		c.Flags = append(c.Profile.Args(), rpcFlags(m.NLayer, c.Profile, cpu, gpus)...)
		out = append(out, c)
	}
	// The search decided some candidates on bounds; what a plan shows is
	// the exact accounting.
	// Compute buffers grow with the context only roughly: ggml's allocator
	// can pack a larger graph tighter, so a bound can be wrong by a step.
	// A candidate the exact accounting refuses steps its context down
	// until it keeps the target (a few steps at most in practice; 32 are
	// allowed); one with a fixed context is dropped.
	exact := out[:0]
	for _, c := range out {
		for steps := 0; steps < 32; steps++ {
			a, err := memo.exact(c.Profile)
			if err == nil && a.Verdict == Fits && minMargin(a) >= o.FitTarget {
				c.Result, c.MinMargin = a, minMargin(a)
				exact = append(exact, c)
				break
			}
			if err != nil || fx.Ctx > 0 || c.CtxPerSlot-256 < minCtx {
				break
			}
			c.CtxPerSlot -= 256
			c.Profile.Ctx = c.CtxPerSlot * c.Profile.Parallel
			c.Flags = append(c.Profile.Args(), rpcFlags(m.NLayer, c.Profile, cpu, gpus)...)
		}
	}
	return exact
}

// mostLayersAt is the most GPU layers, up to hi, with which eval keeps a
// context of perSlot cells per slot (0 when only none do).
func (cs *cacheSearch) mostLayersAt(eval func(ngl, moe, perSlot int) (Profile, *Assessment, bool), hi, perSlot int) int {
	lo := 0
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if _, _, ok := eval(mid, 0, perSlot); ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
