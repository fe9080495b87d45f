package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// gpuLayers is -ngl: a number, auto or all.
type gpuLayers struct{ n int }

// gpuLayersAll is -ngl all, every layer: a value of the flag's own, which
// each command maps onto the plan's (auto for fit, 999 for a search).
const gpuLayersAll = -2

func (g *gpuLayers) String() string {
	switch g.n {
	case plan.GPULayersAuto:
		return "auto"
	case gpuLayersAll:
		return "all"
	}
	return strconv.Itoa(g.n)
}

func (g *gpuLayers) Set(s string) error {
	switch s {
	case "auto":
		g.n = plan.GPULayersAuto
	case "all":
		g.n = gpuLayersAll
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("want a number of layers, auto or all, not %q", s)
		}
		g.n = n
	}
	return nil
}

// floats is -ts: comma-separated proportions.
type floats []float64

func (f *floats) String() string { return fmt.Sprint([]float64(*f)) }

func (f *floats) Set(s string) error {
	split, err := plan.ParseTensorSplit(s)
	*f = split
	return err
}

// overrides collects -ot values, which may be given more than once.
type overrides []plan.Override

func (o *overrides) String() string { return "" }

func (o *overrides) Set(s string) error {
	parsed, err := plan.ParseOverrides(s)
	*o = append(*o, parsed...)
	return err
}

// overrideFlags registers -ot under its names.
func overrideFlags(fs *flags) *overrides {
	ot := &overrides{}
	fs.Var(ot, "ot", "PATTERN=BUFFER_TYPE,...: weights whose name the regular expression matches go to that buffer type (CPU, CUDA0, Vulkan0, MTL0, ...); first match wins; may be repeated")
	fs.alias("ot", "override-tensor")
	return ot
}

// fitOff is llama-server's --fit, which headroom's flags always turn off:
// with it on llama.cpp rewrites -c and -ngl at load, and the verdict would
// be for a placement that never runs.
type fitOff struct{}

func (fitOff) String() string { return "" }
func (fitOff) Set(v string) error {
	switch strings.ToLower(v) {
	case "off", "false", "0", "disabled":
		return nil
	}
	return fmt.Errorf("--fit %s: only --fit off is modeled: llama.cpp's own fit rewrites -c and -ngl at load, so a verdict for these flags would be for a placement that never runs (headroom plan searches instead)", v)
}

// notHere is a modeled llama.cpp flag a command does not take, with the
// reason, so the error says why rather than "not defined".
type notHere struct{ name, why string }

func (n notHere) String() string { return "" }
func (n notHere) IsBoolFlag() bool {
	return strings.HasPrefix(n.name, "no-") || n.name == "mmproj-offload"
}
func (n notHere) Set(string) error { return errors.New(n.why) }

// whyServeCompanions is why serve takes no projector or draft flags.
const whyServeCompanions = "serve loads the projector and draft a catalog entry names (and pulls them with it); " +
	"for files of your own, headroom plan MODEL --mmproj FILE -md FILE counts them and prints the llama-server command to run"

// refuseHere registers names as flags that fail with why.
func refuseHere(fs *flags, why string, names ...string) {
	for _, n := range names {
		fs.Var(notHere{n, why}, n, "not taken here: "+why)
	}
}

// profileFlags registers fit's flags for the profile it checks (every
// modeled llama.cpp flag and --program) and returns a function that
// builds the profile after parsing: the program's own defaults where
// its flags were not given.
func profileFlags(fs *flags) func() (plan.Profile, error) {
	req := requestFlags(fs, false)
	program := programFlag(fs)
	return func() (plan.Profile, error) {
		p, err := req()
		if err != nil {
			return p, err
		}
		pr, err := plan.ParseProgram(*program)
		if err != nil {
			return p, usagef("--program: %v", err)
		}
		p.Program = pr
		if !pr.IsServer() && !fs.isSet("np", "parallel") {
			// The other programs' -np is 1 (common.h), not auto.
			p.Parallel, p.KVUnified = pr.Defaults().Parallel, fs.isSet("kvu", "kv-unified")
		}
		if !fs.isSet("swa-full") {
			p.SWAFull = pr.Defaults().SWAFull
		}
		if pr != plan.ProgramServer && pr != plan.ProgramCLI {
			if fs.isSet(servingNames...) {
				return p, keepsNoServing(pr)
			}
			p.Serving = nil
		}
		if err := p.Check(); err != nil {
			return p, usagef("--program %s: %v", pr, err)
		}
		return p, nil
	}
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
