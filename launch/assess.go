package launch

import (
	"context"
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// NotFit is a model that does not fit this machine in any profile the
// search may choose, or is incompatible with headroom's models of
// llama.cpp.
type NotFit struct {
	Ref     string
	Verdict string
	// Why are the search's own lines.
	Why []string
}

func (e *NotFit) Error() string {
	return fmt.Sprintf("%s %s on this machine: %s", e.Ref, strings.ReplaceAll(e.Verdict, "_", " "), strings.Join(e.Why, "; "))
}

// Assessed is a model with the plan chosen for it and the snapshot it was
// chosen against.
type Assessed struct {
	Model    *Model
	Plan     *plan.Plan
	Snapshot *hw.Snapshot
	Options  plan.SearchOptions
}

// Chosen is the plan's chosen candidate; nil when nothing fits.
func (a *Assessed) Chosen() *plan.Candidate { return a.Plan.Chosen }

// Assess takes a snapshot and searches for the best plan. A model that
// fits nowhere is a *NotFit, as is an incompatible one.
func (d *Deps) Assess(ctx context.Context, m *Model, o plan.SearchOptions) (*Assessed, error) {
	d.say("assessing", "taking a hardware snapshot")
	snap, err := d.Machine(ctx)
	if err != nil {
		return nil, err
	}
	if m.ArchErr != nil {
		return nil, &NotFit{Ref: m.Ref, Verdict: plan.Incompatible, Why: []string{m.ArchErr.Error()}}
	}
	p, err := plan.Search(m.Arch, snap, o)
	if err != nil {
		return nil, err
	}
	a := &Assessed{Model: m, Plan: p, Snapshot: snap, Options: o}
	if p.Chosen == nil {
		return a, &NotFit{Ref: m.Ref, Verdict: plan.DoesNotFit, Why: p.Explain}
	}
	c := p.Chosen
	d.say("assessing", "fits: %d slot(s) of %d tokens, %d GPU layers; flags %s", c.Profile.Parallel, c.CtxPerSlot, c.GPULayers, strings.Join(c.Flags, " "))
	return a, nil
}
