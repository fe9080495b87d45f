package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/llamaflags"

	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/request"
)

// notHere is a modeled llama.cpp flag a command does not take, with the
// reason, so the error says why rather than "not defined".
// Whether it takes a value is llama.cpp's table's word; the name keeps
// each one apart in help.
type notHere struct {
	name, why string
	noValue   bool
}

func (n notHere) String() string   { return "" }
func (n notHere) IsBoolFlag() bool { return n.noValue }
func (n notHere) Set(string) error { return errors.New(n.why) }

// whyServeCompanions is why serve takes no projector or draft flags.
const whyServeCompanions = "serve loads the projector and draft a catalog entry names (and pulls them with it); " +
	"for files of your own, headroom plan MODEL --mmproj FILE -md FILE counts them and prints the llama-server command to run"

// whyServeAPISpec: serve-api's flags apply to every model it serves,
// and a draft is one model's.
const whyServeAPISpec = "serve-api's flags apply to every model it serves, and only some can draft (an MTP head, a -md model): " +
	"headroom serve MODEL --spec-type draft-mtp runs one model drafting (docs/speculative.md)"

// refuseHere registers names as flags that fail with why.
func refuseHere(fs *flags, why string, names ...string) {
	// The tables are embedded and held by TestEveryFlagClassified; were
	// they unreadable, each name would only be taken as wanting a value.
	tb, _ := llamaflags.Union()
	for _, n := range names {
		noValue := false
		if tb != nil {
			if e := tb.Lookup("--" + n); e != nil {
				noValue = e.Values == 0
			}
		}
		fs.Var(notHere{name: n, why: why, noValue: noValue}, n, "not taken here: "+why)
	}
}

// profileFlags registers fit's flags for the profile it checks (every
// modeled llama.cpp flag and --program) and returns a function that
// builds the profile after parsing: the program's own defaults where
// its flags were not given.
func profileFlags(fs *flags) func() (plan.Profile, error) {
	r := fs.llamaFlags(false)
	program := programFlag(fs)
	return func() (plan.Profile, error) {
		pr, err := plan.ParseProgram(*program)
		if err != nil {
			return plan.Profile{}, usagef("--program: %v", err)
		}
		p, err := r.ProgramProfile(pr, fs.line.PassWords())
		return p, asUsage(err)
	}
}

// llamaFlags registers every modeled llama.cpp flag (request.Register)
// on the command's flag set; search is for the commands that search.
func (f *flags) llamaFlags(search bool) *request.Llama {
	f.llama = request.Register(request.Flags{FlagSet: f.FlagSet}, search)
	return f.llama
}

// mlockLoads applies the build's --mlock rule (request.Llama.MlockLoads).
func (f *flags) mlockLoads(p *plan.Profile, rules builds.Rules) {
	if f.llama != nil {
		f.llama.MlockLoads(p, rules)
	}
}

// asUsage makes a request's error a command-line error (exit 2).
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return usagef("%v", err)
}

// loadMachine reads --machine, or probes this machine when it is empty.
// llamaServer is the llama-server asked for its devices (--list-devices):
// the one the user named with --llama-server, or "" for the one on PATH. A
// GPU build given only by flag sees devices the one on PATH may not.
func loadMachine(ctx context.Context, env Env, ref, llamaServer string) (*hw.Snapshot, error) {
	if ref != "" {
		s, err := hw.LoadMachine(ref)
		if err != nil {
			return nil, inputError{fmt.Errorf("--machine: %w", err)}
		}
		return s, nil
	}
	return env.probe(ctx, probeOptions(env, llamaServer, false))
}

// llamaServerFlag is --llama-server for the commands that probe this
// machine: the build whose devices the plan is for.
func llamaServerFlag(fs *flags) *string {
	return fs.String("llama-server", "", "the llama-server `program` to plan for: asked for its devices (--list-devices); default: llama-server on PATH")
}
