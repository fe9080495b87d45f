package launch

import (
	"context"
	"os"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// assessProjected searches a plan for a model headroom does not model
// over its llama.cpp's projections (engine.SearchProjected), on a sparse
// twin of a remote model's header: nothing of its weights moves.
func (d *Deps) assessProjected(ctx context.Context, m *Model, snap *hw.Snapshot, o plan.SearchOptions) (*Assessed, error) {
	if m.Header == nil {
		return nil, &NotFit{Ref: m.Ref, Verdict: plan.Incompatible, Why: []string{m.ArchErr.Error()}}
	}
	if why := engine.WhyNotProjected(m.Header.Model, m.ArchErr, d.FitParams); why != "" {
		return nil, &NotFit{Ref: m.Ref, Verdict: plan.Incompatible, Why: []string{why}}
	}
	b, _ := arch.BasicsOf(m.Header.Model)
	dir, err := os.MkdirTemp("", "headroom-twin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	paths, err := d.Client.WriteTwin(ctx, m.Header, dir)
	if err != nil {
		return nil, err
	}
	pr := engine.Projector{Bin: d.FitParams, Model: paths[0], Env: os.Environ(), Basics: b}
	d.say("assessing", "architecture %s is not one headroom models: asking %s to project the candidates", b.Arch, d.FitParams)
	p, err := engine.SearchProjected(ctx, pr, snap, o, nil)
	if err != nil {
		return nil, &NotFit{Ref: m.Ref, Verdict: plan.Incompatible, Why: []string{"llama.cpp's own projection failed: " + err.Error()}}
	}
	a := &Assessed{Model: m, Plan: p, Snapshot: snap, Options: o, Projector: &pr}
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
func projectLoad(ctx context.Context, a *Assessed, path string, fresh *hw.Snapshot) (*plan.Result, error) {
	pr := *a.Projector
	pr.Model = path
	cpu, gpus := plan.Devices(fresh)
	return pr.Account(ctx, a.Chosen().Profile, cpu, gpus)
}
