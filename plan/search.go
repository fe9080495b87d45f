package plan

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan/graph"
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
	// ContextByNeed caps the balanced goal's context where the model runs
	// from system memory (ctxByNeed); without it the context fills what
	// is free, as llama.cpp's fit fills it.
	ContextByNeed bool
	// loadOnly judges the load alone, as llama.cpp's fit does, leaving
	// out what llama-server keeps while it serves (for comparisons).
	loadOnly bool
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
	// CacheRAM is -cram, llama-server's prompt cache in MiB; nil is
	// sized by the plan (promptCache).
	CacheRAM *int
	// Checkpoints is -ctxcp, context checkpoints per slot; nil is sized
	// by the plan, up to llama-server's default.
	Checkpoints *int
}

func (f Fixed) any() bool {
	return f.Ctx > 0 || f.GPULayers != nil || f.CacheK != "" || f.CacheV != "" || f.CacheRAM != nil || f.Checkpoints != nil
}

// flags renders the fixed settings as llama-server arguments.
func (f Fixed) flags() string {
	var out []string
	if f.Ctx > 0 {
		out = append(out, ctxFlag(f.Ctx)...)
	}
	if f.GPULayers != nil {
		out = append(out, nglFlag(*f.GPULayers)...)
	}
	if f.CacheK != "" {
		out = append(out, "-ctk", f.CacheK)
	}
	if f.CacheV != "" {
		out = append(out, "-ctv", f.CacheV)
	}
	if f.CacheRAM != nil {
		out = append(out, cacheRAMFlag(*f.CacheRAM)...)
	}
	if f.Checkpoints != nil {
		out = append(out, checkpointsFlag(*f.Checkpoints)...)
	}
	return argsString(out)
}

