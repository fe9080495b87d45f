package cli

import (
	"context"
	"errors"
	"github.com/headroom-llm/headroom/internal/lookpath"

	"github.com/headroom-llm/headroom/arch"

	"github.com/headroom-llm/headroom/engine"
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
// architecture headroom does not model (engine.OpenProjector), with the
// llama-fit-params beside llamaServer or on PATH. It returns nil and the
// reason when there is no projection to be had: the model is modeled (its
// error is its own), a catalog variant (no header), an architecture
// refused on purpose, or no llama-fit-params was found; the reason then
// replaces the incompatible verdict's, saying the one thing that fixes
// it.
func openProjection(ctx context.Context, env Env, in *modelInputs, llamaServer string, program plan.Program) (*projection, string) {
	if in.ArchErr == nil {
		return nil, ""
	}
	if !program.IsServer() {
		// llama-fit-params projects llama-server's context, not this one.
		return nil, incompatibleReason(in.ArchErr) + "; llama.cpp's own projection is taken for llama-server only, not " + program.Words()
	}
	bin, err := engine.FindFitParams(llamaServer, nil)
	pr, cleanup, perr := engine.OpenProjector(ctx, source.NewClient(env.Getenv), in.Header, in.ArchErr, bin)
	switch {
	case perr != nil && errors.Is(err, lookpath.ErrRelative):
		// Say why the llama-fit-params that is there was not run.
		return nil, incompatibleReason(perr) + "; " + err.Error()
	case perr != nil:
		return nil, incompatibleReason(perr)
	}
	return &projection{Projector: *pr, cleanup: cleanup}, ""
}

// projectedSays names the projection behind a plan.
func projectedSays(pr *projection) string {
	return engine.ProjectedSays(pr.Basics.Arch, pr.Bin)
}

// incompatibleReason is the reason an incompatible verdict gives for err.
func incompatibleReason(err error) string {
	var inc *arch.Incompatible
	if errors.As(err, &inc) {
		return inc.Reason
	}
	return err.Error()
}

// errProjectedCompanions refuses a projector or draft beside a model
// answered on llama.cpp's projection, which covers the model alone: they
// would go uncounted.
var errProjectedCompanions = usagef("--mmproj and -md are not planned beside an architecture headroom does not model: llama.cpp's projection covers the model alone, so they would go uncounted")
