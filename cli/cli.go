// Package cli is headroom's command line: it parses arguments, calls the
// packages that do the work, and formats what they return. It holds no
// planning logic of its own.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/suggest"
	"github.com/headroom-llm/headroom/internal/term"
	"github.com/headroom-llm/headroom/llamaflags"
	"github.com/headroom-llm/headroom/request"
)

// Env is what a command may see of the process: its output streams and its
// environment. Tests fill it in; main passes the real ones.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Probe takes this machine's snapshot; nil is hw.Probe. Tests give
	// a machine of their own (a fixture, a fake bandwidth measurer).
	Probe func(context.Context, hw.ProbeOptions) (*hw.Snapshot, error)
}

func (env Env) probe(ctx context.Context, o hw.ProbeOptions) (*hw.Snapshot, error) {
	if env.Probe != nil {
		return env.Probe(ctx, o)
	}
	return hw.Probe(ctx, o)
}

// probeOptions are the probe's options for this process: the llama-server
// asked for its devices, the real bandwidth measurer, and the figures it
// measured before, kept in the user's cache directory by hardware.
func probeOptions(env Env, llamaServer string, remeasure bool) hw.ProbeOptions {
	o := hw.ProbeOptions{LlamaServer: llamaServer, MeasureBandwidth: hw.MeasureBandwidth, Remeasure: remeasure}
	if dir := cacheDir(env, "bandwidth"); dir != "" {
		o.Bandwidth = bandwidthStore{dirCache{dir: dir}}
	}
	return o
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env Env, args []string) error
}

func commands() []command {
	return []command{
		{"inspect", "read a model's GGUF header (local, URL or Hugging Face) and describe it", runInspect},
		{"fit", "compute every buffer llama.cpp would allocate and say whether it fits", runFit},
		{"plan", "find the best slots, context, GPU layers and cache type, as llama-server flags", runPlan},
		{"bench", "measure this machine's speed with llama-bench on small reference models and calibrate the estimate to it", runBenchCmd},
		{"synth", "write a sparse GGUF shaped like a real model, for tests and demos", runSynth},
		{"hw", "show this machine's memory domains and llama.cpp devices, or a preset's", runHW},
		{"recommend", "rank the catalog's models for this machine: what fits, how to run it, what does not and why", runRecommend},
		{"pull", "download a model into the store, only after assessing that it fits; resumes, verifies sha256", runPull},
		{"serve", "assess, pull, admit and start llama-server with the plan; ready only after a real completion", runServe},
		{"serve-api", "serve the HTTP API (fit, plan, recommend, /v1/models, load/unload) and the web panel", runServeAPI},
		{"catalog", "catalog lock: pin every catalog variant to a Hub commit, sizes, sha256 and planner inputs", runCatalog},
		{"version", "print the version and source revision this headroom was built from", runVersion},
	}
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // the command line was wrong
)

// usageError marks errors in the command line, which exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// inputError marks an error in what the command line named: a model
// file that is missing, a directory, or a truncated or corrupt GGUF; a
// machine that is neither a preset nor a readable machine file. It exits
// with status 2, as a wrong command line does.
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// verdictError is a verdict other than fits, said as a command's error
// for its exit status: a sentence for a person, wrapped to the width of
// the command's other output where an ordinary error stays on one line.
type verdictError struct{ reason string }

func (e verdictError) Error() string { return e.reason }

