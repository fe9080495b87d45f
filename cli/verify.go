package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

// engineCheck runs the engine check for fit and plan --verify.
func engineCheck(ctx context.Context, env Env, in *modelInputs, p plan.Profile, snap *hw.Snapshot, llamaServer string) (*engine.Check, error) {
	if in.Header == nil {
		return nil, errors.New("a catalog variant is planned from derived inputs, with no header to give llama.cpp; verify its Hub file (hf:...) instead")
	}
	bin, err := engine.FindFitParams(llamaServer, nil)
	if err != nil {
		return nil, err
	}
	return runEngineCheck(ctx, env, bin, in.Header, in.Arch, p, snap)
}

// runEngineCheck has the user's llama-fit-params project the load of the
// model's own file without allocating, and sets headroom's accounting of
// the same context beside it. llama-fit-params creates its context as a
// library caller does, with one output row per token of the batch, so
// headroom accounts that context for the comparison (the model and
// context figures are the server's; only compute differs). The model is
// checked alone: a projector or draft is left out on both sides. A remote
// model is checked before any byte of its weights moves: the projection
// runs on a sparse twin, its header bytes then a hole up to its size,
// removed afterwards.
func runEngineCheck(ctx context.Context, env Env, bin string, h *source.Header, m *arch.Model, p plan.Profile, snap *hw.Snapshot) (*engine.Check, error) {
	q := p
	q.OutputsMax = max(q.Batch, 1)
	q.Companions = nil
	cpu, gpus := plan.Devices(snap)
	r, err := plan.Account(m, q, cpu, gpus)
	if err != nil {
		return nil, err
	}
	pr, cleanup, err := engine.OpenProjector(ctx, source.NewClient(env.Getenv), h, nil, bin)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	rows, _, err := engine.Project(ctx, bin, pr.Model, q.Args(), pr.Env)
	if err != nil {
		return nil, err
	}
	c := engine.Compare(bin, rows, r.Buffers, cpu.Name)
	return &c, nil
}

// preflight is the engine check serve and pull run before any weight is
// downloaded, where the llama.cpp that will load the model has
// llama-fit-params beside it. Where llama.cpp's projection counts more
// than the plan, it returns those figures, which admission then charges
// (AdmitProjected before the download, Load at the load); where it counts
// less, the plan's larger figure stands (llama.cpp's projection can
// itself count what its real load does not: Gemma 3n's tied embedding,
// twice under mmap). nil when the check agrees or could not run.
func preflight(ctx context.Context, env Env, a *launch.Assessed, llamaServer string, say func(state, line string)) *launch.Projected {
	if a == nil || a.Chosen() == nil || a.Model == nil || a.Model.Header == nil || a.Model.Arch == nil {
		return nil
	}
	bin, err := engine.FindFitParams(llamaServer, nil)
	if err != nil {
		say("checking", "no llama-fit-params beside llama-server or on PATH: the plan is headroom's accounting alone")
		return nil
	}
	c, err := runEngineCheck(ctx, env, bin, a.Model.Header, a.Model.Arch, a.Chosen().Profile, a.Snapshot)
	if err != nil {
		say("checking", "llama.cpp's own projection could not be had: "+oneLine(err.Error()))
		return nil
	}
	if c.Agrees {
		say("checking", fmt.Sprintf("llama.cpp's own projection (%s) agrees with the plan on every buffer", c.Engine))
		return nil
	}
	var diffs []string
	for _, cell := range c.Cells {
		if !cell.Agrees {
			diffs = append(diffs, fmt.Sprintf("%s %s: llama.cpp %d MiB, headroom %d MiB", cell.Row, cell.Part, cell.Engine, cell.Headroom))
		}
	}
	cpu, _ := plan.Devices(a.Snapshot)
	p := &launch.Projected{By: c.Engine, Rows: c.Beyond(cpu.Name)}
	if len(p.Rows) == 0 {
		say("checking", "llama.cpp's own projection differs from the plan ("+strings.Join(diffs, "; ")+"), counting less than headroom: the plan's figures stand")
		return nil
	}
	say("checking", "llama.cpp's own projection differs from the plan ("+strings.Join(diffs, "; ")+"); admission charges its larger figures ("+p.Says()+")")
	return p
}

// printCheck prints the engine check's table.
func printCheck(w io.Writer, c *engine.Check) {
	verdict := "agrees"
	if !c.Agrees {
		// Not "llama.cpp is right": its projection can count what its
		// real load does not (Gemma 3n's tied embedding twice, under
		// mmap), and the load's own log is the final word.
		verdict = "DIFFERS on the rows marked: llama.cpp's own --fit plans with its figures; 'headroom serve --check' compares with a real load"
	}
	fmt.Fprintf(w, "\nengine check: %s's projection of this load, beside headroom's (MiB, rounded down as llama.cpp prints them): %s\n", c.Engine, verdict)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tpart\tllama.cpp\theadroom\t\t")
	for _, cell := range c.Cells {
		mark := ""
		if !cell.Agrees {
			mark = "differs"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t\n", cell.Row, cell.Part, cell.Engine, cell.Headroom, mark)
	}
	tw.Flush()
}

// engineFlag is --engine: the llama.cpp build the user will run, to be
// told which build the figures are for and what is known to differ.
func engineFlag(fs *flags) *string {
	return fs.String("engine", "", "the llama.cpp `build` you will run: a llama-server program (asked for --version), a commit, or a release tag bNNNN; a build headroom measured gets its own figures, any other with a build number the rules its number implies (said to be estimates); default: --llama-server's build when given, else the newest build headroom measured")
}

// startedEngine is the note of the llama-server a command starts, whose
// build the plan follows; an --engine naming another build is refused
// rather than planned for a build that will not load the model.
func startedEngine(ctx context.Context, engineArg string, build engine.Build) (engine.EngineNote, error) {
	note := engine.BuildNote(build)
	if engineArg == "" {
		return note, nil
	}
	want, err := engineNote(ctx, engineArg, "")
	if err != nil {
		return note, err
	}
	if want.FiguresFor != note.FiguresFor || want.Rules != note.Rules {
		return note, usagef("--engine %s: figures for it would be %s's, but the llama-server started here is %s (%s); drop --engine, or give that build's llama-server with --llama-server", engineArg, want.FiguresFor, build, note.FiguresFor)
	}
	return note, nil
}

// engineNote resolves --engine (or --llama-server) into the note every
// result carries.
func engineNote(ctx context.Context, engineArg, llamaServer string) (engine.EngineNote, error) {
	switch {
	case engineArg == "" && llamaServer == "":
		return engine.Note("", ""), nil
	case engineArg == "":
		return engine.AskNote(ctx, llamaServer), nil
	}
	if st, err := os.Stat(engineArg); err == nil && !st.IsDir() {
		return engine.AskNote(ctx, engineArg), nil
	}
	c := strings.ToLower(strings.TrimSpace(engineArg))
	switch {
	case len(c) >= 7 && strings.Trim(c, "0123456789abcdef") == "":
		return engine.Note(c, c), nil
	case len(c) > 1 && c[0] == 'b' && strings.Trim(c[1:], "0123456789") == "":
		// A release tag is a build number: the figures follow the rules
		// it implies, said to be estimates.
		n, err := strconv.Atoi(c[1:])
		if err != nil {
			return engine.EngineNote{}, usagef("--engine %q: %v", engineArg, err)
		}
		return engine.BuildNote(engine.Build{Number: n}), nil
	}
	return engine.EngineNote{}, usagef("--engine %q: want a llama-server program, a commit (seven or more hex digits) or a release tag bNNNN", engineArg)
}
