package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan/graph"
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
	build                      graph.Builder
}

// run searches the best profiles with caches cc: the most layers, then
// the most context, for each layer choice the goal asks about, every one
// checked by an exact accounting.
func (cs *cacheSearch) run(cc cacheChoice) []Candidate {
	r := &cacheRun{cacheSearch: cs, cc: cc,
		memo:   newBoundsMemoWith(cs.m, cs.s, cs.cpu, cs.gpus, cs.o.FitTarget, cs.build),
		splits: map[layers][]float64{}, failCtx: map[layers]int{}, failNgl: map[[2]int]int{}}
	// A user's -ot decides where tensors go; the search does not add
	// --n-cpu-moe's overrides to it.
	r.moeable = cs.m.NExpert > 0 && len(cs.gpus) > 0 && !cs.unified && cs.o.Fixed.GPULayers == nil && len(cs.o.Base.Overrides) == 0 && cs.o.Base.CPUMoE == 0
	// Where dense-first placement fits, it has more on the GPUs than any
	// partial offload, which cannot win then (except on context): that
	// search is skipped.
	var moeFirst *layers
	if r.moeable && cs.o.Goal != GoalContext {
		if _, _, whole := r.eval(cs.maxLayers, 0, cs.minCtx); !whole {
			if n, ok := r.leastExperts(); ok {
				moeFirst = &layers{cs.maxLayers, n}
			}
		}
	}
	ngl := cs.maxLayers
	if moeFirst == nil {
		ngl = r.mostLayers()
	}
	if ngl < 0 {
		return nil
	}
	var out []Candidate
	for _, lc := range r.layerChoices(ngl, moeFirst) {
		if c, ok := r.mostContext(lc, ngl); ok {
			out = append(out, c)
		}
	}
	return r.exact(out)
}

// layers is a GPU layer count and how many leading layers keep their
// routed experts in system memory (--n-cpu-moe).
type layers struct{ ngl, moe int }

// cacheRun is one run of a cacheSearch: the cache types, the memo of
// accountings, and what the bisections learned so far.
type cacheRun struct {
	*cacheSearch
	cc   cacheChoice
	memo *boundsMemo
	// moeable: a mixture of experts whose routed experts the search may
	// send to system memory.
	moeable bool
	// The bisections ask about nearby contexts at one layer count many
	// times; a split that worked for that count is tried before filling
	// again.
	splits map[layers][]float64
	// A fill that failed fails again with more context or more layers:
	// the least of each that failed.
	failCtx map[layers]int
	failNgl map[[2]int]int
}

