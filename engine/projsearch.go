package engine

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// A projection costs one run of llama-fit-params (0.1 to 0.5 s on the
// CPU build), where headroom's own accounting costs microseconds, so the
// search over projections asks few questions: the most GPU layers at the
// least context by bisection, then the most context at those layers by
// regula falsi on the tightest margin (KV grows linearly with the
// context, so two or three projections usually land within a step), for
// f16 and, where f16 falls short of the trained context, q8_0.

// maxProjections bounds one search: at 0.1 to 0.5 s each, half a minute
// at worst; the searches measured took 2 or 3.
const maxProjections = 48

// projectedSearch is a search over projections of one model on one
// machine.
type projectedSearch struct {
	Projector Projector
	Snapshot  *hw.Snapshot
	Options   plan.SearchOptions
	// Progress, where set, hears of each projection.
	Progress func(line string)

	cpu   plan.Device
	gpus  []plan.Device
	asked int
}

// SearchProjected finds the best plan for a model headroom does not
// model from its llama.cpp's projections: the slots asked for, the most
// GPU layers that fit at the least context, the most context at those
// layers, f16 caches or q8_0 where f16 cannot reach the trained context.
// Expert offload (--n-cpu-moe) is not searched. A plan with no chosen
// candidate says why nothing fits.
func SearchProjected(ctx context.Context, pr Projector, s *hw.Snapshot, o plan.SearchOptions, progress func(string)) (*plan.Plan, error) {
	if o.Headless {
		s = s.Headless()
	}
	ps := &projectedSearch{Projector: pr, Snapshot: s, Options: o, Progress: progress}
	return ps.run(ctx)
}

func (ps *projectedSearch) run(ctx context.Context) (*plan.Plan, error) {
	o := &ps.Options
	o.Parallel = max(o.Parallel, 1)
	if o.MinCtx <= 0 {
		o.MinCtx = 4096
	}
	o.Goal = cmp.Or(o.Goal, plan.GoalBalanced)
	b := ps.Projector.Basics
	ps.cpu, ps.gpus = plan.Devices(ps.Snapshot)
	ceiling := b.CtxTrain
	if ceiling <= 0 {
		ceiling = 131072
	}
	var explain []string
	if fx := o.Fixed.Ctx; fx > ceiling*o.Parallel {
		explain = append(explain, fmt.Sprintf("-c %d is capped at %d: %d slots of the %d cells the model was trained for", fx, ceiling*o.Parallel, o.Parallel, ceiling))
		o.Fixed.Ctx = ceiling * o.Parallel
	}
	minCtx := min(o.MinCtx, ceiling)
	if o.Fixed.Ctx > 0 {
		minCtx = max(o.Fixed.Ctx/o.Parallel, 1)
		ceiling = minCtx
	}
	start := time.Now()

	caches := [][2]string{{"f16", "f16"}}
	if o.Fixed.CacheK != "" || o.Fixed.CacheV != "" {
		caches = [][2]string{{cmp.Or(o.Fixed.CacheK, "f16"), cmp.Or(o.Fixed.CacheV, "f16")}}
	} else if o.AllowQ8 {
		caches = append(caches, [2]string{"q8_0", "q8_0"})
	}

	ngl, why, err := ps.layers(ctx, caches[0], minCtx)
	if err != nil {
		return nil, err
	}
	if why != "" {
		explain = append(explain, why)
	}
	var found []plan.Candidate
	for i, cc := range caches {
		if i > 0 && len(found) > 0 && found[0].CtxPerSlot >= ceiling {
			break // f16 reaches the ceiling: q8_0 would buy nothing
		}
		c, ok, err := ps.mostContext(ctx, cc, ngl, minCtx, ceiling)
		if err != nil {
			return nil, err
		}
		if ok && (len(found) == 0 || c.CtxPerSlot > found[0].CtxPerSlot) {
			found = append(found, c)
		}
	}
	p := &plan.Plan{Candidates: found}
	took := fmt.Sprintf("%d projections in %.1f s", ps.asked, time.Since(start).Seconds())
	if len(found) == 0 {
		p.Candidates = []plan.Candidate{}
		p.Explain = append(explain, fmt.Sprintf("nothing fits by llama.cpp's own projection: not even %d cells per slot for %d slots with %d layers on the GPU and %d MiB left free (%s)", minCtx, o.Parallel, ngl, o.FitTarget>>20, took))
		return p, nil
	}
	p.Chosen = &found[len(found)-1]
	if len(found) > 1 {
		p.RunnerUp = &found[0]
	}
	c := p.Chosen
	explain = append(explain,
		ProjectedSays(b.Arch, ps.Projector.Bin)+" ("+took+")",
		fmt.Sprintf("%d slots of %d cells each (%d in all), keeping at least %d MiB free in every domain (least margin %d MiB)", o.Parallel, c.CtxPerSlot, c.Profile.Ctx, o.FitTarget>>20, c.MinMargin>>20))
	switch {
	case len(ps.gpus) == 0 || c.GPULayers == 0:
		explain = append(explain, "every layer in system memory")
	case c.GPULayers >= b.NLayer+1:
		explain = append(explain, "every layer, and the output layer, is on the GPU")
	default:
		explain = append(explain, fmt.Sprintf("%d of %d layers on the GPU (the output layer counts as one); expert offload (--n-cpu-moe) is not searched for an architecture headroom does not model", c.GPULayers, b.NLayer+1))
	}
	if c.Profile.CacheK == "q8_0" && o.Fixed.CacheK == "" {
		explain = append(explain, "q8_0 K/V cache with flash attention: f16 could not reach this context")
	}
	if r := p.RunnerUp; r != nil {
		explain = append(explain, fmt.Sprintf("runner-up: %d cells per slot, -ngl %d, %s cache", r.CtxPerSlot, r.GPULayers, r.Profile.CacheK))
	}
	p.Explain = explain
	return p, nil
}

