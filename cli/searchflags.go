package cli

import (
	"github.com/headroom-llm/headroom/engine"
	"slices"
	"strings"

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
// plan, pull and serve) and returns a function that checks them after
// parsing and builds the options.
func searchFlags(fs *flags) func() (plan.SearchOptions, error) {
	opts := plan.DefaultSearch()
	// Base.Rules stays nil, the newest measured build's, until the caller
	// knows the user's build (engineNote).
	fs.StringVar(&opts.Goal, "goal", plan.GoalBalanced, "what matters: balanced (GPU layers, then context), speed (GPU layers) or context")
	fs.IntVar(&opts.Parallel, "np", opts.Parallel, "parallel conversations (slots); each gets its own context")
	fs.alias("np", "parallel")
	fs.IntVar(&opts.MinCtx, "min-ctx", opts.MinCtx, "the least context per slot worth running")
	target := fs.Int64("fit-target", 1024, "MiB to leave free in every memory domain (llama.cpp's --fit-target)")
	noQ8 := fs.Bool("no-q8", false, "never propose a q8_0 KV cache")
	ngl := &gpuLayers{n: plan.GPULayersAuto}
	fs.Var(ngl, "ngl", "keep this many layers on the GPU (a number or all) and only check it; default: searched")
	fs.alias("ngl", "gpu-layers", "n-gpu-layers")
	fs.IntVar(&opts.Fixed.Ctx, "c", 0, "keep this context (cells across all slots) and only check it; default: searched")
	fs.alias("c", "ctx-size")
	fs.StringVar(&opts.Fixed.CacheK, "ctk", "", "keep this K cache type (f16, q8_0, q4_0, ...); default: f16, or q8_0 where it buys context")
	fs.alias("ctk", "cache-type-k")
	fs.StringVar(&opts.Fixed.CacheV, "ctv", "", "keep this V cache type (a quantized V turns flash attention on)")
	fs.alias("ctv", "cache-type-v")
	ot := overrideFlags(fs)
	serving := servingFlags(fs)
	fs.BoolVar(&opts.Base.Mlock, "mlock", false, "lock the weights in RAM: none of them is reclaimable, and RLIMIT_MEMLOCK is checked (from llama.cpp's PR #26135, about b10115: loaded into host buffers, not mapped)")
	fs.BoolVar(&opts.Headless, "headless", false, "plan as if the desktop session were stopped: the GPU memory it holds counts as free")
	return func() (plan.SearchOptions, error) {
		switch opts.Goal {
		case plan.GoalBalanced, plan.GoalSpeed, plan.GoalContext:
		default:
			return opts, usagef("--goal %q: want balanced, speed or context", opts.Goal)
		}
		if err := checkCounts(opts.Parallel, opts.MinCtx, *target); err != nil {
			return opts, err
		}
		switch ngl.n {
		case plan.GPULayersAuto:
		case gpuLayersAll:
			n := 999 // llama.cpp's own "all"; the plan clamps it
			opts.Fixed.GPULayers = &n
		default:
			n := ngl.n
			opts.Fixed.GPULayers = &n
		}
		if opts.Fixed.Ctx < 0 {
			return opts, usagef("-c, --ctx-size %d: want 0 (searched) or more cells", opts.Fixed.Ctx)
		}
		for _, c := range []struct{ flag, v string }{{"-ctk, --cache-type-k", opts.Fixed.CacheK}, {"-ctv, --cache-type-v", opts.Fixed.CacheV}} {
			if c.v != "" && !slices.Contains(engine.CacheTypes(), c.v) {
				return opts, usagef("%s %q: want one of %s", c.flag, c.v, strings.Join(engine.CacheTypes(), ", "))
			}
		}
		sv, err := serving()
		if err != nil {
			return opts, err
		}
		opts.Base.Serving = &sv
		if fs.isSet("cram", "cache-ram") {
			opts.Fixed.CacheRAM = &sv.CacheRAM
		}
		if fs.isSet("ctxcp", "ctx-checkpoints", "swa-checkpoints") {
			opts.Fixed.Checkpoints = &sv.Checkpoints
		}
		opts.Base.Overrides = append([]plan.Override{}, *ot...)
		opts.FitTarget = *target << 20
		opts.AllowQ8 = !*noQ8
		return opts, nil
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
