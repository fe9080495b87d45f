package catalog

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/synth"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
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
	// Exact is how many of the best-ranked fitting configurations get
	// plan.Search's full answer instead of the screen's estimate; a
	// negative value plans every one.
	Exact int
}

// DefaultOptions ranks by balanced with plan.DefaultSearch's slots,
// context floor and fit target, so that recommend, plan, pull, serve and
// the panel answer for the same number of conversations unless told
// otherwise.
func DefaultOptions() Options {
	so := plan.DefaultSearch()
	return Options{Goal: GoalBalanced, MinCtx: so.MinCtx, Parallel: so.Parallel, FitTarget: so.FitTarget, Exact: 1}
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
	// Speed is the place for decode and prefill estimates; null until the
	// speed package provides them.
	Speed *Speed `json:"speed"`

	costs costs
	model *arch.Model
}

// Speed is the speed package's estimate for a row's plan, one sequence at
// an empty context. A nil figure is unknown, never guessed.
type Speed struct {
	DecodeTokensPerSec  *float64 `json:"decode_tokens_per_sec"`
	PrefillTokensPerSec *float64 `json:"prefill_tokens_per_sec"`
	// Calibrated says whether every backend involved was fitted to
	// published llama-bench results.
	Calibrated bool `json:"calibrated"`
}

// estimateSpeed fills Speed for every enabled row with a plan: where the
// plan puts each layer and cache (plan.Place, without the compute replay)
// and the speed package's estimate of decode and prefill.
func estimateSpeed(rows []Row, snap *hw.Snapshot) {
	cpu, gpus := plan.Devices(snap)
	for i := range rows {
		r := &rows[i]
		if !r.Enabled || r.Plan == nil || r.model == nil {
			continue
		}
		p := plan.Defaults()
		p.Parallel = max(r.Plan.Slots, 1)
		p.Ctx = r.Plan.CtxPerSlot * p.Parallel
		p.GPULayers = r.Plan.GPULayers
		p.CPUMoE = r.Plan.CPUMoE
		if r.Plan.CacheType != "" && r.Plan.CacheType != "f16" {
			p.CacheK, p.CacheV, p.FlashAttn = r.Plan.CacheType, r.Plan.CacheType, plan.FlashOn
		}
		res, err := plan.Place(r.model, p, cpu, gpus)
		if err != nil {
			continue
		}
		e, err := speed.Estimate(r.model, res, snap, 0)
		if err != nil {
			continue
		}
		r.Speed = &Speed{DecodeTokensPerSec: e.DecodeTPS, PrefillTokensPerSec: e.PrefillTPS, Calibrated: e.Calibrated}
	}
}

// RowPlan is the serving plan behind a verdict.
type RowPlan struct {
	// Source is "search" (plan.Search, every buffer accounted) or
	// "estimate" (the screen's closed form).
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
		id := PackageID(pkg.Repo, pkg.Commit, pkg.Files[0].Name)
		return c.loadModel("inspected/"+id, func() (*arch.Model, int64, error) {
			m, err := pkg.Inputs.Arch()
			return m, pkg.Size(), err
		}), ProvenanceInspected
	}
	return c.loadModel("derived/"+e.ID+"/"+v.Quant, func() (*arch.Model, int64, error) {
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
// one.
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
	for i := range cat.Entries {
		e := &cat.Entries[i]
		if !wanted(e, o) {
			continue
		}
		for _, v := range e.Variants {
			r := Row{Entry: e.ID, Name: e.Name, Class: e.Class.Kind, ParamsB: e.Class.ParamsB, ActiveB: e.Class.ActiveParams,
				Quant: v.Quant, Ref: v.Ref, Capabilities: e.Capabilities, License: e.License, CtxTrained: e.CtxTrained, Quality: e.Quality}
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
		}
	}
	// Planner inputs, in parallel: the first call in a process derives
	// every header.
	workers := runtime.GOMAXPROCS(0)
	parallel(len(rows), workers, func(i int) {
		r := &rows[i]
		e := cat.Entry(r.Entry)
		cm, prov := cat.model(e, *e.Variant(r.Quant), lock)
		r.Provenance, r.SizeBytes, r.model, r.costs = prov, cm.size, cm.m, cm.c
		r.SizeSource = map[string]string{ProvenanceDerived: "derived", ProvenanceInspected: "hub"}[prov]
		switch {
		case cm.err != nil && arch.IsIncompatible(cm.err):
			r.Verdict, r.Reason = plan.Incompatible, strings.TrimPrefix(cm.err.Error(), "incompatible: ")
		case cm.err != nil:
			r.Verdict, r.Reason = plan.Incompatible, cm.err.Error()
		}
	})
	mc := newMachine(snap, o.FitTarget)
	_, gpus := plan.Devices(snap)
	goal := planGoal(o.Goal)
	for i := range rows {
		r := &rows[i]
		if r.Verdict != "" {
			continue
		}
		est := screen(r.costs, mc, goal, o.Parallel, o.MinCtx)
		total := r.costs.layers + 1
		ngl := est.gpuLayers
		if mc.unified && len(gpus) > 0 {
			ngl = total
		}
		if !est.fits {
			r.Verdict = plan.DoesNotFit
			r.Limiting = &Limit{Domain: est.limiting, Shortfall: est.shortfall}
			r.Reason = fmt.Sprintf("does not fit (estimate): %s short by %s at %d cells", est.limiting, gib(est.shortfall), est.ctx)
			continue
		}
		r.Verdict, r.Enabled = plan.Fits, true
		r.Plan = &RowPlan{Source: "estimate", CtxPerSlot: est.ctx, Slots: o.Parallel, GPULayers: ngl, LayersTotal: total, CacheType: "f16"}
		r.Reason = "fits (estimate)"
	}
	estimateSpeed(rows, snap)
	rank(rows, o.Goal)
	// Exact plans for the best-ranked fitting configurations.
	var top []int
	for i := range rows {
		if rows[i].Enabled && (o.Exact < 0 || len(top) < o.Exact) {
			top = append(top, i)
		}
	}
	so := plan.DefaultSearch()
	so.Goal, so.Parallel, so.MinCtx, so.FitTarget = goal, o.Parallel, o.MinCtx, o.FitTarget
	var mu sync.Mutex
	var firstErr error
	parallel(len(top), workers, func(k int) {
		r := &rows[top[k]]
		p, err := plan.Search(r.model, snap, so)
		if err != nil {
			mu.Lock()
			firstErr = err
			mu.Unlock()
			return
		}
		if p.Chosen == nil {
			r.Verdict, r.Enabled, r.Plan = plan.DoesNotFit, false, nil
			r.Reason = "does not fit: " + strings.Join(p.Explain, "; ")
			if r.Limiting == nil {
				r.Limiting = &Limit{Domain: mc.sysID}
			}
			return
		}
		c := p.Chosen
		r.Plan = &RowPlan{Source: "search", CtxPerSlot: c.CtxPerSlot, Slots: c.Profile.Parallel, GPULayers: c.GPULayers,
			LayersTotal: r.costs.layers + 1, CacheType: c.Profile.CacheK, CPUMoE: c.Profile.CPUMoE, Flags: c.Flags}
		if c.Result != nil {
			r.Reason = c.Result.Reason
		}
	})
	if firstErr != nil {
		return nil, firstErr
	}
	if len(top) > 0 {
		estimateSpeed(rows, snap)
		rank(rows, o.Goal)
	}
	n := 0
	for i := range rows {
		if rows[i].Enabled {
			n++
			rows[i].Rank = n
		}
	}
	return rows, nil
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
	return e.CtxTrained >= o.MinCtx
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

func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }
