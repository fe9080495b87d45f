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

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

// engineCheck runs the engine check for fit and plan --verify.
func engineCheck(ctx context.Context, env Env, in *modelInputs, p plan.Profile, cpu plan.Device, gpus []plan.Device, llamaServer string) (*engine.Check, error) {
	if in.Header == nil {
		return nil, errors.New("a catalog variant is planned from derived inputs, with no header to give llama.cpp; verify its Hub file (hf:...) instead")
	}
	bin, err := engine.FindFitParams(llamaServer, nil)
	if err != nil {
		return nil, err
	}
	return launch.EngineCheck(ctx, source.NewClient(env.Getenv), bin, in.Header, in.Arch, p, cpu, gpus)
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
	load := "this load"
	if len(c.Without) > 0 {
		load = "this load without " + strings.Join(c.Without, ", ") + ", which it does not take"
	}
	fmt.Fprintf(w, "\n%s\n", wrap(fmt.Sprintf("engine check: %s's projection of %s, beside headroom's (MiB, rounded down as llama.cpp prints them): %s", c.Engine, load, verdict), "", "  ", textWidth))
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
