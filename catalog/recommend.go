package catalog

import (
	"fmt"
	"github.com/headroom-llm/headroom/builds"
	"runtime"
	"slices"
	"sync"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
	"github.com/headroom-llm/headroom/synth"
)

// Ranking goals.
const (
	GoalQuality  = "quality"
	GoalSpeed    = "speed"
	GoalBalanced = "balanced"
	GoalContext  = "context"
)

// Provenance of a variant's planner inputs.
const (
	ProvenanceDerived   = "derived"   // synthesized from the entry's shape and quant recipe
	ProvenanceInspected = "inspected" // read from the locked file's GGUF header
)

// Options select and rank configurations.
type Options struct {
	Goal string
	// Capabilities an entry must all have.
	Capabilities []string
	// Licenses, when not empty, are the licenses accepted.
	Licenses []string
	// MinCtx is the least context per slot a plan must give; entries
	// trained on less are left out.
	MinCtx   int
	Parallel int
	// FitTarget is the memory left free in every domain.
	FitTarget int64
	// Cache, when set, keeps every variant's outcome (verdict, plan,
	// speed) between calls, under a key made of Build, the catalog, the
	// machine's capacity and the search options. A later call judges the
	// kept plans against the memory free then instead of planning again,
	// unless some domain has a GiB more free than when they were made.
	Cache Cache
	// Build names the program computing the outcomes (its version, or
	// its executable's identity); a change of program is a change of
	// answers, so it is part of every cache key.
	Build string
	// Rules are the llama.cpp build's the plans follow (engine.Note); nil
	// is builds.Default().
	Rules *builds.Rules
	// Calibration is the machine's own speed parameters (headroom
	// bench); nil estimates with the published fits and priors.
	Calibration *speed.Calibration
}

// DefaultOptions ranks by balanced with plan.DefaultSearch's slots,
// context floor and fit target, so that recommend, plan, pull, serve and
// the panel answer for the same number of conversations unless told
// otherwise.
func DefaultOptions() Options {
	so := plan.DefaultSearch()
	return Options{Goal: GoalBalanced, MinCtx: so.MinCtx, Parallel: so.Parallel, FitTarget: so.FitTarget}
}

// Row is one configuration's recommendation.
type Row struct {
	Rank         int      `json:"rank"` // 1-based among enabled rows; 0 when disabled
	Entry        string   `json:"entry"`
	Name         string   `json:"name"`
	Class        string   `json:"class"`
	ParamsB      float64  `json:"params_b"`
	ActiveB      *float64 `json:"active_params_b,omitempty"`
	Quant        string   `json:"quant"`
	Ref          string   `json:"ref"`
	Provenance   string   `json:"provenance"`
	Commit       string   `json:"commit,omitempty"`
	SizeBytes    int64    `json:"size_bytes"`
	SizeSource   string   `json:"size_source"` // "hub" or "derived"
	Capabilities []string `json:"capabilities"`
	License      string   `json:"license"`
	CtxTrained   int      `json:"ctx_trained"`
	Quality      *Quality `json:"quality"`
	Verdict      string   `json:"verdict"`
	Enabled      bool     `json:"enabled"`
	Reason       string   `json:"reason"`
	Plan         *RowPlan `json:"plan"`
	Limiting     *Limit   `json:"limiting"`
	Projector    string   `json:"projector,omitempty"`
	Draft        string   `json:"draft,omitempty"`
	// SupersededBy is the entry that replaced this one in its family.
	SupersededBy string `json:"superseded_by,omitempty"`
	// Speed is the place for decode and prefill estimates; null until the
	// speed package provides them.
	Speed *Speed `json:"speed"`
}

// SpeedSays is what every row's Speed is, for the listings that carry the
// rows.
const SpeedSays = "decode speed estimated for every fitting row, one sequence, empty context (docs/speed.md)"

// Speed is the speed package's estimate for a row's plan, one sequence at
// an empty context. A nil figure is unknown, never guessed.
type Speed struct {
	DecodeTokensPerSec  *float64 `json:"decode_tokens_per_sec"`
	PrefillTokensPerSec *float64 `json:"prefill_tokens_per_sec"`
	// Calibrated says whether every backend involved was fitted to
	// published llama-bench results; the error range is then how far the
	// estimate was below and above published points it was not fitted
	// on (speed.Result).
	Calibrated   bool    `json:"calibrated"`
	ErrorLowPct  float64 `json:"error_low_pct,omitempty"`
	ErrorHighPct float64 `json:"error_high_pct,omitempty"`
	// CalibratedOn names this machine's llama-bench runs where a backend
	// was fitted to them rather than to published results.
	CalibratedOn []string `json:"calibrated_on,omitempty"`
}

