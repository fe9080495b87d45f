package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

// projection is an architecture headroom does not model, answered by the
// user's own llama.cpp: the projector and what to remove afterwards (the
// sparse twin of a remote model).
type projection struct {
	engine.Projector
	cleanup func()
}

// openProjection prepares llama.cpp's projection for a model whose
// architecture headroom does not model. It returns nil and the reason
// when there is no projection to be had: the model is modeled (its error
// is its own), a catalog variant (no header), an architecture refused on
// purpose, or no llama-fit-params was found; the reason then replaces
// the incompatible verdict's, saying the one thing that fixes it.
func openProjection(ctx context.Context, env Env, in *modelInputs, llamaServer string) (*projection, string) {
	if in.ArchErr == nil {
		return nil, ""
	}
	if in.Header == nil {
		return nil, in.ArchErr.Error()
	}
	bin, _ := engine.FindFitParams(llamaServer, nil)
	if why := engine.WhyNotProjected(in.Header.Model, in.ArchErr, bin); why != "" {
		return nil, why
	}
	name := in.Architecture
	b, _ := arch.BasicsOf(in.Header.Model)
	dir, err := os.MkdirTemp("", "headroom-twin-")
	if err != nil {
		return nil, err.Error()
	}
	cleanup := func() { os.RemoveAll(dir) }
	paths, err := source.NewClient(env.Getenv).WriteTwin(ctx, in.Header, dir)
	if err != nil {
		cleanup()
		return nil, fmt.Sprintf("architecture %q is not one headroom models, and its header could not be given to llama.cpp: %v", name, err)
	}
	return &projection{Projector: engine.Projector{Bin: bin, Model: paths[0], Env: os.Environ(), Basics: b}, cleanup: cleanup}, ""
}

// assessProjected judges profile p of a projected model on snap, as
// plan.Assess judges a modeled one. A projection llama.cpp refuses (an
// architecture the user's build does not know either) is an incompatible
// verdict with llama.cpp's words.
func assessProjected(ctx context.Context, pr *projection, p plan.Profile, snap *hw.Snapshot) (*plan.Assessment, error) {
	cpu, gpus := plan.Devices(snap)
	r, err := pr.Account(ctx, p, cpu, gpus)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		return &plan.Assessment{Verdict: plan.Incompatible, Reason: "llama.cpp's own projection failed: " + oneLine(err.Error()),
			Domains: []hw.DomainUse{}, Buffers: []plan.Buffer{}}, nil
	}
	a, err := r.Against(snap)
	if err != nil {
		return nil, err
	}
	a.Warnings = append([]string{projectedSays(pr)}, a.Warnings...)
	if c := a.Resolved; c != nil && c.CtxTrain > 0 && c.NCtxSeq > c.CtxTrain {
		a.Warnings = append(a.Warnings, fmt.Sprintf("%d cells per sequence is beyond the %d the model was trained for; -c %d keeps every slot within it",
			c.NCtxSeq, c.CtxTrain, c.CtxTrain*c.NSeq))
	}
	if a.Verdict != plan.Fits {
		a.Fixes = []plan.Fix{{Flags: []string{}, Says: "headroom plan MODEL searches llama.cpp's projections for the context and GPU layers that fit"}}
	}
	a.Backends = plan.Backends(gpus)
	return a, nil
}

// projectedSays names the projection behind a figure.
func projectedSays(pr *projection) string {
	return engine.ProjectedSays(pr.Basics.Arch, pr.Bin)
}
