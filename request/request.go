package request

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
)

// MaxSlots is the most parallel slots a command line may ask for.
const MaxSlots = 256

// Error is a command line's mistake: a flag's value headroom does not
// take, or flags that contradict each other. The CLI exits 2 on it and
// the API answers 400.
type Error struct{ msg string }

func (e Error) Error() string { return e.msg }

func errorf(format string, args ...any) error { return Error{fmt.Sprintf(format, args...)} }

// Flags is a flag set that takes llama.cpp's flags under all their
// spellings: -c and --ctx-size are one Value, so help lists them as one.
type Flags struct{ *flag.FlagSet }

// Alias registers the flag name again under more names, on the same
// Value.
func (f Flags) Alias(name string, more ...string) {
	fl := f.Lookup(name)
	for _, n := range more {
		f.Var(fl.Value, n, fl.Usage)
	}
}

// IsSet reports whether the command line gave the flag under any of the
// names (a flag's spellings).
func (f Flags) IsSet(names ...string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || slices.Contains(names, fl.Name) })
	return set
}

// Llama holds the modeled llama.cpp flags' values while a command line is
// parsed: the one place headroom reads them, for every command and the
// API.
type Llama struct {
	fs                                            Flags
	search                                        bool
	p                                             plan.Profile
	np                                            int
	ngl                                           *GPULayers
	ts                                            *floats
	ot                                            *overrides
	kvu, noKVU, noMmap, mmapOn, nkvo, kvo, cpuMoE bool
	fa, lm                                        string
	serving                                       func() (plan.Serving, error)
	embd, rerank                                  bool
	pooling                                       string
	specTypes, ctkd, ctvd                         string
	specMax                                       int
}

// Register defines every llama.cpp flag headroom models on fs, under
// llama.cpp's spellings (each held to the build's table by the CLI's
// TestModeledFlagsEverywhere). search is for the commands that search a
// plan (plan, pull, serve, serve-api): there a flag given is kept and
// checked, one not given is searched, and -np defaults to the search's
// slots.
func Register(fs Flags, search bool) *Llama {
	r := &Llama{fs: fs, search: search, p: engine.ServerDefaults(), np: -1, ts: &floats{}, lm: "auto"}
	r.ngl = &GPULayers{N: r.p.GPULayers}
	r.fa = string(r.p.FlashAttn)
	if search {
		r.np = plan.DefaultSearch().Parallel
		r.ngl.N = plan.GPULayersAuto
	}
	r.register(fs, search)
	return r
}

