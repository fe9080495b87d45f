package server

import (
	"fmt"
	"github.com/headroom-llm/headroom/report"
	"net/http"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/llamaflags"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/request"
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

func (s *server) fit(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "model", "machine", "ctx", "parallel", "ngl", "ctk", "ctv", "fa", "ts", "ncmoe", "program", "cram", "ctxcp", "cms", "args")
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
	out := report.NewFit(res.artifact, a, p)
	if s.cfg.Pool != nil && m.preset == "" && a.Verdict == plan.DoesNotFit {
		// On this machine as it is, the provider's models hold memory
		// it would give back for this one.
		out.MakeRoom = s.cfg.Pool.makeRoom(ref, a)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// fitProfile reads the model and the serving profile. The profile's
// parameters are llama.cpp's flags under the API's names (ctx is -c,
// parallel -np, ...), and args is a llama.cpp command line of its own
// (args=-c 8192 -ctk q8_0 --jinja); both are read by the CLI's one reader
// of those flags (request.ParseProfile), so the API takes what fit takes
// and means the same by it.
func fitProfile(q *query) (string, plan.Profile, error) {
	ref, ok := q.str("model")
	if !ok && q.err == nil {
		q.fail("model is required: a catalog variant such as qwen3-8b/Q4_K_M")
	}
	pr := program(q)
	var args []string
	if line, ok := q.str("args"); ok {
		words, err := llamaflags.ShellWords(line)
		if err != nil {
			q.fail("args: %v", err)
		}
		args = words
	}
	// Each parameter is checked for its JSON type and range here, then
	// given to the reader as the flag it names.
	for _, f := range []struct {
		param, flag string
		lo, hi      int
	}{{"ctx", "-c", 0, maxCtx}, {"parallel", "-np", 1, 256}, {"ncmoe", "-ncmoe", 0, 9999},
		{"cram", "-cram", -1, 1 << 24}, {"ctxcp", "-ctxcp", 0, 1 << 16}, {"cms", "-cms", 0, maxCtx}} {
		if _, given := q.v[f.param]; given {
			args = append(args, f.flag, strconv.Itoa(q.intIn(f.param, 0, f.lo, f.hi)))
		}
	}
	if s, _ := q.str("ngl"); s != "" && s != "all" && s != "auto" {
		args = append(args, "-ngl", strconv.Itoa(q.intIn("ngl", 0, 0, 9999)))
	}
	for _, f := range []struct{ param, flag string }{{"ctk", "-ctk"}, {"ctv", "-ctv"}, {"fa", "-fa"}, {"ts", "-ts"}} {
		if v, ok := q.str(f.param); ok && v != "" {
			args = append(args, f.flag, v)
		}
	}
	if q.err != nil {
		return ref, plan.Profile{}, q.err
	}
	p, err := request.ParseProfile(args, pr)
	if err != nil {
		return ref, p, badRequest("%v", err)
	}
	return ref, p, nil
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
		out := newPlanAnswer(ref, o, res, m.snap)
		out.Judge(p, res.archErr, "")
		out.Command, out.Projected = command(p, res), engine.ProjectedSays(pr.Basics.Arch, pr.Bin)
		writeJSON(w, http.StatusOK, out)
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
	out := newPlanAnswer(ref, o, res, m.snap)
	out.Judge(p, nil, "")
	out.Command = command(p, res)
	if c := p.Chosen; c != nil {
		// As the CLI's plan reports it: an empty context, and one slot's
		// context full.
		cpu, gpus := plan.Devices(m.snap)
		out.Speed = s.calibration(m.snap).EstimateProfile(res.m, c.Profile, cpu, gpus, m.snap, 0, c.CtxPerSlot)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// newPlanAnswer is the report /api/plan fills: plan --json's, without what
// only the command line runs (--verify, --bench) and without the engine
// note (/api/hw and the panel say the build).
func newPlanAnswer(ref string, o plan.SearchOptions, res *resolved, snap *hw.Snapshot) report.Plan {
	_, gpus := plan.Devices(snap)
	return report.Plan{Model: ref, Program: o.Base.Program, Inputs: res.artifact.Inputs, Speed: []speed.Result{}, Backends: plan.Backends(gpus)}
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
