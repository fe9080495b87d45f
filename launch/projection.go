package launch

import (
	"context"
	"errors"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
)

// assessProjected searches a plan for a model headroom does not model
// over its llama.cpp's projections (engine.SearchProjected), on a sparse
// twin of a remote model's header: nothing of its weights moves.
func (d *Deps) assessProjected(ctx context.Context, a *Assessed) (*Assessed, error) {
	m, snap, o := a.Model, a.Snapshot, a.Options
	pr, cleanup, err := engine.OpenProjector(ctx, d.Client, m.Header, m.ArchErr, d.FitParams)
	defer cleanup()
	if err != nil {
		var inc *arch.Incompatible
		if errors.As(err, &inc) {
			return nil, &NotFit{Ref: m.Ref, Verdict: plan.Incompatible, Why: []string{inc.Reason}}
		}
		return nil, err
	}
	b := pr.Basics
	if m.Companions != nil {
		// llama.cpp's projection covers the model alone: a projector or
		// draft beside it would go uncounted, so it is neither pulled nor
		// loaded.
		d.say("assessing", "the projector or draft beside %s is left out: llama.cpp's projection of an architecture headroom does not model covers the model alone", m.Ref)
		m.Companions, m.Draft = nil, nil
	}
	d.say("assessing", "architecture %s is not one headroom models: asking %s to project the candidates", b.Arch, d.FitParams)
	p, err := engine.SearchProjected(ctx, *pr, snap, o, nil)
	if err != nil {
		return nil, &NotFit{Ref: m.Ref, Verdict: plan.Incompatible, Why: []string{"llama.cpp's own projection failed: " + err.Error()}}
	}
	a.Plan, a.Projector = p, pr
	if p.Chosen == nil {
		return a, &NotFit{Ref: m.Ref, Verdict: plan.DoesNotFit, Why: p.Explain}
	}
	c := p.Chosen
	a.Key = d.key(m, snap, c, o)
	a.Result = &plan.Result{Buffers: c.Result.Buffers}
	if c.Result.Resolved != nil {
		a.Result.Context = *c.Result.Resolved
	}
	d.say("assessing", "fits by llama.cpp's projection: %d slots of %d tokens, %d GPU layers; flags %v", c.Profile.Parallel, c.CtxPerSlot, c.GPULayers, c.Flags)
	return a, nil
}

// projectLoad is the accounting of a projected plan at load time: the
// projection again, of the file llama-server will load, on the devices of
// a fresh snapshot.
func projectLoad(ctx context.Context, a *Assessed, path string, cpu plan.Device, gpus []plan.Device) (*plan.Result, error) {
	pr := *a.Projector
	pr.Model = path
	return pr.Account(ctx, a.Chosen().Profile, cpu, gpus)
}
