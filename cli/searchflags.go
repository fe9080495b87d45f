package cli

import (
	"github.com/headroom-llm/headroom/plan"
)

// checkCounts checks the slot count, minimum context and fit target that
// plan, pull, serve and recommend share.
func checkCounts(parallel, minCtx int, fitTarget int64) error {
	switch {
	case parallel < 1 || parallel > maxSlots:
		return usagef("-np, --parallel %d: want 1 to %d slots", parallel, maxSlots)
	case minCtx < 256:
		return usagef("--min-ctx %d: want 256 or more cells", minCtx)
	case fitTarget < 0:
		return usagef("--fit-target %d: want 0 or more MiB", fitTarget)
	}
	return nil
}

// searchFlags registers the flags that steer a plan search (shared by
// plan, pull, serve and serve-api): headroom's own (--goal, --min-ctx,
// --fit-target, --no-q8, --headless) and every modeled llama.cpp flag
// (request.Register), of which those given are kept and only checked. It
// returns a function that checks them after parsing and builds the
// options.
func searchFlags(fs *flags) func() (plan.SearchOptions, error) {
	opts := plan.DefaultSearch()
	// Base.Rules stays nil, the newest measured build's, until the caller
	// knows the user's build (engineNote).
	fs.StringVar(&opts.Goal, "goal", plan.GoalBalanced, "what matters: balanced (GPU layers, then context), speed (GPU layers) or context")
	fs.IntVar(&opts.MinCtx, "min-ctx", opts.MinCtx, "the least context per slot worth running")
	target := fs.Int64("fit-target", 1024, "MiB to leave free in every memory domain (llama.cpp's --fit-target)")
	noQ8 := fs.Bool("no-q8", false, "never propose a q8_0 KV cache")
	fs.BoolVar(&opts.Headless, "headless", false, "plan as if the desktop session were stopped: the GPU memory it holds counts as free")
	req := fs.llamaFlags(true)
	return func() (plan.SearchOptions, error) {
		switch opts.Goal {
		case plan.GoalBalanced, plan.GoalSpeed, plan.GoalContext:
		default:
			return opts, usagef("--goal %q: want balanced, speed or context", opts.Goal)
		}
		o, err := req.SearchOptions(opts, fs.line.PassWords())
		if err != nil {
			return o, asUsage(err)
		}
		if err := checkCounts(o.Parallel, o.MinCtx, *target); err != nil {
			return o, err
		}
		o.FitTarget = *target << 20
		o.AllowQ8 = o.AllowQ8 && !*noQ8
		return o, nil
	}
}

// parseSearch parses a command that plans one model: its reference and
// the search options its flags give.
func parseSearch(fs *flags, args []string, search func() (plan.SearchOptions, error)) (string, plan.SearchOptions, error) {
	ref, err := fs.parseModel(args)
	if err != nil {
		return "", plan.SearchOptions{}, err
	}
	opts, err := search()
	return ref, opts, err
}
