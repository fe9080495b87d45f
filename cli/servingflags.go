package cli

import (
	"github.com/headroom-llm/headroom/plan"
)

// servingFlags registers llama-server's flags for what it keeps past the
// load (the prompt cache and context checkpoints) and returns, after
// parsing, the settings. Unset ones are llama-server's defaults.
func servingFlags(fs *flags) func() (plan.Serving, error) {
	sv := plan.ServerServing()
	var noIdle bool
	fs.IntVar(&sv.CacheRAM, "cram", sv.CacheRAM, "llama-server's prompt cache in MiB (-1 no limit, 0 off): finished prompts' states kept in RAM, counted at this bound")
	fs.alias("cram", "cache-ram")
	fs.IntVar(&sv.Checkpoints, "ctxcp", sv.Checkpoints, "context checkpoints per slot (sliding-window and recurrent models), each counted")
	fs.alias("ctxcp", "ctx-checkpoints", "swa-checkpoints")
	fs.IntVar(&sv.CheckpointMinStep, "cms", sv.CheckpointMinStep, "least tokens between context checkpoints")
	fs.alias("cms", "checkpoint-min-step")
	fs.BoolVar(&sv.CacheIdleSlots, "cache-idle-slots", true, "save idle slots to the prompt cache (within -cram)")
	fs.BoolVar(&noIdle, "no-cache-idle-slots", false, "do not save idle slots to the prompt cache")
	return func() (plan.Serving, error) {
		if noIdle {
			sv.CacheIdleSlots = false
		}
		if err := sv.Check(); err != nil {
			return sv, usagef("%v", err)
		}
		return sv, nil
	}
}

// servingNames are the serving flags' names, every alias.
var servingNames = []string{"cram", "cache-ram", "ctxcp", "ctx-checkpoints", "swa-checkpoints", "cms", "checkpoint-min-step", "cache-idle-slots", "no-cache-idle-slots"}

// servingProfile is what a profile of program pr keeps past the load:
// the flags' settings for a program that serves, nil for one that keeps
// nothing, which refuses the flags.
func servingProfile(fs *flags, serving func() (plan.Serving, error), pr plan.Program) (*plan.Serving, error) {
	sv, err := serving()
	switch {
	case err != nil:
		return nil, err
	case pr == plan.ProgramServer || pr == plan.ProgramCLI:
		return &sv, nil
	case fs.isSet(servingNames...):
		return nil, keepsNoServing(pr)
	}
	return nil, nil
}

// servingFor keeps the serving settings only for programs that serve
// (llama-server, llama-cli): another program keeps no prompt cache or
// checkpoints, so giving it their flags is an error.
func servingFor(fs *flags, pr plan.Program, opts *plan.SearchOptions) error {
	if pr == plan.ProgramServer || pr == plan.ProgramCLI {
		return nil
	}
	if fs.isSet(servingNames...) {
		return keepsNoServing(pr)
	}
	opts.Base.Serving, opts.Fixed.CacheRAM, opts.Fixed.Checkpoints = nil, nil, nil
	return nil
}

// keepsNoServing refuses the serving flags for a program that keeps
// nothing past its load.
func keepsNoServing(pr plan.Program) error {
	return usagef("--program %s: %s keeps no prompt cache or context checkpoints (-cram, -ctxcp, -cms are llama-server's and llama-cli's)", pr, pr)
}
