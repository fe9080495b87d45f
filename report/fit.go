// Package report holds the answers headroom gives as JSON, one type each
// for the command line and the HTTP API alike: what docs/json.md
// describes field by field.
package report

import (
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/speed"
)

// Artifact is the model an answer is about: the exact files, where they
// are known, and for a catalog variant its name and where its planner
// inputs come from.
type Artifact struct {
	Ref          string                `json:"ref"`
	Architecture string                `json:"architecture"`
	Commit       string                `json:"commit,omitempty"`
	Files        []source.ArtifactFile `json:"files"`
	SizeBytes    int64                 `json:"size_bytes"`
	// Variant is the catalog variant (ENTRY/QUANT), for one.
	Variant string `json:"variant,omitempty"`
	// Inputs is a catalog variant's provenance (derived or inspected).
	Inputs string `json:"inputs,omitempty"`
}

// Fit is the assessment of one profile: 'headroom fit --json' and the
// API's /api/fit.
type Fit struct {
	Artifact Artifact `json:"artifact"`
	// Program is the llama.cpp program the profile is for.
	Program plan.Program `json:"program"`
	Profile plan.Profile `json:"profile"`
	*plan.Assessment
	// EngineCheck is --verify's comparison with llama.cpp's own
	// projection of the load.
	EngineCheck *engine.Check `json:"engine_check,omitempty"`
	// Engine says which llama.cpp build the figures are for.
	Engine *engine.EngineNote `json:"engine,omitempty"`
	// Measured is --bench's: llama-bench's own speed for the profile.
	Measured *speed.Measured `json:"speed_measured,omitempty"`
	// MakeRoom is the API's, with a provider: the models it would stop
	// to load this one beside the others on this machine.
	MakeRoom *MakeRoom `json:"make_room,omitempty"`
}

// MakeRoom is what the OpenAI-compatible provider would stop to load a
// model that does not fit beside the models it runs.
type MakeRoom struct {
	// Stop names the models it would stop; empty when none would do.
	Stop []string `json:"stop"`
	// Says why, in a sentence: the short domains, or what stays short
	// and holds it.
	Says string `json:"says"`
}

// NewFit is the answer for assessment a of profile p of the model art:
// the profile's context as llama.cpp will create it.
func NewFit(art Artifact, a *plan.Assessment, p plan.Profile) Fit {
	if a != nil && a.Resolved != nil {
		p.Ctx = a.Resolved.NCtx
	}
	if art.Files == nil {
		art.Files = []source.ArtifactFile{}
	}
	return Fit{Artifact: art, Program: p.Program.OrServer(), Profile: p, Assessment: a}
}