// Main runs headroom with args (without the program name) and returns the
// process exit status.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	// Everything a command prints passes through an escaper: header
	// strings, listing names and server error bodies are written by
	// others, and a field a printer forgot must still not reach the
	// terminal as an escape sequence. JSON passes unchanged in meaning.
	for _, w := range []*io.Writer{&env.Stdout, &env.Stderr} {
		if *w != nil {
			tw := term.NewWriter(*w)
			defer tw.Flush()
			*w = tw
		}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) > 1 {
			return Main(ctx, []string{args[1], "--help"}, env)
		}
		printHelp(env.Stdout)
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, env, args[1:])
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(env.Stderr, "headroom %s: %v\nRun 'headroom %s --help' for usage.\n", c.name, err, c.name)
			return exitUsage
		}
		if ie := (inputError{}); errors.As(err, &ie) {
			fmt.Fprintf(env.Stderr, "headroom %s: %s\n", c.name, term.Text(oneLine(err.Error())))
			return exitUsage
		}
		if ve := (verdictError{}); errors.As(err, &ve) {
			fmt.Fprintln(env.Stderr, wrap(term.Text(oneLine(ve.reason)), "headroom "+c.name+": ", "  ", textWidth))
			return exitError
		}
		fmt.Fprintf(env.Stderr, "headroom %s: %s\n", c.name, term.Text(oneLine(err.Error())))
		return exitError
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	mean := ""
	if s := suggest.Closest(args[0], names); s != "" {
		mean = fmt.Sprintf(" (did you mean %s?)", s)
	}
	fmt.Fprintf(env.Stderr, "headroom: unknown command %q%s\nRun 'headroom help' for the list of commands.\n", args[0], mean)
	return exitUsage
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, `headroom tells you whether a local LLM will fit your machine, and how to
run it with llama.cpp, before you download it.

Usage:
  headroom <command> [arguments]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintln(w, wrap(c.summary, fmt.Sprintf("  %-9s ", c.name), strings.Repeat(" ", 12), textWidth))
	}
	fmt.Fprint(w, `
Models are named by a local path, an https:// URL, or a Hugging Face
reference: hf:owner/repo/file.gguf[@revision] or hf:owner/repo:QUANT.

Run 'headroom <command> --help' for a command's flags and examples.
`)
}

func runVersion(_ context.Context, env Env, args []string) error {
	fs := newFlags(env, "version", "", `
Prints the module version and the VCS revision this program was built
from, as the Go toolchain recorded them (also: headroom --version).`)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("version takes no arguments, got %q", pos)
	}
	fmt.Fprintln(env.Stdout, "headroom "+version())
	return nil
}

// oneLine keeps an error message on one line, so scripts can grep it.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// flags is a command's flag set with its help text.
type flags struct {
	*flag.FlagSet
	env   Env
	usage string
	about string
	// line is the command line as llamaflags read it: the flags passed
	// through to llama.cpp, the program a pasted line named.
	line llamaflags.Line
	// llama is the modeled llama.cpp flags, where the command takes them.
	llama *request.Llama
}

// newFlags makes a flag set for a command. Parse errors are reported once,
// by Main; --help prints the usage line, the description and the flags.
func newFlags(env Env, name, usage, about string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flags{FlagSet: fs, env: env, usage: usage, about: about}
}

func (f *flags) printHelp() {
	w := f.env.Stdout
	fmt.Fprintf(w, "Usage: headroom %s %s\n\n%s\n", f.Name(), f.usage, strings.TrimSpace(f.about))
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		f.printFlags(w)
	}
}

// isSet reports whether the command line gave the flag under any of the
// names (a flag's spellings).
func (f *flags) isSet(names ...string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || slices.Contains(names, fl.Name) })
	return set
}

// parseModel parses a command that takes exactly one MODEL argument.
func (f *flags) parseModel(args []string) (string, error) {
	pos, err := f.parseModels(args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usagef("need exactly one MODEL, got %d arguments", len(pos))
	}
	return pos[0], nil
}

// parseModels is parseModel for a command that may take several models.
func (f *flags) parseModels(args []string) ([]string, error) {
	if err := f.split(args); err != nil {
		return nil, err
	}
	pos, err := f.parse(f.line.Own)
	if err != nil {
		return nil, err
	}
	if err := f.pastedProgram(); err != nil {
		return nil, err
	}
	return pos, nil
}

// parse parses flags that may come before, between or after positional
// arguments (headroom inspect MODEL --json), which the flag package alone
// does not allow. A lone "--" ends the flags.
func (f *flags) parse(args []string) ([]string, error) {
	var pos, rest []string
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.printHelp()
				return nil, err
			}
			return nil, f.parseError(err)
		}
		args = f.Args()
		if len(args) == 0 {
			return append(pos, rest...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