// register defines the flags, with help that says how a searching
// command reads them.
func (r *Llama) register(fs Flags, search bool) {
	p := &r.p
	ctxHelp, nglHelp, ctkHelp := "context size in cells across all sequences; 0 = the model's trained context",
		"layers on the GPU: a number, auto or all (the output layer counts as one)", "K cache type: "+strings.Join(engine.CacheTypes(), ", ")
	npHelp := fmt.Sprintf("parallel sequences (slots); -1 = llama-server's auto: %d with a unified cache", p.Parallel)
	if search {
		ctxHelp, nglHelp = "keep this context (cells across all slots) and only check it; default: searched",
			"keep this many layers on the GPU (a number or all) and only check it; default: searched"
		ctkHelp = "keep this K cache type (" + strings.Join(engine.CacheTypes(), ", ") + "); default: f16, or q8_0 where it buys context"
		npHelp = "parallel conversations (slots); each gets its own context"
	}
	fs.IntVar(&p.Ctx, "c", 0, ctxHelp)
	fs.Alias("c", "ctx-size")
	fs.IntVar(&r.np, "np", r.np, npHelp)
	fs.Alias("np", "parallel")
	fs.BoolVar(&r.kvu, "kvu", false, "one KV cache shared by all sequences")
	fs.Alias("kvu", "kv-unified")
	fs.BoolVar(&r.noKVU, "no-kvu", false, "a KV cache per sequence (llama-server's -np auto turns -kvu on)")
	fs.Alias("no-kvu", "no-kv-unified")
	fs.IntVar(&p.Batch, "b", p.Batch, "logical batch size")
	fs.Alias("b", "batch-size")
	fs.IntVar(&p.UBatch, "ub", p.UBatch, "physical batch size (micro-batch)")
	fs.Alias("ub", "ubatch-size")
	fs.StringVar(&p.CacheK, "ctk", p.CacheK, ctkHelp)
	fs.Alias("ctk", "cache-type-k")
	fs.StringVar(&p.CacheV, "ctv", p.CacheV, "V cache type (quantized V needs -fa on)")
	fs.Alias("ctv", "cache-type-v")
	fs.StringVar(&r.fa, "fa", r.fa, "flash attention: on, off or auto")
	fs.Alias("fa", "flash-attn")
	fs.Var(r.ngl, "ngl", nglHelp)
	fs.Alias("ngl", "gpu-layers", "n-gpu-layers")
	fs.Var(r.ts, "ts", "share of layers per GPU, e.g. 3,1 (default: in proportion to free memory)")
	fs.Alias("ts", "tensor-split")
	fs.BoolVar(&r.noMmap, "no-mmap", false, "load weights into memory instead of mapping the file")
	fs.BoolVar(&r.mmapOn, "mmap", false, "map the file (the default)")
	fs.Var(loadMode{&r.lm}, "lm", "how the weights are loaded: auto, none (read into buffers), mmap, mlock or mmap+mlock")
	fs.Alias("lm", "load-mode")
	fs.BoolVar(&p.Mlock, "mlock", false, "lock the weights in RAM: none of them is reclaimable, and RLIMIT_MEMLOCK is checked (from llama.cpp's PR #26135, about b10115: loaded into host buffers, not mapped)")
	fs.BoolVar(&r.nkvo, "nkvo", false, "keep the KV cache in system memory")
	fs.Alias("nkvo", "no-kv-offload")
	fs.BoolVar(&r.kvo, "kvo", false, "offload the KV cache with its layers (the default)")
	fs.Alias("kvo", "kv-offload")
	fs.IntVar(&p.CPUMoE, "ncmoe", 0, "keep the routed experts of the first N layers in system memory (MoE models)")
	fs.Alias("ncmoe", "n-cpu-moe")
	fs.BoolVar(&r.cpuMoE, "cmoe", false, "keep every layer's routed experts in system memory (MoE models)")
	fs.Alias("cmoe", "cpu-moe")
	r.ot = &overrides{}
	fs.Var(r.ot, "ot", "PATTERN=BUFFER_TYPE,...: weights whose name the regular expression matches go to that buffer type (CPU, CUDA0, Vulkan0, MTL0, ...); first match wins; may be repeated")
	fs.Alias("ot", "override-tensor")
	fs.BoolVar(&p.SWAFull, "swa-full", false, "full-size caches for sliding-window layers (a library context's default: --swa-full=false turns it off)")
	r.serving = servingFlags(fs)
	fs.BoolVar(&r.embd, "embedding", false, "serve embeddings only (/v1/embeddings): every prompt token is an output; an embedding model's plan has it")
	fs.Alias("embedding", "embeddings")
	fs.BoolVar(&r.rerank, "rerank", false, "serve reranking (/v1/rerank): --embedding with rank pooling; a reranker's plan has it")
	fs.Alias("rerank", "reranking")
	fs.StringVar(&r.pooling, "pooling", "", "pooling of embeddings: none, mean, cls, last or rank; default: the model's")
	fs.StringVar(&r.specTypes, "spec-type", "", "speculative decoding: draft-mtp drafts with the model's own MTP head (Qwen3.5, 3.6), draft-simple with the -md model; none is the default")
	fs.IntVar(&r.specMax, "spec-draft-n-max", -1, fmt.Sprintf("the most tokens a slot drafts at once (default %d): each is an output row of the target context", plan.DraftTokens))
	fs.StringVar(&r.ctkd, "ctkd", "", "the draft context's K cache type (default f16, whatever -ctk says)")
	fs.Alias("ctkd", "spec-draft-type-k", "cache-type-k-draft")
	fs.StringVar(&r.ctvd, "ctvd", "", "the draft context's V cache type (default f16)")
	fs.Alias("ctvd", "spec-draft-type-v", "cache-type-v-draft")
	fs.Var(fitOff{}, "fit", "llama.cpp's own fit: only off is taken (headroom plans instead: see headroom plan)")
}

// profile builds the profile the parsed flags give, or says which flag
// is wrong and why.
func (r *Llama) Profile(pass []string) (plan.Profile, error) {
	search := r.search
	p := r.p
	// llama.cpp's words for on, off and auto (common_arg_utils).
	switch r.fa {
	case "on", "enabled", "true", "1":
		p.FlashAttn = plan.FlashOn
	case "off", "disabled", "false", "0":
		p.FlashAttn = plan.FlashOff
	case "auto", "-1":
		p.FlashAttn = plan.FlashAuto
	default:
		return p, errorf("-fa, --flash-attn %q: want on, off or auto", r.fa)
	}
	switch np := r.np; {
	case search && (np < 1 || np > MaxSlots):
		return p, errorf("-np, --parallel %d: want 1 to %d slots", np, MaxSlots)
	case np != -1 && (np < 1 || np > MaxSlots):
		return p, errorf("-np, --parallel %d: want -1 (llama-server's auto) or 1 to %d slots", np, MaxSlots)
	case np != -1:
		p.Parallel, p.KVUnified = np, r.kvu
	case r.noKVU:
		p.KVUnified = false
	}
	for _, c := range []struct {
		both  bool
		names string
	}{{r.kvu && r.noKVU, "-kvu and --no-kv-unified"}, {r.kvo && r.nkvo, "--kv-offload and --no-kv-offload"}, {r.mmapOn && r.noMmap, "--mmap and --no-mmap"}} {
		if c.both {
			return p, errorf("%s contradict each other: give one", c.names)
		}
	}
	p.GPULayers = r.ngl.N
	if !search && p.GPULayers == GPULayersAll {
		p.GPULayers = plan.GPULayersAuto // fit checks every layer as auto places them
	}
	p.TensorSplit = []float64(*r.ts)
	p.Overrides = append([]plan.Override{}, *r.ot...)
	if r.cpuMoE {
		p.CPUMoE = 1 << 20 // every layer; the accountant needs no count
	}
	p.Mmap = !r.noMmap
	switch r.lm {
	case "none":
		p.Mmap = false
	case "mlock":
		p.Mmap, p.Mlock = false, true
	case "mmap+mlock":
		p.Mmap, p.Mlock = true, true
	}
	p.NoKVOffload = r.nkvo
	if err := checkProfile(p); err != nil {
		return p, err
	}
	sv, err := r.serving()
	if err != nil {
		return p, err
	}
	p.Serving = &sv
	p.Pass = pass
	if r.embd || r.rerank || r.pooling != "" {
		if r.pooling != "" {
			if err := plan.ParsePooling(r.pooling); err != nil {
				return p, errorf("%v", err)
			}
		}
		e := &plan.Embedding{On: r.embd || r.rerank, Pooling: r.pooling}
		if r.rerank {
			if r.pooling != "" && r.pooling != "rank" {
				return p, errorf("--rerank is rank pooling: --pooling %s contradicts it", r.pooling)
			}
			e.Pooling = "rank"
		}
		p.Embedding = e
	}
	spec, err := r.speculative()
	if err != nil {
		return p, err
	}
	p.Spec = spec
	return p, nil
}

