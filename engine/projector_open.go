package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/scratch"
	"os"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

// OpenProjector prepares llama.cpp's projection of the model of header h,
// whose architecture headroom could not model (archErr; nil for the engine
// check of a modeled one), with the
// llama-fit-params fitParams ("" when none was found). A remote model is
// projected on a sparse twin of its header, written by c into a temporary
// folder that the returned cleanup removes; a local one on its own file.
// A model that cannot be projected is an *arch.Incompatible saying why
// (WhyNotProjected), naming the one thing that fixes it.
func OpenProjector(ctx context.Context, c *source.Client, h *source.Header, archErr error, fitParams string) (*Projector, func(), error) {
	none := func() {}
	if h == nil {
		return nil, none, archErr
	}
	if why := WhyNotProjected(h.Model, archErr, fitParams); why != "" {
		return nil, none, &arch.Incompatible{Reason: why}
	}
	b, _ := arch.BasicsOf(h.Model)
	// Named by this process: a twin left by one that was killed is
	// removed by the next that makes one.
	dir, err := scratch.Dir("headroom-twin-")
	if err != nil {
		return nil, none, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	paths, err := c.WriteTwin(ctx, h, dir)
	if err != nil {
		cleanup()
		return nil, none, fmt.Errorf("architecture %q is not one headroom models, and its header could not be given to llama.cpp: %w", b.Arch, err)
	}
	return &Projector{Bin: fitParams, Model: paths[0], Env: os.Environ(), Basics: b}, cleanup, nil
}

// Assess judges profile p on snap from the projection, as plan.Assess
// judges a modeled architecture: the verdict, the domains, every buffer,
// and warnings saying the figures are llama.cpp's and when a slot passes
// the trained context. A projection llama.cpp refuses (an architecture
// the user's build does not know either) is an incompatible verdict in
// llama.cpp's words, not an error.
func (pr Projector) Assess(ctx context.Context, p plan.Profile, snap *hw.Snapshot) (*plan.Assessment, error) {
	cpu, gpus := plan.Devices(snap)
	r, err := pr.Account(ctx, p, cpu, gpus)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return nil, err
		}
		return &plan.Assessment{Verdict: plan.Incompatible, Reason: "llama.cpp's own projection failed: " + strings.Join(strings.Fields(err.Error()), " "),
			Domains: []hw.DomainUse{}, Buffers: []plan.Buffer{}}, nil
	}
	a, err := r.Against(snap)
	if err != nil {
		return nil, err
	}
	a.Warnings = append(a.Warnings, ProjectedSays(pr.Basics.Arch, pr.Bin))
	if c := a.Resolved; c != nil && c.CtxTrain > 0 && c.NCtxSeq > c.CtxTrain {
		a.Warnings = append(a.Warnings, fmt.Sprintf("%d cells per sequence is beyond the %d the model was trained for; -c %d keeps every slot within it",
			c.NCtxSeq, c.CtxTrain, c.CtxTrain*c.NSeq))
	}
	if a.Verdict != plan.Fits {
		a.Fixes = []plan.Fix{{Flags: []string{}, Says: "a plan (headroom plan MODEL) searches llama.cpp's projections for the context and GPU layers that fit"}}
	}
	a.Backends = plan.Backends(gpus)
	return a, nil
}