// profile is the profile for ngl GPU layers, moe layers' experts in
// system memory and perSlot context per slot.
func (r *cacheRun) profile(ngl, moe, perSlot int) Profile {
	o, cc := r.o, r.cc
	p := o.Base
	p.CPUMoE = max(moe, o.Base.CPUMoE) // a -ncmoe given is kept
	p.Parallel, p.KVUnified = o.Parallel, false
	p.Ctx = perSlot * o.Parallel
	if o.Fixed.Ctx > 0 {
		p.Ctx = o.Fixed.Ctx
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

// hopeless says whether a fill is known to fail for l at perSlot.
func (r *cacheRun) hopeless(l layers, perSlot int) bool {
	c, ok := r.failCtx[l]
	n, ok2 := r.failNgl[[2]int{l.moe, perSlot}]
	return ok && perSlot >= c || ok2 && l.ngl >= n
}

// eval checks a profile with llama.cpp's default split and, on several
// devices where that fails, with layers filled back to front as
// llama.cpp's fit fills them; it returns the profile that fits, split
// included.
func (r *cacheRun) eval(ngl, moe, perSlot int) (Profile, *Assessment, bool) {
	l := layers{ngl, moe}
	p := r.profile(ngl, moe, perSlot)
	a, ok, err := r.memo.keeps(p, "")
	if err != nil {
		return p, nil, false
	}
	if ok {
		return p, a, true
	}
	if ts, ok := r.splits[l]; ok {
		q := p
		q.TensorSplit = ts
		if b, ok, err := r.memo.keeps(q, ""); err == nil && ok {
			return q, b, true
		}
	}
	if r.hopeless(l, perSlot) {
		return p, a, false
	}
	if q, b, ok := fillSplit(r.memo, p, a); ok {
		r.splits[l] = q.TensorSplit
		return q, b, true
	}
	if c, ok := r.failCtx[l]; !ok || perSlot < c {
		r.failCtx[l] = perSlot
	}
	if n, ok := r.failNgl[[2]int{moe, perSlot}]; !ok || ngl < n {
		r.failNgl[[2]int{moe, perSlot}] = ngl
	}
	return p, a, false
}

// leastExperts finds the fewest leading layers whose routed experts go
// to system memory for a mixture of experts that does not fit whole:
// llama.cpp's fit keeps every layer's attention and dense weights on the
// GPUs and sends the routed experts of the first layers to system memory
// (--n-cpu-moe), which reads far less per token from system memory than
// whole layers there. As for layers, the fewest that could do without
// compute buffers needs no replay, and the replayed search counts up from
// there.
func (r *cacheRun) leastExperts() (int, bool) {
	lo, hi := 1, r.m.NLayer
	for lo < hi {
		mid := (lo + hi) / 2
		if r.memo.mayKeep(r.profile(r.maxLayers, mid, r.minCtx)) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	for n := lo; n <= r.m.NLayer; n++ {
		if _, _, ok := r.eval(r.maxLayers, n, r.minCtx); ok {
			return n, true
		}
	}
	return 0, false
}

// mostLayers is the most layers that fit at the minimum context, -1 for
// none (bisection: fewer GPU layers never need more GPU memory).
func (r *cacheRun) mostLayers() int {
	fits := func(n int) bool { _, _, ok := r.eval(n, 0, r.minCtx); return ok }
	switch {
	case r.o.Fixed.GPULayers != nil:
		if n := min(max(*r.o.Fixed.GPULayers, 0), r.maxLayers); fits(n) {
			return n
		}
		return -1
	case r.unified:
		if fits(r.maxLayers) {
			return r.maxLayers
		}
		return -1
	}
	// Without compute buffers, which only add, the most layers that
	// could fit is found with no replay; the replayed search then counts
	// down from it, since compute buffers seldom cost more than a layer
	// or two, and bisects below if they do.
	top := bisectMost(-1, r.maxLayers, func(n int) bool { return r.memo.mayKeep(r.profile(n, 0, r.minCtx)) })
	for n := top; n >= 0 && n >= top-2; n-- {
		if fits(n) {
			return n
		}
	}
	if top-3 < 0 {
		return -1
	}
	return bisectMost(-1, top-3, fits)
}

// bisectMost is the largest n in (lo, hi] for which ok holds, ok holding
// for every n below one it holds for; lo if none.
func bisectMost(lo, hi int, ok func(int) bool) int {
	// The most is often the ceiling itself (a small model on a large
	// machine gets its whole trained context): one evaluation then, not
	// a bisection's eight or more. Where it fails, the replay at the
	// ceiling is the largest compute buffer, an upper bound the memo
	// answers later evaluations from without replaying.
	if lo < hi {
		if ok(hi) {
			return hi
		}
		hi--
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// layerChoices are the layer placements the goal asks about, ngl being
// the most layers that fit.
func (r *cacheRun) layerChoices(ngl int, moeFirst *layers) []layers {
	if moeFirst != nil {
		return []layers{*moeFirst}
	}
	choices := []layers{{ngl, 0}}
	if r.o.Goal == GoalContext && !r.unified && ngl > 0 && r.o.Fixed.GPULayers == nil {
		choices = append(choices, layers{0, 0})
	}
	if r.moeable && r.o.Goal == GoalContext && ngl < r.maxLayers {
		if n, ok := r.leastExperts(); ok {
			choices = append(choices, layers{r.maxLayers, n})
		}
	}
	return choices
}

// mostContext is the candidate of placement lc with the most context per
// slot that fits (the minimum for the speed goal or a fixed context); most
// is the most layers that fit at the minimum context.
func (r *cacheRun) mostContext(lc layers, most int) (Candidate, bool) {
	perSlot := r.minCtx
	if r.o.Goal != GoalSpeed && r.o.Fixed.Ctx == 0 {
		perSlot = 256 * bisectMost(r.minCtx/256, r.ceiling/256, func(n int) bool {
			_, _, ok := r.eval(lc.ngl, lc.moe, n*256)
			return ok
		})
	}
	if r.o.Goal == GoalContext && lc == (layers{0, 0}) && most > 0 {
		// The most context was found with every layer in system memory;
		// keep on the GPUs as many layers as fit beside it (fewer layers
		// never need more GPU memory: bisection).
		lc.ngl = bisectMost(0, most, func(n int) bool {
			_, _, ok := r.eval(n, 0, perSlot)
			return ok
		})
	}
	prof, a, ok := r.eval(lc.ngl, lc.moe, perSlot)
	if !ok {
		return Candidate{}, false
	}
	c := Candidate{Profile: prof, CtxPerSlot: perSlot, GPULayers: lc.ngl, MinMargin: a.LeastMargin(), Result: a}
	c.Flags = append(c.Profile.Args(), rpcFlags(r.m.NLayer, c.Profile, r.cpu, r.gpus)...)
	return c, true
}

// exact replaces the bounds some candidates were decided on with the
// exact accounting a plan shows. Compute buffers grow with the context
// only roughly: ggml's allocator can pack a larger graph tighter, so a
// bound can be wrong by a step. A candidate the exact accounting refuses
// steps its context down until it keeps the target (a few steps at most
// in practice; 32 are allowed); one with a fixed context is dropped.
func (r *cacheRun) exact(out []Candidate) []Candidate {
	kept := out[:0]
	for _, c := range out {
		for steps := 0; steps < 32; steps++ {
			a, err := r.memo.exact(c.Profile)
			if err == nil && a.Verdict == Fits && a.LeastMargin() >= r.o.FitTarget {
				c.Result, c.MinMargin = a, a.LeastMargin()
				kept = append(kept, c)
				break
			}
			if err != nil || r.o.Fixed.Ctx > 0 || c.CtxPerSlot-256 < r.minCtx {
				break
			}
			c.CtxPerSlot -= 256
			c.Profile.Ctx = c.CtxPerSlot * c.Profile.Parallel
			c.Flags = append(c.Profile.Args(), rpcFlags(r.m.NLayer, c.Profile, r.cpu, r.gpus)...)
		}
	}
	return kept
}