// profile is the profile for ngl layers, perSlot cells a slot and cache
// types cc.
func (ps *projectedSearch) profile(cc [2]string, ngl, perSlot int) plan.Profile {
	o := ps.Options
	p := o.Base
	p.Parallel, p.KVUnified = o.Parallel, false
	p.Ctx = perSlot * o.Parallel
	if o.Fixed.Ctx > 0 {
		p.Ctx = o.Fixed.Ctx
	}
	p.GPULayers = ngl
	p.CacheK, p.CacheV = cc[0], cc[1]
	if cc[1] != "f16" {
		p.FlashAttn = plan.FlashOn
	}
	return p
}

// eval projects one profile and judges it against the snapshot and the
// fit target.
func (ps *projectedSearch) eval(ctx context.Context, p plan.Profile) (*plan.Assessment, bool, error) {
	if ps.asked >= maxProjections {
		return nil, false, fmt.Errorf("the search over llama.cpp's projections asked %d times without settling", ps.asked)
	}
	ps.asked++
	if ps.Progress != nil {
		ps.Progress(fmt.Sprintf("projecting -c %d -ngl %d -ctk %s (%d)", p.Ctx, p.GPULayers, p.CacheK, ps.asked))
	}
	r, err := ps.Projector.Account(ctx, p, ps.cpu, ps.gpus)
	if err != nil {
		return nil, false, err
	}
	a, err := r.Against(ps.Snapshot)
	if err != nil {
		return nil, false, err
	}
	return a, a.Verdict == plan.Fits && a.LeastMargin() >= ps.Options.FitTarget, nil
}

// layers is the most GPU layers that fit at the least context, and a line
// saying why there are none where the machine has GPUs.
func (ps *projectedSearch) layers(ctx context.Context, cc [2]string, minCtx int) (int, string, error) {
	if f := ps.Options.Fixed.GPULayers; f != nil {
		return *f, "", nil
	}
	if len(ps.gpus) == 0 {
		return 0, "", nil
	}
	most := ps.Projector.Basics.NLayer + 1
	a, ok, err := ps.eval(ctx, ps.profile(cc, most, minCtx))
	if err != nil {
		return 0, "", err
	}
	onGPU := false
	for _, b := range a.Buffers {
		if b.Device != ps.cpu.Name && b.Kind == plan.KindModel {
			onGPU = true
		}
	}
	if !onGPU {
		return 0, fmt.Sprintf("%s sees none of this machine's GPUs (%s): planned in system memory; the llama.cpp built for them projects their share", ps.Projector.Bin, gpuNames(ps.gpus)), nil
	}
	if ok {
		return most, "", nil
	}
	lo, hi := 0, most // lo fits (or is 0), hi does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		_, ok, err := ps.eval(ctx, ps.profile(cc, mid, minCtx))
		if err != nil {
			return 0, "", err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, "", nil
}

func gpuNames(gpus []plan.Device) string {
	s := ""
	for i, g := range gpus {
		if i > 0 {
			s += ", "
		}
		s += g.Name
	}
	return s
}

// mostContext is the candidate with the most context per slot, in steps
// of 256 cells, between minCtx and ceiling at ngl layers; ok is false
// when not even minCtx fits.
func (ps *projectedSearch) mostContext(ctx context.Context, cc [2]string, ngl, minCtx, ceiling int) (plan.Candidate, bool, error) {
	type point struct {
		perSlot int
		a       *plan.Assessment
		slack   int64 // least margin beyond the fit target
	}
	at := func(perSlot int) (point, bool, error) {
		a, ok, err := ps.eval(ctx, ps.profile(cc, ngl, perSlot))
		if err != nil {
			return point{}, false, err
		}
		return point{perSlot, a, a.LeastMargin() - ps.Options.FitTarget}, ok, nil
	}
	lo, ok, err := at(minCtx)
	if err != nil || !ok {
		return plan.Candidate{}, false, err
	}
	best := lo
	if ceiling > minCtx {
		hi, ok, err := at(ceiling)
		if err != nil {
			return plan.Candidate{}, false, err
		}
		if ok {
			best = hi
		} else {
			// Regula falsi on the slack, which falls about linearly with
			// the context, kept to 256-cell steps.
			// Every other step bisects, so a margin that is not linear
			// still settles in a few steps.
			for step := 0; hi.perSlot-lo.perSlot > 256; step++ {
				x := lo.perSlot + int(float64(hi.perSlot-lo.perSlot)*float64(lo.slack)/float64(lo.slack-hi.slack))
				if step%2 == 1 {
					x = (lo.perSlot + hi.perSlot) / 2
				}
				x = x / 256 * 256
				x = min(max(x, lo.perSlot+256), hi.perSlot-256)
				if x <= lo.perSlot {
					break
				}
				pt, ok, err := at(x)
				if err != nil {
					return plan.Candidate{}, false, err
				}
				if ok {
					lo = pt
				} else {
					hi = pt
				}
			}
			best = lo
		}
	}
	prof := ps.profile(cc, ngl, best.perSlot)
	return plan.Candidate{Profile: prof, CtxPerSlot: best.perSlot, GPULayers: ngl, MinMargin: best.a.LeastMargin(),
		Flags: prof.Args(), Result: best.a, Why: "llama.cpp's own projection"}, true, nil
}
