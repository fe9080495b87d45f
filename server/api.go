package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

// capabilities are the ones catalog entries declare.
func capabilities() []string { return catalog.Capabilities() }

// presets lists the machines a request may name with machine=, for the
// panel's picker.
func (s *server) presets(w http.ResponseWriter, r *http.Request) error {
	// The panel sends its machine with every request; it changes nothing.
	if _, err := parseQuery(r, "machine"); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Presets []hw.PresetInfo `json:"presets"`
	}{hw.Presets()})
	return nil
}

func (s *server) hw(w http.ResponseWriter, r *http.Request) error {
	m, err := s.machineOnly(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m.snap)
	return nil
}

// fitJSON is what 'headroom fit --json' prints less the engine note and
// --verify's engine check, which the API does not run; its artifact names
// a catalog variant's inputs as variant and provenance.
type fitJSON struct {
	Artifact artifact `json:"artifact"`
	// Program is the llama.cpp program the profile is for.
	Program plan.Program `json:"program"`
	Profile plan.Profile `json:"profile"`
	*plan.Assessment
}

func (s *server) fit(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "model", "machine", "ctx", "parallel", "ngl", "ctk", "ctv", "fa", "ts", "ncmoe", "program", "cram", "ctxcp", "cms")
	if err != nil {
		return err
	}
	ref, p, err := fitProfile(q)
	if err != nil {
		return err
	}
	p.Rules = s.cfg.Rules
	m, res, pr, done, err := s.subject(r.Context(), q, ref)
	if err != nil {
		return err
	}
	defer done()
	if pr != nil && !p.Program.IsServer() {
		return withStatus(http.StatusBadRequest, res.archErr, "llama.cpp's own projection of %s is taken for llama-server only", ref)
	}
	var a *plan.Assessment
	if pr != nil {
		a, err = pr.Assess(r.Context(), p, m.snap)
	} else {
		a, err = plan.Assess(res.m, res.archErr, p, m.snap)
	}
	if err != nil {
		return withStatus(http.StatusBadRequest, err, "cannot assess %s with this profile", ref)
	}
	if a.Resolved != nil {
		p.Ctx = a.Resolved.NCtx // as llama.cpp will create it
	}
	writeJSON(w, http.StatusOK, fitJSON{Artifact: res.artifact, Program: p.Program, Profile: p, Assessment: a})
	return nil
}

// fitProfile reads the model and the serving profile, with the CLI's
// defaults (engine.ServerDefaults): what is not given is what
// llama-server would run, or the program that program names.
func fitProfile(q *query) (string, plan.Profile, error) {
	p := engine.ServerDefaults()
	p.Program = program(q)
	if !p.Program.IsServer() {
		p = p.Program.Defaults()
	}
	ref, ok := q.str("model")
	if !ok && q.err == nil {
		q.fail("model is required: a catalog variant such as qwen3-8b/Q4_K_M")
	}
	p.Ctx = q.intIn("ctx", 0, 0, maxCtx)
	if _, given := q.v["parallel"]; given {
		p.Parallel, p.KVUnified = q.intIn("parallel", 1, 1, 256), false
	}
	switch s, _ := q.str("ngl"); s {
	case "", "all", "auto":
		// Without --fit, llama.cpp's auto offloads every layer.
		p.GPULayers = plan.GPULayersAuto
	default:
		p.GPULayers = q.intIn("ngl", plan.GPULayersAuto, 0, 9999)
	}
	p.CacheK = q.oneOf("ctk", p.CacheK, engine.CacheTypes()...)
	p.CacheV = q.oneOf("ctv", p.CacheV, engine.CacheTypes()...)
	p.FlashAttn = plan.FlashAttn(q.oneOf("fa", string(p.FlashAttn), "on", "off", "auto"))
	// A plan's layer split and MoE expert placement (-ts, --n-cpu-moe),
	// so a plan can be checked, and re-checked live, as it was made.
	p.CPUMoE = q.intIn("ncmoe", 0, 0, 9999)
	if ts, ok := q.str("ts"); ok && ts != "" {
		split, err := plan.ParseTensorSplit(ts)
		if err != nil {
			q.fail("ts: %v", err)
		}
		p.TensorSplit = split
	}
	if sv, ok := p.ServingOf(); ok {
		// What llama-server keeps past the load, llama-server's
		// defaults where not given.
		sv.CacheRAM = q.intIn("cram", sv.CacheRAM, -1, 1<<24)
		sv.Checkpoints = q.intIn("ctxcp", sv.Checkpoints, 0, 1<<16)
		sv.CheckpointMinStep = q.intIn("cms", sv.CheckpointMinStep, 0, maxCtx)
		p.Serving = &sv
	} else if _, given := q.v["cram"]; given && q.err == nil {
		q.fail("cram: %s keeps no prompt cache", p.Program)
	}
	if err := p.Check(); err != nil && q.err == nil {
		q.fail("program %s: %v", p.Program, err)
	}
	return ref, p, q.err
}

// program reads the program parameter; llama-server when it is absent.
func program(q *query) plan.Program {
	names := make([]string, 0, 4)
	for _, p := range plan.Programs() {
		names = append(names, string(p))
	}
	pr, _ := plan.ParseProgram(q.oneOf("program", string(plan.ProgramServer), names...))
	return pr
}

// planJSON is the part of 'headroom plan --json' the API answers: the
// search (chosen null and explain saying why where nothing fits), its
// speed estimates, and whose projection it is for an architecture
// headroom does not model.
type planJSON struct {
	// Program is the llama.cpp program the plan is for.
	Program plan.Program `json:"program"`
	*plan.Plan
	// Command is the chosen plan's llama-server command line, as 'headroom
	// plan' prints it.
	Command []string       `json:"command,omitempty"`
	Speed   []speed.Result `json:"speed"`
	// Projected says the plan's figures are llama.cpp's own projection,
	// for an architecture headroom does not model.
	Projected string `json:"projected,omitempty"`
}

