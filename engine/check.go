package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/lookpath"
	"github.com/headroom-llm/headroom/llamaflags"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/plan"
)

// The engine check asks the user's own llama.cpp what a load would take,
// without loading: llama-fit-params loads the model and creates the
// context with no_alloc (no weight is read, no buffer allocated) and
// prints llama.cpp's memory breakdown of the projection, which is exact
// for that build and that device. headroom sets its own accounting of the
// same context beside it.

// CheckTimeout bounds one projection; a 70B header projects in well
// under a second on the CPU build.
const CheckTimeout = 60 * time.Second

// FindFitParams returns the llama-fit-params that belongs to llamaServer
// (the program beside it, as llama.cpp's builds install them together;
// "" is the llama-server on PATH), else the one on PATH.
func FindFitParams(llamaServer string, lookPath func(string) (string, error)) (string, error) {
	return FindTool("llama-fit-params", llamaServer, lookPath)
}

// FindTool returns the llama.cpp program name that belongs to
// llamaServer: the one beside it, as llama.cpp's builds install them
// together ("" is the llama-server on PATH), else the one on PATH.
func FindTool(name, llamaServer string, lookPath func(string) (string, error)) (string, error) {
	if lookPath == nil {
		lookPath = lookpath.LookPath
	}
	if llamaServer == "" {
		// A llama-server that cannot be run (found through a relative
		// PATH entry) has no tools beside it worth running either.
		if p, err := lookPath("llama-server"); err == nil {
			llamaServer = p
		}
	}
	if llamaServer != "" {
		p := filepath.Join(filepath.Dir(llamaServer), name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := lookPath(name)
	if errors.Is(err, lookpath.ErrRelative) {
		return "", fmt.Errorf("%s not found beside %q, and on PATH %w", name, llamaServer, err)
	}
	if err != nil {
		return "", fmt.Errorf("%s not found beside %q or on PATH (it is built with llama-server: cmake --build build --target %s): %w", name, llamaServer, name, ErrNotFound)
	}
	return p, nil
}

// Project runs llama-fit-params on model with the serving flags args and
// returns its memory breakdown of the load as given (the projection of
// the initial parameters, printed before it fits anything) and its
// log. The flags should carry -c and -ngl: with them set and --fit off
// left out, llama-fit-params only reports.
func Project(ctx context.Context, fitParams, model string, args []string, env []string) ([]BreakdownRow, []string, error) {
	return project(ctx, fitParams, model, args, env, "4")
}

// project runs llama-fit-params at a log verbosity: 4 prints the
// breakdown, 5 (-v) also the context llama_context created.
func project(ctx context.Context, fitParams, model string, args []string, env []string, verbosity string) ([]BreakdownRow, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	argv := append([]string{"-m", model}, withoutFitFlags(args)...)
	argv = append(argv, "-lv", verbosity)
	cmd := exec.CommandContext(ctx, fitParams, argv...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	rows, perr := ParseBreakdown(lines)
	if perr != nil {
		return nil, lines, perr
	}
	if len(rows) == 0 {
		tail := lines[max(len(lines)-3, 0):]
		if err == nil {
			err = errors.New("exited without a memory breakdown")
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %s", CheckTimeout)
		}
		return nil, lines, fmt.Errorf("llama-fit-params %s: %w (last lines: %s)", strings.Join(argv, " "), err, strings.Join(tail, " | "))
	}
	// The first breakdown is of the parameters as given; a fit that
	// changes them prints more.
	return firstBreakdown(rows), lines, nil
}

// withoutFitFlags gives llama-fit-params only the flags its own argument
// table takes (llamaflags): not --fit (llama-fit-params is the fit), not
// what llama-server keeps past the load (-cram, -ctxcp, -cms), which it
// refuses ("invalid argument: -cram") and which change nothing it
// projects, not -kvu (see FitParamsProfile) and not a flag passed through
// to llama-server.
func withoutFitFlags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--fit" || args[i] == "-fit" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	tb, err := llamaflags.Union()
	if err != nil {
		return out
	}
	kept, _ := tb.Only(llamaflags.FitParams, out)
	return kept
}

// FitParamsProfile is the profile llama-fit-params can be asked to
// project in p's stead: it has no -kvu (its table lacks it, and so does
// its environment's LLAMA_ARG_KV_UNIFIED), so its contexts keep one KV
// stream per sequence. A unified cache of the same cells holds the same
// bytes; headroom accounts the projected context as it is for the
// comparison.
func FitParamsProfile(p plan.Profile) plan.Profile {
	tb, err := llamaflags.Union()
	if err != nil {
		return p
	}
	if e := tb.Lookup("-kvu"); e != nil && !e.Accepts(llamaflags.FitParams) {
		p.KVUnified = false
	}
	if e := tb.Lookup("--embedding"); p.Embedding != nil && e != nil && !e.Accepts(llamaflags.FitParams) {
		p.Embedding = nil
	}
	if e := tb.Lookup("--spec-type"); p.Spec != nil && e != nil && !e.Accepts(llamaflags.FitParams) {
		p.Spec = nil
	}
	return p
}

// FitParamsLeavesOut names the flags of asked that change memory and
// that given (its FitParamsProfile) lost: llama-fit-params does not take
// them, so its projection is of the load without them.
func FitParamsLeavesOut(asked, given plan.Profile) []string {
	var out []string
	if asked.Embedding != nil && given.Embedding == nil {
		out = append(out, "--embedding")
	}
	if asked.Spec != nil && given.Spec == nil {
		out = append(out, "--spec-type")
	}
	return out
}

// firstBreakdown is the rows of the first table: a name seen again
// starts the next one.
func firstBreakdown(rows []BreakdownRow) []BreakdownRow {
	seen := map[string]bool{}
	for i, r := range rows {
		if seen[r.Name] {
			return rows[:i]
		}
		seen[r.Name] = true
	}
	return rows
}

// CheckCell is one figure of one row from both sides, in MiB as
// llama.cpp prints them (rounded down).
type CheckCell struct {
	Row      string `json:"row"`
	Part     string `json:"part"` // model, context or compute
	Engine   int64  `json:"engine_mib"`
	Headroom int64  `json:"headroom_mib"`
	Agrees   bool   `json:"agrees"`
}

// Check is the engine check's answer.
type Check struct {
	Engine string      `json:"engine"`
	Cells  []CheckCell `json:"cells"`
	Agrees bool        `json:"agrees"`
	// Without are the flags of the checked profile that llama-fit-params
	// does not take (FitParamsLeavesOut): both sides are of the load
	// without them.
	Without []string `json:"without,omitempty"`
}

// Compare sets headroom's accounting of the projected load beside the
// engine's breakdown. Model and context agree within the printed
// rounding (1 MiB); compute within the accounting bounds
// (ComputeWithin), since its figure is a replay of the allocator. A row
// only one side has disagrees.
func Compare(engineName string, rows []BreakdownRow, planned []plan.Buffer, cpu string) Check {
	ours := ProjectBreakdown(planned, cpu)
	c := Check{Engine: engineName, Agrees: true}
	names := map[string]bool{}
	theirs := map[string]BreakdownRow{}
	for _, r := range rows {
		names[r.Name], theirs[r.Name] = true, r
	}
	for n := range ours {
		names[n] = true
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		t, ok := theirs[n]
		o := ours[n]
		if o == nil {
			o = &BreakdownRow{Name: n}
		}
		for _, part := range []struct {
			name    string
			e       int64
			h       int64
			compute bool
		}{{"model", t.Model, o.Model, false}, {"context", t.Context, o.Context, false}, {"compute", t.Compute, o.Compute, true}} {
			h := part.h >> 20
			if !ok && h == 0 {
				continue
			}
			agrees := ok && (abs64(h-part.e) <= 1 || part.compute && ComputeWithin(part.h, part.e<<20))
			c.Cells = append(c.Cells, CheckCell{Row: n, Part: part.name, Engine: part.e, Headroom: h, Agrees: agrees})
			c.Agrees = c.Agrees && agrees
		}
	}
	return c
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Beyond is what llama.cpp's projection counts beyond headroom's
// accounting, one Row per figure that disagrees with the engine's larger:
// BufferType is the device the row belongs to (the host rows, "Host" and
// the CPU's extra buffer types, are cpu's), Kind the part (model, kv for
// context, compute) and DiffBytes the difference in whole MiB as printed.
// A figure where the engine counts less is left out: the plan's larger
// figure is the safe one there.
func (c Check) Beyond(cpu string) []Row {
	var out []Row
	for _, cell := range c.Cells {
		if cell.Agrees || cell.Engine <= cell.Headroom {
			continue
		}
		dev := cell.Row
		if dev == "Host" || extraCPUBuffers[dev] {
			dev = cpu
		}
		kind := cell.Part
		if kind == "context" {
			kind = string(plan.KindKV)
		}
		out = append(out, Row{BufferType: dev, Kind: kind, DiffBytes: (cell.Engine - cell.Headroom) << 20, LoggedMiB: float64(cell.Engine)})
	}
	return out
}