// speculative reads --spec-type and the draft context's flags: nil when
// none is given.
func (r *Llama) speculative() (*plan.Speculative, error) {
	if r.specTypes == "" && r.specMax == -1 && r.ctkd == "" && r.ctvd == "" {
		return nil, nil
	}
	s := &plan.Speculative{DraftMax: max(r.specMax, 0), CacheK: r.ctkd, CacheV: r.ctvd}
	for _, t := range strings.Split(r.specTypes, ",") {
		switch t = strings.TrimSpace(t); {
		case t == "":
		case slices.Contains(plan.SpecTypes(), t):
			if !slices.Contains(s.Types, t) {
				s.Types = append(s.Types, t)
			}
		case strings.HasPrefix(t, "draft-") || strings.HasPrefix(t, "ngram-"):
			return nil, errorf("--spec-type %s: headroom counts draft-mtp and draft-simple only; %s keeps buffers it does not count yet (a draft model of its own, or n-gram tables)", t, t)
		default:
			return nil, errorf("--spec-type %q: want %s", t, strings.Join(plan.SpecTypes(), ", "))
		}
	}
	if r.specMax != -1 && (r.specMax < 1 || r.specMax > 512) {
		return nil, errorf("--spec-draft-n-max %d: want 1 to 512 tokens (0 drafts nothing: leave --spec-type out)", r.specMax)
	}
	for _, c := range []struct{ flag, v string }{{"-ctkd, --spec-draft-type-k", r.ctkd}, {"-ctvd, --spec-draft-type-v", r.ctvd}} {
		if c.v != "" && !slices.Contains(engine.CacheTypes(), c.v) {
			return nil, errorf("%s %q: want one of %s", c.flag, c.v, strings.Join(engine.CacheTypes(), ", "))
		}
	}
	return s, nil
}

// checkProfile checks the values no flag's own parser checks.
func checkProfile(p plan.Profile) error {
	for _, c := range []struct{ flag, v string }{{"-ctk, --cache-type-k", p.CacheK}, {"-ctv, --cache-type-v", p.CacheV}} {
		if !slices.Contains(engine.CacheTypes(), c.v) {
			return errorf("%s %q: want one of %s", c.flag, c.v, strings.Join(engine.CacheTypes(), ", "))
		}
	}
	switch {
	case p.Ctx < 0:
		return errorf("-c, --ctx-size %d: want 0 (the trained context) or more cells", p.Ctx)
	case p.Batch <= 0:
		return errorf("-b, --batch-size %d: want 1 or more", p.Batch)
	case p.UBatch <= 0:
		return errorf("-ub, --ubatch-size %d: want 1 or more", p.UBatch)
	case p.CPUMoE < 0:
		return errorf("-ncmoe, --n-cpu-moe %d: want 0 or more layers", p.CPUMoE)
	case p.FlashAttn == plan.FlashOff && p.CacheV != "f16" && p.CacheV != "f32" && p.CacheV != "bf16":
		return errorf("-ctv %s with -fa off: llama.cpp needs flash attention for a quantized V cache", p.CacheV)
	}
	return nil
}

// MlockLoads applies one build rule the same way for every command: from
// llama.cpp's PR #26135 --mlock is --load-mode mlock, loaded and not
// mapped, unless the mapping is asked for too (--mmap, or --load-mode
// mmap+mlock).
func (r *Llama) MlockLoads(p *plan.Profile, rules builds.Rules) {
	if p.Mlock && rules.MlockLoads && !r.fs.IsSet("mmap") && r.lm != "mmap" && r.lm != "mmap+mlock" {
		p.Mmap = false
	}
}