func (s *server) plan(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "model", "machine", "parallel", "min_ctx", "goal", "headless", "program", "cram")
	if err != nil {
		return err
	}
	o := plan.DefaultSearch()
	o.Base.Rules = s.cfg.Rules
	ref, ok := q.str("model")
	if !ok && q.err == nil {
		q.fail("model is required: a catalog variant such as qwen3-8b/Q4_K_M")
	}
	o.Base.Program = program(q)
	if d := o.Base.Program.Defaults(); !o.Base.Program.IsServer() {
		o.Parallel, o.Base.SWAFull = d.Parallel, d.SWAFull
	}
	o.Parallel = q.intIn("parallel", o.Parallel, 1, 256)
	o.MinCtx = q.intIn("min_ctx", o.MinCtx, 256, maxCtx)
	o.Goal = q.oneOf("goal", plan.GoalBalanced, plan.GoalBalanced, plan.GoalSpeed, plan.GoalContext)
	o.Headless = q.flag("headless")
	if _, given := q.v["cram"]; given {
		if _, serves := o.Base.ServingOf(); !serves && q.err == nil {
			q.fail("cram: %s keeps no prompt cache", o.Base.Program)
		}
		n := q.intIn("cram", 0, -1, 1<<24)
		o.Fixed.CacheRAM = &n
	}
	if q.err != nil {
		return q.err
	}
	m, res, pr, done, err := s.subject(r.Context(), q, ref)
	if err != nil {
		return err
	}
	defer done()
	if pr != nil && !o.Base.Program.IsServer() {
		return withStatus(http.StatusBadRequest, res.archErr, "llama.cpp's own projection of %s is taken for llama-server only", ref)
	}
	if pr != nil {
		p, err := engine.SearchProjected(r.Context(), *pr, m.snap, o, nil)
		if err != nil {
			return withStatus(http.StatusBadRequest, err, "llama.cpp's own projection of %s failed", ref)
		}
		writeJSON(w, http.StatusOK, planJSON{Program: o.Base.Program, Plan: p, Command: command(p, res), Speed: []speed.Result{}, Projected: engine.ProjectedSays(pr.Basics.Arch, pr.Bin)})
		return nil
	}
	if res.archErr != nil {
		return withStatus(http.StatusBadRequest, res.archErr, "model %s cannot be planned", ref)
	}
	p, err := plan.Search(res.m, m.snap, o)
	if err != nil {
		return fmt.Errorf("planning %s: %w", ref, err)
	}
	// Where nothing fits the CLI fails; the API answers the search
	// itself (chosen null, explain saying why), which a client can show.
	out := planJSON{Program: o.Base.Program, Plan: p, Command: command(p, res), Speed: []speed.Result{}}
	if c := p.Chosen; c != nil {
		// As the CLI's plan reports it: an empty context, and one slot's
		// context full.
		cpu, gpus := plan.Devices(m.snap)
		out.Speed = s.calibration(m.snap).EstimateProfile(res.m, c.Profile, cpu, gpus, m.snap, 0, c.CtxPerSlot)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// command is the chosen plan's llama-server command line; nil where
// nothing fits or the model has no name llama-server could load.
func command(p *plan.Plan, res *resolved) []string {
	if p.Chosen == nil || res.serverArgs == nil {
		return nil
	}
	return p.Chosen.Command(res.serverArgs)
}

// recommendJSON is what 'headroom recommend --json' prints less the
// engine note.
type recommendJSON struct {
	Goal    string        `json:"goal"`
	Machine string        `json:"machine"`
	Speed   string        `json:"speed"`
	Rows    []catalog.Row `json:"configurations"`
}

func (s *server) recommend(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "machine", "goal", "min_ctx", "parallel", "capability", "license")
	if err != nil {
		return err
	}
	o := catalog.DefaultOptions()
	o.Rules = s.cfg.Rules
	o.Goal = q.oneOf("goal", o.Goal, catalog.Goals()...)
	o.MinCtx = q.intIn("min_ctx", o.MinCtx, 256, maxCtx)
	o.Parallel = q.intIn("parallel", o.Parallel, 1, 256)
	o.Capabilities = q.list("capability", capabilities()...)
	o.Licenses = q.list("license", licenses(s.cfg.Catalog)...)
	if q.err != nil {
		return q.err
	}
	m, err := s.machine(r.Context(), q)
	if err != nil {
		return err
	}
	o.Cache, o.Build, o.Calibration = &s.plans, "this server", s.calibration(m.snap)
	rows, err := catalog.Recommend(s.cfg.Catalog, s.cfg.Lock, m.snap, o)
	if err != nil {
		return fmt.Errorf("ranking the catalog: %w", err)
	}
	if rows == nil {
		rows = []catalog.Row{}
	}
	writeJSON(w, http.StatusOK, recommendJSON{Goal: o.Goal, Machine: m.name,
		Speed: catalog.SpeedSays, Rows: rows})
	return nil
}

func licenses(c *catalog.Catalog) []string { return c.LicenseIDs() }

// domainName is a domain's id with its description, for a sentence.
func domainName(snap *hw.Snapshot, id string) string {
	if d := snap.Domain(id); d != nil && d.Description != "" && !strings.EqualFold(d.Description, id) {
		return fmt.Sprintf("%s (%s)", id, d.Description)
	}
	return id
}