// RowPlan is the serving plan behind a verdict.
type RowPlan struct {
	// Source is "search": plan.Search's choice, every buffer accounted.
	Source      string `json:"source"`
	CtxPerSlot  int    `json:"ctx_per_slot"`
	Slots       int    `json:"slots"`
	GPULayers   int    `json:"gpu_layers"`
	LayersTotal int    `json:"layers_total"` // blocks plus the output layer
	CacheType   string `json:"cache_type"`
	// CPUMoE is how many layers keep their routed experts in system
	// memory (--n-cpu-moe).
	CPUMoE int      `json:"cpu_moe_layers,omitempty"`
	Flags  []string `json:"flags,omitempty"`
	// MemoryBytes is the memory the plan needs, every domain's required
	// bytes summed: what a person weighs against the machine, apart from
	// the download's size.
	MemoryBytes int64 `json:"memory_bytes"`
}

// Limit is the resource that keeps a configuration from fitting.
type Limit struct {
	Domain    string `json:"domain"`
	Shortfall int64  `json:"shortfall_bytes"`
}

type cachedModel struct {
	once sync.Once
	m    *arch.Model
	err  error
	size int64
	c    costs
}

func (c *Catalog) loadModel(key string, build func() (*arch.Model, int64, error)) *cachedModel {
	cm := &cachedModel{}
	if c.models != nil { // a Catalog made by Parse; one built by hand caches nothing
		v, _ := c.models.LoadOrStore(key, cm)
		cm = v.(*cachedModel)
	}
	cm.once.Do(func() {
		cm.m, cm.size, cm.err = build()
		if cm.err == nil {
			cm.c = costsOf(cm.m)
		}
	})
	return cm
}

// Model returns the planner's model of a variant: from the lock when the
// variant is locked (inspected), else derived from the entry's shape and
// recipe. An incompatible architecture is returned as arch's error.
func (c *Catalog) Model(e *Entry, v Variant, lock *LockFile) (m *arch.Model, provenance string, size int64, err error) {
	cm, prov := c.model(e, v, lock)
	return cm.m, prov, cm.size, cm.err
}

func (c *Catalog) model(e *Entry, v Variant, lock *LockFile) (*cachedModel, string) {
	if pkg, _ := lock.Lookup(e.ID, v); pkg != nil {
		return c.loadModel(c.modelKey(e, v, lock), func() (*arch.Model, int64, error) {
			m, err := pkg.Inputs.Arch()
			return m, pkg.Size(), err
		}), ProvenanceInspected
	}
	return c.loadModel(c.modelKey(e, v, lock), func() (*arch.Model, int64, error) {
		s, err := e.Shape.Resolve()
		if err != nil {
			return nil, 0, err
		}
		g, err := DeriveModel(s, synth.Quant(v.Quant))
		if err != nil {
			return nil, 0, err
		}
		m, err := arch.FromGGUF(g)
		return m, g.Size(), err
	}), ProvenanceDerived
}

func planGoal(goal string) string {
	switch goal {
	case GoalSpeed:
		return plan.GoalSpeed
	case GoalContext:
		return plan.GoalContext
	}
	return plan.GoalBalanced
}

