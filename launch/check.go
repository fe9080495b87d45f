package launch

import (
	"context"
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

// EngineCheck has the llama-fit-params at bin project the load of the
// model's own file without allocating, and sets headroom's accounting of
// the same context beside it. llama-fit-params creates its context as a
// library caller does, with one output row per token of the batch, so
// headroom accounts that context for the comparison (the model and
// context figures are the server's; only compute differs). The model is
// checked alone: a projector or draft is left out on both sides, and so
// is a unified cache (-kvu), which llama-fit-params does not take: its
// context keeps one stream per sequence, and headroom accounts the same
// (engine.FitParamsProfile). A remote
// model is checked before any byte of its weights moves: the projection
// runs on a sparse twin, its header bytes then a hole up to its size,
// removed afterwards.
func EngineCheck(ctx context.Context, c *source.Client, bin string, h *source.Header, m *arch.Model, p plan.Profile, cpu plan.Device, gpus []plan.Device) (*engine.Check, error) {
	q := engine.FitParamsProfile(p)
	q.OutputsMax = max(q.Batch, 1)
	q.Companions = nil
	r, err := plan.Account(m, q, cpu, gpus)
	if err != nil {
		return nil, err
	}
	pr, cleanup, err := engine.OpenProjector(ctx, c, h, nil, bin)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	rows, _, err := engine.Project(ctx, bin, pr.Model, q.LoadArgs(), pr.Env)
	if err != nil {
		return nil, err
	}
	check := engine.Compare(bin, rows, r.Buffers, cpu.Name)
	check.Without = engine.FitParamsLeavesOut(p, q)
	return &check, nil
}

// Preflight is the engine check run before any weight is downloaded,
// where the llama.cpp that will load the model has llama-fit-params
// (FitParams). Where llama.cpp's projection counts more than the plan, it
// returns those figures, which admission then charges (AdmitProjected
// before the download, Load at the load); where it counts less, the
// plan's larger figure stands (llama.cpp's projection can itself count
// what its real load does not: Gemma 3n's tied embedding, twice under
// mmap). nil when the check agrees or could not run: the check informs
// the plan, and a missing llama-fit-params is no reason to refuse one.
func (d *Deps) Preflight(ctx context.Context, a *Assessed) *Projected {
	if a == nil || a.Chosen() == nil || a.Model == nil || a.Model.Header == nil || a.Model.Arch == nil {
		return nil
	}
	if d.FitParams == "" {
		d.say("checking", "no llama-fit-params beside llama-server or on PATH: the plan is headroom's accounting alone")
		return nil
	}
	c, err := EngineCheck(ctx, d.Client, d.FitParams, a.Model.Header, a.Model.Arch, a.Chosen().Profile, a.cpu, a.gpus)
	if err != nil {
		d.say("checking", "llama.cpp's own projection could not be had: %s", strings.Join(strings.Fields(err.Error()), " "))
		return nil
	}
	if c.Agrees {
		d.say("checking", "llama.cpp's own projection (%s) agrees with the plan on every buffer", c.Engine)
		return nil
	}
	var diffs []string
	for _, cell := range c.Cells {
		if !cell.Agrees {
			diffs = append(diffs, fmt.Sprintf("%s %s: llama.cpp %d MiB, headroom %d MiB", cell.Row, cell.Part, cell.Engine, cell.Headroom))
		}
	}
	p := &Projected{By: c.Engine, Rows: c.Beyond(a.cpu.Name)}
	if len(p.Rows) == 0 {
		d.say("checking", "llama.cpp's own projection differs from the plan (%s), counting less than headroom: the plan's figures stand", strings.Join(diffs, "; "))
		return nil
	}
	d.say("checking", "llama.cpp's own projection differs from the plan (%s); admission charges its larger figures (%s)", strings.Join(diffs, "; "), p.Says())
	return p
}
