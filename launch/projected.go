package launch

import (
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
)

// Projected is what the user's own llama.cpp projects for the chosen plan
// beyond headroom's accounting (engine.Check.Beyond): llama-fit-params'
// no-alloc projection is exact for that build and device, so where it
// counts more, admission charges its figure.
type Projected struct {
	// By names the projecting program.
	By   string
	Rows []engine.Row
}

// apply returns r with what the projection counts beyond it.
func (p *Projected) apply(r *plan.Result, cpu string) *plan.Result {
	return withBeyond(r, cpu, p.Rows, func(row engine.Row) string {
		return fmt.Sprintf("llama.cpp's own projection (%s) counts %.0f MiB more", p.By, float64(row.DiffBytes)/(1<<20))
	})
}

// Says lists the rows, for a progress line.
func (p *Projected) Says() string {
	var parts []string
	for _, r := range p.Rows {
		parts = append(parts, fmt.Sprintf("%s %s +%d MiB", r.BufferType, r.Kind, r.DiffBytes>>20))
	}
	return strings.Join(parts, ", ")
}

// AdmitProjected judges the assessed plan again with what llama.cpp's
// projection counts beyond it, on the assessment's snapshot, before
// anything is downloaded: a plan that no longer fits is a *NotFit that
// says why.
func (a *Assessed) AdmitProjected(p *Projected) error {
	if p == nil || len(p.Rows) == 0 || a.Result == nil || a.Chosen() == nil {
		return nil
	}
	as, err := p.apply(a.Result, a.cpu.Name).Against(a.Snapshot)
	if err != nil {
		return err
	}
	if as.Verdict == plan.Fits {
		return nil
	}
	why := []string{fmt.Sprintf("llama.cpp's own projection (%s) counts more than headroom's plan (%s); with its figures the plan does not fit", p.By, p.Says()), as.Reason}
	return &NotFit{Ref: a.Model.Ref, Verdict: as.Verdict, Why: why}
}
