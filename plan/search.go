package plan

import (
	"cmp"
	"fmt"
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
)

// Goals a plan can optimise for.
const (
	GoalBalanced = "balanced" // as many GPU layers as fit with the minimum context, then the most context
	GoalSpeed    = "speed"    // the most GPU layers, the minimum context
	GoalContext  = "context"  // the most context per slot, whatever the layer split
)

// SearchOptions are what the user asks of a plan.
type SearchOptions struct {
	Goal string
	// Parallel is the number of slots (llama-server -np); each gets the
	// pool divided by Parallel, capped at the trained context.
	Parallel int
	// MinCtx is the least context per slot worth having (llama.cpp's fit
	// uses 4096).
	MinCtx int
	// FitTarget is the memory to leave free in every charged domain, as
	// llama.cpp's --fit-target (1024 MiB by default).
	FitTarget int64
	// AllowQ8 lets the plan propose q8_0 K/V caches (with flash attention)
	// where they buy context that f16 cannot. q4_0 is never proposed.
	AllowQ8 bool
	// Base carries the fixed parts of the profile (batch sizes, mmap...).
	Base Profile
	// Headless plans as if the desktop session were stopped: memory it
	// holds on a GPU (hw.Domain.Reserved) counts as free. Without it, a
	// machine with such a reserve also gets the headless plan, for
	// comparison.
	Headless bool
	// Fixed holds what the user set: kept as given and only checked.
	Fixed Fixed
}

// Fixed are settings a user gave the plan (llama-server's -c, -ngl,
// -ctk, -ctv); the search keeps them and only checks that they fit, as
// llama.cpp's fit keeps a user's -ngl.
type Fixed struct {
	// Ctx is -c, cells across all slots; 0 is searched.
	Ctx int
	// GPULayers is -ngl (clamped to the model's layers plus output); nil
	// is searched.
	GPULayers *int
	// CacheK and CacheV are -ctk and -ctv; "" is searched (f16, or q8_0
	// where it buys context). Setting one sets the other to f16.
	CacheK, CacheV string
}

func (f Fixed) any() bool { return f.Ctx > 0 || f.GPULayers != nil || f.CacheK != "" || f.CacheV != "" }

// flags renders the fixed settings as llama-server arguments.
func (f Fixed) flags() string {
	var out []string
	if f.Ctx > 0 {
		out = append(out, "-c", strconv.Itoa(f.Ctx))
	}
	if f.GPULayers != nil {
		out = append(out, "-ngl", strconv.Itoa(*f.GPULayers))
	}
	if f.CacheK != "" {
		out = append(out, "-ctk", f.CacheK)
	}
	if f.CacheV != "" {
		out = append(out, "-ctv", f.CacheV)
	}
	return argsString(out)
}

// DefaultSearch is a balanced plan for two conversations.
func DefaultSearch() SearchOptions {
	return SearchOptions{Goal: GoalBalanced, Parallel: 2, MinCtx: 4096, FitTarget: 1024 << 20, AllowQ8: true, Base: Defaults()}
}

// Candidate is one profile the search considered.
type Candidate struct {
	Profile Profile `json:"profile"`
	// CtxPerSlot is the context each slot gets.
	CtxPerSlot int `json:"ctx_per_slot"`
	// GPULayers is the resolved -ngl (the output layer counts as one).
	GPULayers int `json:"gpu_layers"`
	// MinMargin is the smallest margin left in any charged domain.
	MinMargin int64       `json:"min_margin"`
	Flags     []string    `json:"flags"`
	Why       string      `json:"why"`
	Result    *Assessment `json:"-"`
}

// Plan is the search's answer: the chosen profile, the flags for
// llama-server, why, and the runner-up.
type Plan struct {
	Chosen     *Candidate  `json:"chosen"`
	RunnerUp   *Candidate  `json:"runner_up,omitempty"`
	Candidates []Candidate `json:"candidates"`
	Explain    []string    `json:"explain"`
	// Headless is the plan's choice with the desktop session stopped,
	// when a desktop session holds GPU memory and the search was not
	// already headless.
	Headless *Candidate `json:"headless,omitempty"`
}

// Search finds the best profile for the model on the machine. It returns
// a Plan with no Chosen candidate when nothing fits even at the minimum
// context with every layer in system memory.
func Search(m *arch.Model, s *hw.Snapshot, o SearchOptions) (*Plan, error) {
	for _, c := range []struct{ flag, name string }{{"-ctk", o.Fixed.CacheK}, {"-ctv", o.Fixed.CacheV}} {
		if _, ok := cacheType(c.name); !ok {
			return nil, fmt.Errorf("%s %q: not a cache type llama.cpp accepts (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)", c.flag, c.name)
		}
	}
	if o.Fixed.Ctx < 0 {
		return nil, fmt.Errorf("-c %d: want a context of 0 (searched) or more cells", o.Fixed.Ctx)
	}
	if n := o.Fixed.GPULayers; n != nil && *n < 0 {
		return nil, fmt.Errorf("-ngl %d: want 0 or more layers", *n)
	}
	if o.Headless {
		s = s.Headless()
	}
	p, err := search(m, s, o)
	if err != nil {
		return nil, err
	}
	if p.Chosen == nil && o.Fixed.any() {
		free := o
		free.Fixed = Fixed{}
		if fp, err := search(m, s, free); err == nil && fp.Chosen != nil {
			p.Explain = append(p.Explain, "without those settings the plan would be: "+argsString(fp.Chosen.Flags))
		}
	}
	if reserve := s.Reserve(); reserve > 0 {
		hp, err := search(m, s.Headless(), o)
		if err != nil {
			return nil, err
		}
		p.Headless = hp.Chosen
		p.Explain = append(p.Explain, explainHeadless(p.Chosen, hp.Chosen, reserve))
	}
	return p, nil
}

