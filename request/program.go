package request

import (
	"flag"
	"io"

	"github.com/headroom-llm/headroom/llamaflags"
	"github.com/headroom-llm/headroom/plan"
)

// servingFlags registers llama-server's flags for what it keeps past the
// load (the prompt cache and context checkpoints) and returns, after
// parsing, the settings. Unset ones are llama-server's defaults.
func servingFlags(fs Flags) func() (plan.Serving, error) {
	sv := plan.ServerServing()
	var noIdle bool
	fs.IntVar(&sv.CacheRAM, "cram", sv.CacheRAM, "llama-server's prompt cache in MiB (-1 no limit, 0 off): finished prompts' states kept in RAM, counted at this bound")
	fs.Alias("cram", "cache-ram")
	fs.IntVar(&sv.Checkpoints, "ctxcp", sv.Checkpoints, "context checkpoints per slot (sliding-window and recurrent models), each counted")
	fs.Alias("ctxcp", "ctx-checkpoints", "swa-checkpoints")
	fs.IntVar(&sv.CheckpointMinStep, "cms", sv.CheckpointMinStep, "least tokens between context checkpoints")
	fs.Alias("cms", "checkpoint-min-step")
	fs.BoolVar(&sv.CacheIdleSlots, "cache-idle-slots", true, "save idle slots to the prompt cache (within -cram)")
	fs.BoolVar(&noIdle, "no-cache-idle-slots", false, "do not save idle slots to the prompt cache")
	return func() (plan.Serving, error) {
		if noIdle {
			sv.CacheIdleSlots = false
		}
		if err := sv.Check(); err != nil {
			return sv, errorf("%v", err)
		}
		return sv, nil
	}
}

// ServingNames are the serving flags' names, every alias.
var ServingNames = []string{"cram", "cache-ram", "ctxcp", "ctx-checkpoints", "swa-checkpoints", "cms", "checkpoint-min-step", "cache-idle-slots", "no-cache-idle-slots"}

// keepsServing reports whether program pr keeps a prompt cache and
// context checkpoints past its load.
func keepsServing(pr plan.Program) bool {
	return pr == plan.ProgramServer || pr == plan.ProgramCLI
}

// keepsNoServing refuses the serving flags for a program that keeps
// nothing past its load.
func keepsNoServing(pr plan.Program) error {
	return errorf("--program %s: %s keeps no prompt cache or context checkpoints (-cram, -ctxcp, -cms are llama-server's and llama-cli's)", pr, pr)
}

// ProgramProfile is the profile a check (fit, the API's fit) makes of the
// flags for program pr: the program's own defaults where its flags were
// not given (its slots, its sliding-window caches), and nothing kept past
// the load for a program that keeps nothing, which refuses the serving
// flags.
func (r *Llama) ProgramProfile(pr plan.Program, pass []string) (plan.Profile, error) {
	p, err := r.Profile(pass)
	if err != nil {
		return p, err
	}
	p.Program = pr
	if !pr.IsServer() && !r.fs.IsSet("np", "parallel") {
		// The other programs' -np is 1 (common.h), not auto.
		p.Parallel, p.KVUnified = pr.Defaults().Parallel, r.fs.IsSet("kvu", "kv-unified")
	}
	if !r.fs.IsSet("swa-full") {
		p.SWAFull = pr.Defaults().SWAFull
	}
	if !keepsServing(pr) {
		if r.fs.IsSet(ServingNames...) {
			return p, keepsNoServing(pr)
		}
		p.Serving = nil
	}
	if err := p.Check(); err != nil {
		return p, errorf("--program %s: %v", pr, err)
	}
	return p, nil
}

// SearchOptions are the options of a search from opts (headroom's own
// flags already in them) and the llama.cpp flags: those given are kept
// and only checked (Fixed), the rest searched.
func (r *Llama) SearchOptions(opts plan.SearchOptions, pass []string) (plan.SearchOptions, error) {
	p, err := r.Profile(pass)
	if err != nil {
		return opts, err
	}
	opts.Parallel = p.Parallel
	switch p.GPULayers {
	case plan.GPULayersAuto:
	case GPULayersAll:
		n := 999 // llama.cpp's own "all"; the plan clamps it
		opts.Fixed.GPULayers = &n
	default:
		n := p.GPULayers
		opts.Fixed.GPULayers = &n
	}
	opts.Fixed.Ctx = p.Ctx
	if r.fs.IsSet("ctk", "cache-type-k") {
		opts.Fixed.CacheK = p.CacheK
	}
	if r.fs.IsSet("ctv", "cache-type-v") {
		opts.Fixed.CacheV = p.CacheV
	}
	if r.fs.IsSet("cram", "cache-ram") {
		opts.Fixed.CacheRAM = &p.Serving.CacheRAM
	}
	if r.fs.IsSet("ctxcp", "ctx-checkpoints", "swa-checkpoints") {
		opts.Fixed.Checkpoints = &p.Serving.Checkpoints
	}
	if p.FlashAttn == plan.FlashOff {
		opts.AllowQ8 = false // a quantized V needs flash attention
	}
	p.GPULayers, p.Ctx, p.CacheK, p.CacheV = opts.Base.GPULayers, opts.Base.Ctx, opts.Base.CacheK, opts.Base.CacheV
	if !r.fs.IsSet("kvu", "kv-unified") {
		p.KVUnified = false // a plan's slots each have their own context
	}
	opts.Base = p
	return opts, nil
}

// ServingFor keeps a search's serving settings only for programs that
// serve (llama-server, llama-cli): another program keeps no prompt cache
// or checkpoints, so giving it their flags is an error.
func (r *Llama) ServingFor(opts *plan.SearchOptions) error {
	pr := opts.Base.Program
	if keepsServing(pr) {
		return nil
	}
	if r.fs.IsSet(ServingNames...) {
		return keepsNoServing(pr)
	}
	opts.Base.Serving, opts.Fixed.CacheRAM, opts.Fixed.Checkpoints = nil, nil, nil
	return nil
}

// Defines is how a flag set takes a name, as llamaflags.Table.Split asks:
// whether it defines it, and whether it is a flag without a value.
func Defines(fs *flag.FlagSet) llamaflags.Own {
	return func(name string) (defined, boolean bool) {
		fl := fs.Lookup(name)
		if fl == nil {
			return false, false
		}
		b, ok := fl.Value.(interface{ IsBoolFlag() bool })
		return true, ok && b.IsBoolFlag()
	}
}

// ParseProfile reads a llama.cpp command line (flags only, the model
// named apart) into the profile a check of program pr assesses, as fit's
// command line is read: the API's fit reads its request this way, so it
// takes what fit takes and means the same by it. Flags that change
// nothing headroom counts are kept in the profile's Pass; refused ones
// are an error that says why.
func ParseProfile(args []string, pr plan.Program) (plan.Profile, error) {
	fs := flag.NewFlagSet("request", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	r := Register(Flags{fs}, false)
	tb, err := llamaflags.Union()
	if err != nil {
		return plan.Profile{}, err
	}
	line, err := tb.Split(args, Defines(fs))
	if err != nil {
		return plan.Profile{}, errorf("%v", err)
	}
	if err := fs.Parse(line.Own); err != nil {
		return plan.Profile{}, errorf("%v", err)
	}
	if fs.NArg() > 0 {
		return plan.Profile{}, errorf("unexpected argument %q: name the model apart", fs.Arg(0))
	}
	return r.ProgramProfile(pr, line.PassWords())
}