// Recommend assesses every catalog configuration that passes the filters
// on the machine and ranks them: fitting ones by the goal, then the ones
// that do not fit (disabled, with the limiting domain and shortfall), then
// incompatible ones. A disabled configuration never ranks above a fitting
// one. Every verdict and plan is plan.Search's, with the options 'headroom
// plan' uses by default, so a row and the plan for its variant agree.
func Recommend(cat *Catalog, lock *LockFile, snap *hw.Snapshot, o Options) ([]Row, error) {
	if o.Parallel < 1 {
		o.Parallel = 1
	}
	if o.MinCtx <= 0 {
		o.MinCtx = 4096
	}
	switch o.Goal {
	case "":
		o.Goal = GoalBalanced
	case GoalQuality, GoalSpeed, GoalBalanced, GoalContext:
	default:
		return nil, fmt.Errorf("goal must be quality, speed, balanced or context, not %q", o.Goal)
	}
	var rows []Row
	var keys []string
	for i := range cat.Entries {
		e := &cat.Entries[i]
		if !wanted(e, o) {
			continue
		}
		for _, v := range e.Variants {
			r := Row{Entry: e.ID, Name: e.Name, Class: e.Class.Kind, ParamsB: e.Class.ParamsB, ActiveB: e.Class.ActiveParams,
				Quant: v.Quant, Ref: v.Ref, Capabilities: e.Capabilities, License: e.License, CtxTrained: e.CtxTrained, Quality: e.Quality, SupersededBy: e.SupersededBy}
			if r.Capabilities == nil {
				r.Capabilities = []string{}
			}
			if e.Projector != nil {
				r.Projector = "needed for images: " + e.Projector.Note
			}
			if d := e.Draft; d != nil {
				r.Draft = d.Entry + " " + d.Quant + " (" + d.Reviewed + ")"
			}
			if pkg, lv := lock.Lookup(e.ID, v); pkg != nil {
				r.Commit = pkg.Commit
				if lv.Projector != nil {
					r.Projector = lv.Projector.Name
				}
			}
			rows = append(rows, r)
			keys = append(keys, cat.modelKey(e, v, lock))
		}
	}
	so := SearchOptions(o)
	now := availableOf(snap)
	k := kept{Planned: now, Outcomes: map[string]outcome{}}
	var file string
	if o.Cache != nil {
		file = cacheKey(o.Build, cat.ContentHash(), snap, so, o.Calibration)
		k = loadKept(o.Cache, file, now)
	}
	known := k.Outcomes
	dropImplausible(cat, lock, known, keys, rows)
	// Each distinct model is planned once: catalog entries that share a
	// shape and a quantization share their derived header, and so their
	// plan.
	var todo []string
	seen := map[string]bool{}
	index := map[string]int{}
	for i, k := range keys {
		if _, ok := known[k]; !ok && !seen[k] {
			seen[k] = true
			todo = append(todo, k)
			index[k] = i
		}
	}
	fresh := make([]outcome, len(todo))
	errs := make([]error, len(todo))
	mc := newMachine(snap, o.FitTarget)
	mc.cal = o.Calibration
	parallel(len(todo), runtime.GOMAXPROCS(0), func(k int) {
		r := &rows[index[todo[k]]]
		e := cat.Entry(r.Entry)
		cm, prov := cat.model(e, *e.Variant(r.Quant), lock)
		fresh[k], errs[k] = assessModel(cm, prov, mc, so)
	})
	for k, key := range todo {
		if errs[k] != nil {
			return nil, fmt.Errorf("planning %s/%s: %w", rows[index[key]].Entry, rows[index[key]].Quant, errs[k])
		}
		known[key] = fresh[k]
	}
	if o.Cache != nil && len(todo) > 0 {
		saveKept(o.Cache, file, k)
	}
	for i := range rows {
		known[keys[i]].recheck(now).apply(&rows[i])
	}
	rank(rows, o.Goal)
	n := 0
	for i := range rows {
		if rows[i].Enabled {
			n++
			rows[i].Rank = n
		}
	}
	return rows, nil
}

// dropImplausible re-checks each kept outcome against what it claims:
// one no plan could give (an edited cache) is dropped, and planned again.
func dropImplausible(cat *Catalog, lock *LockFile, known map[string]outcome, keys []string, rows []Row) {
	for i, key := range keys {
		if out, ok := known[key]; ok {
			e := cat.Entry(rows[i].Entry)
			if out.plausible(lockedSize(lock, e, *e.Variant(rows[i].Quant))) != nil {
				delete(known, key)
			}
		}
	}
}

// lockedSize is the bytes of a variant's locked files, 0 where it is not
// locked.
func lockedSize(lock *LockFile, e *Entry, v Variant) int64 {
	pkg, _ := lock.Lookup(e.ID, v)
	if pkg == nil {
		return 0
	}
	var n int64
	for _, f := range pkg.Files {
		n += f.Size
	}
	return n
}

// SearchOptions are the plan.Search options behind every row of
// Recommend with o: plan.DefaultSearch's, as 'headroom plan' starts from,
// with the goal, slots, minimum context and fit target of o.
func SearchOptions(o Options) plan.SearchOptions {
	so := plan.DefaultSearch()
	so.Goal, so.FitTarget = planGoal(o.Goal), o.FitTarget
	so.Base.Rules = o.Rules
	if o.Parallel > 0 {
		so.Parallel = o.Parallel
	}
	if o.MinCtx > 0 {
		so.MinCtx = o.MinCtx
	}
	return so
}

func wanted(e *Entry, o Options) bool {
	for _, c := range o.Capabilities {
		if !slices.Contains(e.Capabilities, c) {
			return false
		}
	}
	if len(o.Licenses) > 0 && !slices.Contains(o.Licenses, e.License) {
		return false
	}
	if e.Embeds() {
		// Embedding models and rerankers are listed when asked for, and
		// then whatever their trained context: an input is a passage, not
		// a conversation.
		return Embeds(o.Capabilities)
	}
	return e.CtxTrained >= o.MinCtx
}

// Embeds reports whether the entry embeds or reranks rather than
// generates.
func (e *Entry) Embeds() bool { return Embeds(e.Capabilities) }

// Embeds reports whether capabilities are an embedding model's or a
// reranker's.
func Embeds(capabilities []string) bool {
	return slices.Contains(capabilities, "embedding") || slices.Contains(capabilities, "rerank")
}

// usableTPS is the decode speed below which a configuration, however
// good, ranks after every faster one in the balanced goal: slower than
// this, a reply of a few hundred tokens takes most of a minute.
const usableTPS = 10

func parallel(n, workers int, f func(int)) {
	if n == 0 {
		return
	}
	workers = max(1, min(workers, n))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
