package report

import (
	"cmp"
	"strings"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

// Plan is the search for the best flags: 'headroom plan --json' and the
// API's /api/plan. It is an answer where nothing fits too (Chosen nil).
type Plan struct {
	// Model is the model as named.
	Model string `json:"model"`
	// Program is the llama.cpp program the plan is for.
	Program plan.Program `json:"program"`
	// Inputs is a catalog variant's provenance (derived or inspected);
	// empty for a file or Hub reference, read from its own header.
	Inputs  string `json:"inputs,omitempty"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	*plan.Plan
	// Command is the chosen plan's command line, one argument each;
	// nil where nothing fits or the model has no name the program could
	// load it by.
	Command []string       `json:"command,omitempty"`
	Speed   []speed.Result `json:"speed"`
	// Network is the share of a token spent crossing to rpc-servers.
	Network *speed.Network `json:"network,omitempty"`
	// EngineCheck is --verify's comparison with llama.cpp's own
	// projection of the chosen flags.
	EngineCheck *engine.Check `json:"engine_check,omitempty"`
	// Engine says which llama.cpp build the figures are for.
	Engine *engine.EngineNote `json:"engine,omitempty"`
	// Projected says the plan's figures are llama.cpp's own projection,
	// for an architecture headroom does not model.
	Projected string `json:"projected,omitempty"`
	// Backends say whether each GPU backend's figures were measured.
	Backends []plan.BackendNote `json:"backends,omitempty"`
	// Measured is --bench's: llama-bench's own speed for the chosen flags.
	Measured *speed.Measured `json:"speed_measured,omitempty"`
}

// Judge sets the verdict, reason and plan from a search: p is nil where
// headroom does not model the architecture (archErr) and llama.cpp's
// projection could not answer either (why says so, where it was asked).
func (r *Plan) Judge(p *plan.Plan, archErr error, why string) {
	switch {
	case archErr != nil && p == nil:
		reason := cmp.Or(why, archErr.Error())
		r.Verdict, r.Reason = plan.Incompatible, reason
		r.Plan = &plan.Plan{Candidates: []plan.Candidate{}, Explain: []string{reason}}
	case p.Chosen == nil:
		r.Verdict, r.Reason, r.Plan = plan.DoesNotFit, strings.Join(p.Explain, "; "), p
		if p.Candidates == nil {
			p.Candidates = []plan.Candidate{}
		}
	default:
		r.Verdict, r.Reason, r.Plan = plan.Fits, "fits", p
		if c := p.Chosen.Result; c != nil && c.Reason != "" {
			r.Reason = c.Reason
		}
	}
	if r.Speed == nil {
		r.Speed = []speed.Result{}
	}
}
