package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/engine"
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

// refused is a llama.cpp flag headroom knows but does not model yet: it is
// an error to pass it, so no verdict silently ignores it.
type refused struct{ name string }

func (r refused) String() string { return "" }
func (r refused) Set(string) error {
	return fmt.Errorf("%s is not modeled yet; headroom would ignore it and give a wrong verdict", r.name)
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

// refusedBool is a refused flag that takes no value.
type refusedBool struct{ refused }

func (refusedBool) IsBoolFlag() bool { return true }

// profileFlags registers llama-server's serving flags, under their short and
// long names, and returns a function that builds the profile after parsing.
func profileFlags(fs *flags) func() (plan.Profile, error) {
	p := engine.ServerDefaults()
	np := -1
	ngl := &gpuLayers{n: p.GPULayers}
	ts := &floats{}
	var kvu, noMmap, mmapOn, nkvo bool
	fa := string(p.FlashAttn)
	fs.IntVar(&p.Ctx, "c", 0, "context size in cells across all sequences; 0 = the model's trained context")
	fs.alias("c", "ctx-size")
	fs.IntVar(&np, "np", -1, fmt.Sprintf("parallel sequences (slots); -1 = llama-server's auto: %d with a unified cache", p.Parallel))
	fs.alias("np", "parallel")
	fs.BoolVar(&kvu, "kvu", false, "one KV cache shared by all sequences")
	fs.alias("kvu", "kv-unified")
	fs.IntVar(&p.Batch, "b", p.Batch, "logical batch size")
	fs.alias("b", "batch-size")
	fs.IntVar(&p.UBatch, "ub", p.UBatch, "physical batch size (micro-batch)")
	fs.alias("ub", "ubatch-size")
	fs.StringVar(&p.CacheK, "ctk", p.CacheK, "K cache type: "+strings.Join(engine.CacheTypes(), ", "))
	fs.alias("ctk", "cache-type-k")
	fs.StringVar(&p.CacheV, "ctv", p.CacheV, "V cache type (quantized V needs -fa on)")
	fs.alias("ctv", "cache-type-v")
	fs.StringVar(&fa, "fa", fa, "flash attention: on, off or auto")
	fs.alias("fa", "flash-attn")
	fs.Var(ngl, "ngl", "layers on the GPU: a number, auto or all (the output layer counts as one)")
	fs.alias("ngl", "gpu-layers", "n-gpu-layers")
	fs.Var(ts, "ts", "share of layers per GPU, e.g. 3,1 (default: in proportion to free memory)")
	fs.alias("ts", "tensor-split")
	fs.BoolVar(&noMmap, "no-mmap", false, "load weights into memory instead of mapping the file")
	fs.BoolVar(&mmapOn, "mmap", false, "map the file (the default)")
	fs.BoolVar(&p.Mlock, "mlock", false, "lock the weights in RAM: none of them is reclaimable, and RLIMIT_MEMLOCK is checked (from llama.cpp's PR #26135, about b10115: loaded into host buffers, not mapped)")
	fs.BoolVar(&nkvo, "nkvo", false, "keep the KV cache in system memory")
	fs.alias("nkvo", "no-kv-offload")
	fs.IntVar(&p.CPUMoE, "ncmoe", 0, "keep the routed experts of the first N layers in system memory (MoE models)")
	fs.alias("ncmoe", "n-cpu-moe")
	var cpuMoE bool
	fs.BoolVar(&cpuMoE, "cmoe", false, "keep every layer's routed experts in system memory (MoE models)")
	fs.alias("cmoe", "cpu-moe")
	ot := overrideFlags(fs)
	fs.BoolVar(&p.SWAFull, "swa-full", false, "full-size caches for sliding-window layers (a library context's default: --swa-full=false turns it off)")
	program := programFlag(fs)
	serving := servingFlags(fs)
	fs.Var(fitOff{}, "fit", "llama.cpp's own fit: only off is taken (headroom plans instead: see headroom plan)")
	for _, names := range [][]string{{"sm", "split-mode"}, {"fitt", "fit-target"}} {
		fs.Var(refused{"-" + names[0]}, names[0], "not modeled yet (refused rather than ignored)")
		fs.alias(names[0], names[1:]...)
	}
	return func() (plan.Profile, error) {
		pr, err := plan.ParseProgram(*program)
		if err != nil {
			return p, usagef("--program: %v", err)
		}
		p.Program = pr
		switch plan.FlashAttn(fa) {
		case plan.FlashOn, plan.FlashOff, plan.FlashAuto:
			p.FlashAttn = plan.FlashAttn(fa)
		default:
			return p, usagef("-fa, --flash-attn %q: want on, off or auto", fa)
		}
		switch {
		case np == -1 && !pr.IsServer():
			// The other programs' -np is 1 (common.h), not auto.
			d := pr.Defaults()
			p.Parallel, p.KVUnified = d.Parallel, kvu
		case np == -1:
			// llama-server's -np auto, as ServerDefaults has it.
		case np < 1 || np > maxSlots:
			return p, usagef("-np, --parallel %d: want -1 (llama-server's auto) or 1 to %d slots", np, maxSlots)
		default:
			p.Parallel, p.KVUnified = np, kvu
		}
		p.GPULayers = ngl.n
		if p.GPULayers == gpuLayersAll {
			p.GPULayers = plan.GPULayersAuto
		}
		p.TensorSplit = []float64(*ts)
		p.Overrides = append([]plan.Override{}, *ot...)
		if cpuMoE {
			p.CPUMoE = 1 << 20 // every layer; the accountant needs no count
		}
		if p.CPUMoE < 0 {
			return p, usagef("-ncmoe, --n-cpu-moe %d: want 0 or more layers", p.CPUMoE)
		}
		p.Mmap = !noMmap
		p.NoKVOffload = nkvo
		if !fs.isSet("swa-full") {
			p.SWAFull = pr.Defaults().SWAFull
		}
		for _, c := range []struct{ flag, v string }{{"-ctk, --cache-type-k", p.CacheK}, {"-ctv, --cache-type-v", p.CacheV}} {
			if !slices.Contains(engine.CacheTypes(), c.v) {
				return p, usagef("%s %q: want one of %s", c.flag, c.v, strings.Join(engine.CacheTypes(), ", "))
			}
		}
		switch {
		case p.Ctx < 0:
			return p, usagef("-c, --ctx-size %d: want 0 (the trained context) or more cells", p.Ctx)
		case p.Batch <= 0:
			return p, usagef("-b, --batch-size %d: want 1 or more", p.Batch)
		case p.UBatch <= 0:
			return p, usagef("-ub, --ubatch-size %d: want 1 or more", p.UBatch)
		}
		if p.Serving, err = servingProfile(fs, serving, pr); err != nil {
			return p, err
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
		return hw.LoadMachine(ref)
	}
	return env.probe(ctx, probeOptions(env, llamaServer, false))
}

// llamaServerFlag is --llama-server for the commands that probe this
// machine: the build whose devices the plan is for.
func llamaServerFlag(fs *flags) *string {
	return fs.String("llama-server", "", "the llama-server `program` to plan for: asked for its devices (--list-devices); default: llama-server on PATH")
}
