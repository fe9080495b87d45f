package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

// engineCheck runs the engine check for fit --verify: the user's
// llama-fit-params projects the load of the model's own file without
// allocating, and headroom's accounting of the same context is set beside
// it. llama-fit-params creates its context as a library caller does, with
// one output row per token of the batch, so headroom accounts that
// context for the comparison (the model and context figures are the
// server's; only compute differs).
// A remote model is checked before any byte of its weights moves: the
// projection runs on a sparse twin, its header bytes then a hole up to
// its size, removed afterwards.
func engineCheck(ctx context.Context, env Env, in *modelInputs, p plan.Profile, snap *hw.Snapshot, llamaServer string) (*engine.Check, error) {
	h := in.Header
	if h == nil {
		return nil, errors.New("a catalog variant is planned from derived inputs, with no header to give llama.cpp; verify its Hub file (hf:...) instead")
	}
	if c := p.Companions; c != nil && (c.Projector != nil || c.Draft != nil) {
		return nil, errors.New("--verify checks the model alone: leave out --mmproj and -md")
	}
	server := llamaServer
	if server == "" {
		if s, err := engine.Find("", nil); err == nil {
			server = s
		}
	}
	bin, err := engine.FindFitParams(server, nil)
	if err != nil {
		return nil, err
	}
	q := p
	q.OutputsMax = max(q.Batch, 1)
	cpu, gpus := plan.Devices(snap)
	r, err := plan.Account(in.Arch, q, cpu, gpus)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "headroom-twin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	paths, err := source.NewClient(env.Getenv).WriteTwin(ctx, h, dir)
	if err != nil {
		return nil, err
	}
	rows, _, err := engine.Project(ctx, bin, paths[0], q.Args(), os.Environ())
	if err != nil {
		return nil, err
	}
	c := engine.Compare(bin, rows, r.Buffers, cpu.Name)
	return &c, nil
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
	return fs.String("engine", "", "the llama.cpp `build` you will run: a llama-server program (asked for --version) or a commit; the figures are for the build headroom models, and the output says what is known to differ for yours; default: --llama-server's build when given")
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
		// A release tag names a commit headroom cannot look up offline:
		// said as a build it has not measured, not guessed.
		return engine.Note("", c), nil
	}
	return engine.EngineNote{}, usagef("--engine %q: want a llama-server program, a commit (seven or more hex digits) or a release tag bNNNN", engineArg)
}
