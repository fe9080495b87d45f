package launch

import (
	"context"
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine"
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
	// Result is the chosen candidate's accounting, buffer by buffer.
	Result *plan.Result
	// Key names the inputs of Result.
	Key admission.Key
	// Projector, for an architecture headroom does not model, is the
	// user's llama.cpp that projected the plan and projects the load
	// again; nil for a modeled one.
	Projector *engine.Projector
	// cpu and gpus are Snapshot's devices as plan.Devices names them,
	// for the checks that follow the assessment.
	cpu  plan.Device
	gpus []plan.Device
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
	return d.assessOn(ctx, m, o, snap)
}

// assessOn is Assess on a snapshot already taken (and perhaps adjusted).
func (d *Deps) assessOn(ctx context.Context, m *Model, o plan.SearchOptions, snap *hw.Snapshot) (*Assessed, error) {
	a := &Assessed{Model: m, Snapshot: snap, Options: o}
	a.cpu, a.gpus = plan.Devices(snap)
	if m.ArchErr != nil {
		return d.assessProjected(ctx, a)
	}
	if m.Companions != nil && o.Base.Companions == nil {
		o.Base.Companions = m.Companions
	}
	p, err := plan.Search(m.Arch, snap, o)
	if err != nil {
		return nil, err
	}
	a.Plan, a.Options = p, o
	if p.Chosen == nil {
		return a, &NotFit{Ref: m.Ref, Verdict: plan.DoesNotFit, Why: p.Explain}
	}
	c := p.Chosen
	a.Key = d.key(m, snap, c, o)
	if a.Result, err = plan.Account(m.Arch, c.Profile, a.cpu, a.gpus); err != nil {
		return nil, err
	}
	if d.Cache != nil {
		d.Cache.Put(a.Key, a.Result)
	}
	slots := "1 slot"
	if c.Profile.Parallel != 1 {
		slots = fmt.Sprintf("%d slots", c.Profile.Parallel)
	}
	d.say("assessing", "fits: %s of %d tokens, %d GPU layers; flags %s", slots, c.CtxPerSlot, c.GPULayers, strings.Join(c.Flags, " "))
	return a, nil
}

// key names the inputs of a candidate's accounting on a snapshot.
func (d *Deps) key(m *Model, snap *hw.Snapshot, c *plan.Candidate, o plan.SearchOptions) admission.Key {
	return admission.Key{
		Artifacts: m.Identity(),
		Engine:    d.Engine,
		Topology:  admission.Topology(snap),
		Execution: c.Flags,
		Capacity:  admission.Capacity(o.FitTarget, o.Headless),
	}
}