func search(m *arch.Model, s *hw.Snapshot, o SearchOptions) (*Plan, error) {
	if o.Parallel < 1 {
		o.Parallel = 1
	}
	if o.MinCtx <= 0 {
		o.MinCtx = 4096
	}
	if o.Goal == "" {
		o.Goal = GoalBalanced
	}
	cpu, gpus := Devices(s)
	maxLayers := 0
	if len(gpus) > 0 {
		maxLayers = m.NLayer + 1
	}
	// On one unified pool, layers "moved to the CPU" stay in the same
	// memory, so there is nothing to gain by offloading fewer.
	unified := false
	for _, g := range gpus {
		if d, err := s.DomainOf(g.Name); err == nil && d.Kind == hw.KindUnified {
			unified = true
		}
	}
	ceiling := m.CtxTrain
	if ceiling <= 0 {
		ceiling = 131072
	}
	minCtx := min(o.MinCtx, ceiling)

	type cacheChoice struct{ k, v string }
	caches := []cacheChoice{{"f16", "f16"}}
	if o.AllowQ8 {
		caches = append(caches, cacheChoice{"q8_0", "q8_0"})
	}
	fx := o.Fixed
	if fx.CacheK != "" || fx.CacheV != "" {
		c := cacheChoice{cmp.Or(fx.CacheK, "f16"), cmp.Or(fx.CacheV, "f16")}
		caches = []cacheChoice{c}
	}
	// A fixed context is what every check uses; the search does not go
	// below or above it, or cap it at the trained context.
	if fx.Ctx > 0 {
		minCtx = max(fx.Ctx/o.Parallel, 1)
	}
	var out []Candidate
	memo := newBoundsMemo(m, s, cpu, gpus, o.FitTarget)
	for _, cc := range caches {
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
		moeable := m.NExpert > 0 && len(gpus) > 0 && !unified && fx.GPULayers == nil
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
			continue
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
			prof, a, ok := eval(n, lc.moe, perSlot)
			if !ok {
				continue
			}
			c := Candidate{Profile: prof, CtxPerSlot: perSlot, GPULayers: n, MinMargin: minMargin(a), Result: a}
			c.Flags = append(flagsFor(c.Profile, len(gpus) > 0), rpcFlags(m.NLayer, c.Profile, cpu, gpus)...)
			out = append(out, c)
		}
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
			c.Flags = append(flagsFor(c.Profile, len(gpus) > 0), rpcFlags(m.NLayer, c.Profile, cpu, gpus)...)
		}
	}
	out = exact
	p := &Plan{Candidates: out}
	if len(out) == 0 {
		if fx.any() {
			p.Explain = append(p.Explain, fmt.Sprintf("nothing fits with %s as given (checked at %d cells per slot for %d slots, %d MiB left free)", fx.flags(), minCtx, o.Parallel, o.FitTarget>>20))
			return p, nil
		}
		p.Explain = append(p.Explain, fmt.Sprintf("nothing fits: not even %d cells per slot for %d slots with every layer in system memory and %d MiB left free", minCtx, o.Parallel, o.FitTarget>>20))
		return p, nil
	}
	best := 0
	for i := range out {
		if better(out[i], out[best], o.Goal, ceiling) {
			best = i
		}
	}
	p.Chosen = &out[best]
	for i := range out {
		if i != best && (p.RunnerUp == nil || better(out[i], *p.RunnerUp, o.Goal, ceiling)) {
			p.RunnerUp = &out[i]
		}
	}
	p.Explain = explain(p, m, o, ceiling, len(gpus) > 0, unified)
	return p, nil
}

// better orders candidates by the goal. f16 wins ties with q8_0: the
// quantized cache is proposed only when it buys something.
func better(a, b Candidate, goal string, ceiling int) bool {
	// Of plans with every layer on the GPUs, fewer experts in system
	// memory read less from it per token.
	moreOnGPU := func() (bool, bool) {
		if a.GPULayers != b.GPULayers {
			return a.GPULayers > b.GPULayers, true
		}
		if a.Profile.CPUMoE != b.Profile.CPUMoE {
			return a.Profile.CPUMoE < b.Profile.CPUMoE, true
		}
		return false, false
	}
	switch goal {
	case GoalSpeed:
		if w, ok := moreOnGPU(); ok {
			return w
		}
	case GoalContext:
		if a.CtxPerSlot != b.CtxPerSlot {
			return a.CtxPerSlot > b.CtxPerSlot
		}
	default:
		if w, ok := moreOnGPU(); ok {
			return w
		}
		if a.CtxPerSlot != b.CtxPerSlot {
			return a.CtxPerSlot > b.CtxPerSlot
		}
	}
	if a.Profile.CacheK != b.Profile.CacheK {
		return a.Profile.CacheK == "f16"
	}
	return a.MinMargin > b.MinMargin
}

// minMargin is the smallest margin over the domains that carry charges.
func minMargin(a *Assessment) int64 {
	m := int64(1 << 62)
	for _, d := range a.Domains {
		if d.Required > 0 && d.Margin < m {
			m = d.Margin
		}
	}
	return m
}