// DefaultSearch is a balanced plan for two conversations.
func DefaultSearch() SearchOptions {
	return SearchOptions{Goal: GoalBalanced, Parallel: 2, MinCtx: 4096, FitTarget: 1024 << 20, AllowQ8: true, Base: Defaults(), ContextByNeed: true}
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

// Command is the command line that runs the candidate: the program
// (llama-server unless the profile names another), the model as model
// names it (-m FILE, -hf REPO:QUANT), then the candidate's flags. plan
// prints it and the panel shows it, so what either shows can be pasted
// and run. A library context's is its parameters.
func (c *Candidate) Command(model []string) []string {
	if c.Profile.Program.OrServer() == ProgramLibrary {
		return append([]string{"library:"}, c.Flags...)
	}
	return append(append([]string{string(c.Profile.Program.OrServer())}, model...), c.Flags...)
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
	// Every candidate copies Base: its rules are worked out here once, not
	// by each of the hundreds of accountings.
	o.Base = o.Base.withRules()
	if o.Base.Embedding == nil {
		// an embedding or reranking model is planned as it is served
		o.Base.Embedding = EmbeddingFor(m)
	}
	if err := o.Base.Check(); err != nil {
		return nil, err
	}
	for _, c := range []struct{ flag, name string }{{"-ctk", o.Fixed.CacheK}, {"-ctv", o.Fixed.CacheV}} {
		if _, ok := CacheType(c.name); !ok {
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
	// A context past the trained one is capped: llama.cpp would load it,
	// warning of a training context overflow, and answers past the
	// trained length degrade.
	var capped string
	if slots := max(o.Parallel, 1); m.CtxTrain > 0 && o.Fixed.Ctx > m.CtxTrain*slots {
		capped = fmt.Sprintf("-c %d is capped at %d: %d slots of the %d cells the model was trained for", o.Fixed.Ctx, m.CtxTrain*slots, slots, m.CtxTrain)
		o.Fixed.Ctx = m.CtxTrain * slots
	}
	p, err := search(m, s, o)
	if err != nil {
		return nil, err
	}
	if capped != "" {
		p.Explain = append([]string{capped}, p.Explain...)
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
	o = searchServing(o)
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
	trained := ceiling
	ceiling = needCeiling(m, o, len(gpus) == 0 || unified, minCtx, ceiling)

	caches := []cacheChoice{{k: "f16", v: "f16"}}
	if o.AllowQ8 && !m.Encoder { // an encoder has no cache to quantize
		caches = append(caches, cacheChoice{k: "q8_0", v: "q8_0"})
	}
	fx := o.Fixed
	if fx.CacheK != "" || fx.CacheV != "" {
		c := cacheChoice{k: cmp.Or(fx.CacheK, "f16"), v: cmp.Or(fx.CacheV, "f16")}
		caches = []cacheChoice{c}
	}
	// Where Metal would map much more of the file than its weights, the
	// same searches run with --no-mmap too, and the better plan wins
	// (mmap where they tie).
	mapWaste := int64(0)
	if o.Base.Mmap {
		mapWaste = mappedWaste(m, o, cpu, gpus, maxLayers)
	}
	if mapWaste > 0 {
		for _, c := range caches {
			c.noMmap = true
			caches = append(caches, c)
		}
	}
	// A fixed context is what every check uses; the search does not go
	// below or above it, or cap it at the trained context.
	if fx.Ctx > 0 {
		minCtx = max(fx.Ctx/o.Parallel, 1)
	}
	// The cache types are searched at once: nothing is shared between
	// them but the graph builder, and each takes as long as the others.
	cs := &cacheSearch{m: m, s: s, o: o, cpu: cpu, gpus: gpus, maxLayers: maxLayers,
		minCtx: minCtx, ceiling: ceiling, unified: unified, build: graph.For(m)}
	found := make([][]Candidate, len(caches))
	var wg sync.WaitGroup
	for i, cc := range caches {
		wg.Go(func() { found[i] = cs.run(cc) })
	}
	wg.Wait()
	var out []Candidate
	for _, f := range found {
		out = append(out, f...)
	}
	for i := range out {
		servingPlan(m, s, o, cpu, gpus, &out[i])
	}
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
	p.Explain = slices.Concat(explain(p, m, o, trained, len(gpus) > 0, unified, mapWaste), servingExplain(p.Chosen, o, ceiling, trained), mtpOffer(m, s, p.Chosen, cpu, gpus, o.FitTarget))
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
		if w, ok := moreOnGPU(); ok {
			return w
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
	if a.Profile.Mmap != b.Profile.Mmap {
		return a.Profile.Mmap // llama-server's default, and a faster load
	}
	return a.MinMargin > b.MinMargin
}

// mappedWaste is how much more of the file Metal would map than its
// weights take, for the profile with every layer it may offload, when that
// is worth a slower load to avoid: more than 1 GiB and a fifth of those
// weights (0 otherwise; a Llama 3 file, whose rope_freqs come before the
// embedding, maps 282 MiB more than an 8B's 4.3 GiB of weights, and keeps
// mmap). Metal maps the span between its first and last tensor in
// each file, so a tensor stored away from the layers (Llama 3's
// rope_freqs before the embedding, an output weight first) or layers kept
// in system memory between offloaded ones widen it.
func mappedWaste(m *arch.Model, o SearchOptions, cpu Device, gpus []Device, maxLayers int) int64 {
	metal := false
	for _, g := range gpus {
		metal = metal || g.Backend == "Metal"
	}
	if !metal {
		return 0
	}
	p := o.Base
	p.GPULayers = maxLayers
	if o.Fixed.GPULayers != nil {
		p.GPULayers = *o.Fixed.GPULayers
	}
	span := func(mmap bool) int64 {
		p.Mmap = mmap
		mp, err := placeModel(m, p, cpu, gpus)
		if err != nil {
			return 0
		}
		var n int64
		for _, b := range mp.weights {
			if b.Device != cpu.Name {
				n += b.Bytes
			}
		}
		return n
	}
	mapped, loaded := span(true), span(false)
	if waste := mapped - loaded; waste > 1<<30 && waste*5 > loaded {
		return waste
	}
	return 0
}

// LeastMargin is the smallest margin over the domains that carry
// charges: what the search holds to its fit target.
func (a *Assessment) LeastMargin() int64 {
	m := int64(1 << 62)
	for _, d := range a.Domains {
		if d.Required > 0 && d.Margin < m {
			m = d.Margin
		}
	}
	return m
}
