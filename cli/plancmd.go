package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/term"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/report"
	"github.com/headroom-llm/headroom/speed"
)

// planHelp is the help of 'headroom plan'.
const planHelp = `
Searches for the best way to run MODEL with llama-server on this machine
(or --machine): how many slots, how much context each, how many layers on
the GPU, and which KV cache type, leaving --fit-target free in every memory
domain. It prints the choice, why, and the runner-up; --print-args prints
only the flags, for

  llama-server -m MODEL $(headroom plan MODEL --print-args)

Every candidate is accounted buffer by buffer, as 'headroom fit' does.
What you set with -c, -ngl, -ctk or -ctv is kept as given and only
checked, as llama.cpp's --fit keeps a user's -ngl; the rest is searched.
GPU memory a desktop session holds (compositor, browser; see headroom hw)
is not counted as free; the plan says what running headless would allow,
and --headless plans for that.
A machine file joined with 'headroom hw --rpc' adds the GPUs of hosts
running rpc-server: layers are split over them and this machine, each
host's memory checked on its own, and the flags carry --rpc and -ts.
A mixture of experts that does not fit whole is placed dense-first, as
llama.cpp's fit places it: every layer's attention and dense weights on
the GPUs, the routed experts of the fewest leading layers in system memory
(--n-cpu-moe N). On several GPUs where llama.cpp's default split (by free
memory) falls short, layers are filled back to front and pinned with -ts.
A projector (--mmproj) and a draft model (-md) are counted in every
candidate (the projector's compute buffer is a rough estimate, but for
Gemma 3's, Pixtral's and Qwen2/2.5-VL's encoders on the CPU and Gemma 3's
on Vulkan, which are replayed) and their flags are part of the plan's.
Tensor overrides (-ot) are kept as given in every candidate and only
checked, as llama.cpp's fit keeps them.
An architecture headroom does not model (docs/coverage.md) is planned on
your own llama.cpp's projections (llama-fit-params beside --llama-server,
or on PATH): the most GPU layers at --min-ctx, then the most context, in a
few projections of a fraction of a second each; expert offload is not
searched there, and the plan says its figures are llama.cpp's.

` + pastedHelp + `

--bench measures the chosen flags with llama.cpp's own llama-bench
(beside --llama-server, or on PATH) before any download: on the model's
own file where it is local, else on a sparse twin of its header whose
weights read as zeros, which ggml's kernels take as long to multiply as
real ones. Prompt and generation speed are printed beside the estimate,
within --bench-budget (60 s): a slow model gets fewer repetitions and
tokens, and the output says so. Only a plan that fits is measured.

--router-preset FILE plans each MODEL alone and writes llama-server's
router presets INI (llama-server --models-preset FILE): one section per
model, named as the router names a file of --models-dir (a catalog variant
by ENTRY/QUANT), with its planned flags; and the --models-max that is safe
for the set here, the largest k such that every k of these models fit
together, their needs added domain by domain as serve-api's admission
adds them.
It is printed and written as a comment. The router counts models, not
memory: the figure holds for these models only. Each model is planned as
if alone, and takes what it can; give -c (or --goal) to plan smaller
contexts so that more fit at once.

MODEL is a file, a URL, a Hugging Face reference or a catalog variant
(ENTRY/QUANT, as recommend lists them); a catalog variant is planned from
the same inputs as its recommend row, with no download. An entry alone
(ENTRY) is its quant that recommend ranks first on this machine, else its
smallest, said on standard error. Where nothing fits, --json still prints
the verdict and why.

--program plans for another llama.cpp program than llama-server:
llama-cli, llama-completion or library (a llama_context_default_params
context, as node-llama-cpp makes one), as 'headroom fit --help' says: one
sequence unless --parallel says more, and the command printed is that
program's (a library's parameters, name=value). --router-preset, --verify
and --bench are llama-server's only.

The exit status is 0 when a plan fits, 1 when nothing fits or the model
is incompatible, 2 for a command line that is wrong.

Examples:
  headroom plan model.gguf
  headroom plan qwen3-8b/Q4_K_M --machine cpu-32
  headroom plan hf:Qwen/Qwen3-8B-GGUF:Q4_K_M --machine rtx-4090 --parallel 4
  headroom plan model.gguf --goal context --json
  headroom plan model.gguf -ngl all --parallel 1
  headroom plan model.gguf --program llama-cli
  headroom plan model.gguf --mmproj mmproj.gguf -md draft.gguf --print-args
  headroom plan qwen3-8b/Q4_K_M --bench --llama-server ~/llama.cpp/build/bin/llama-server
  headroom plan --router-preset models.ini a.gguf b.gguf qwen3-8b/Q4_K_M`

func runPlan(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "plan", "[flags] MODEL", planHelp)
	machine := fs.String("machine", "", "a preset (see headroom hw --presets) or a file from headroom hw --json; default: this machine")
	llama := llamaServerFlag(fs)
	search := searchFlags(fs)
	companions := companionFlags(fs)
	printArgs := fs.Bool("print-args", false, "print only the llama-server flags")
	asJSON := fs.Bool("json", false, "print the plan, its flags as an argv array and every candidate as JSON (its fields: docs/json.md)")
	quiet := fs.Bool("quiet", false, "print no progress on standard error")
	eng := engineFlag(fs)
	verify := fs.Bool("verify", false, "also ask llama.cpp itself about the chosen flags: llama-fit-params (beside --llama-server, or on PATH) projects the load of the model file without allocating; its memory breakdown is compared with headroom's, row by row")
	bench, budget := benchFlags(fs)
	netGbps := fs.Float64("network-gbps", 0, "the link to the rpc-servers of a joined machine, in Gbit/s, for the network share of a token (default: 1, gigabit Ethernet, said in the output)")
	program := programFlag(fs)
	routerPreset, force := routerPresetFlags(fs)
	refs, err := fs.parseModels(args)
	if err != nil {
		return err
	}
	opts, err := programOptions(fs, search, *program, *routerPreset != "")
	if err != nil {
		return err
	}
	if err := serverOnly(opts.Base.Program, *verify, *bench); err != nil {
		return err
	}
	if *routerPreset == "" && len(refs) != 1 {
		return usagef("need exactly one MODEL, got %d arguments (several are for --router-preset)", len(refs))
	}
	note, err := engineNote(ctx, *eng, *llama)
	if err != nil {
		return err
	}
	opts.Base.Rules = &note.Rules
	fs.mlockLoads(&opts.Base, note.Rules)
	snap, err := loadMachine(ctx, env, *machine, *llama)
	if err != nil {
		return err
	}
	if _, gpus := plan.Devices(snap); len(gpus) == 0 && opts.Fixed.GPULayers != nil {
		// As fit says it: the plan's -ngl 0 is the only one there is.
		if *opts.Fixed.GPULayers != 0 {
			fmt.Fprintln(env.Stderr, wrap(noGPUWarning, "headroom plan: ", "  ", textWidth))
		}
		opts.Fixed.GPULayers = nil
	}
	if *routerPreset != "" {
		if err := routerPresetTakes(fs.Visit); err != nil {
			return err
		}
		return runRouterPreset(ctx, env, presetOut{*routerPreset, *force}, refs, snap, opts, *quiet)
	}
	ref, err := entryQuant(env, refs[0], snap, opts.Parallel, opts.FitTarget, opts.Base.Rules)
	if err != nil {
		return err
	}
	in, err := openInputs(ctx, env, ref, *quiet || *printArgs)
	if err != nil {
		return err
	}
	_, gpus := plan.Devices(snap)
	out := report.Plan{Model: in.Ref, Program: opts.Base.Program, Inputs: in.Provenance, Speed: []speed.Result{}, Engine: &note, Backends: plan.Backends(gpus)}
	p, why, err := searchModel(ctx, env, in, snap, opts, companions, &out, *llama, *quiet || *printArgs)
	if err != nil {
		return err
	}
	judge(&out, in, p, why, *machine == "")
	if out.Verdict == plan.Fits {
		x := planExtras{netGbps: *netGbps, verify: *verify, bench: *bench, budget: *budget, llama: *llama, quiet: *quiet || *printArgs}
		if err := x.add(ctx, env, &out, in, p.Chosen, snap); err != nil {
			return err
		}
	}
	if *asJSON {
		if err := printJSON(env.Stdout, out); err != nil {
			return err
		}
	}
	if out.Verdict != plan.Fits {
		// The JSON above says why; the exit status says it to scripts.
		return verdictError{out.Reason}
	}
	switch {
	case *printArgs:
		fmt.Fprintln(env.Stdout, strings.Join(p.Chosen.Flags, " "))
	case *asJSON:
	default:
		printPlan(env.Stdout, in, p, out)
	}
	return nil
}

// searchModel searches the plan of a model: headroom's own search where
// it models the architecture, llama.cpp's projection (llama-fit-params)
// where it does not and the build can; why says what the projection
// said where it could not run.
func searchModel(ctx context.Context, env Env, in *modelInputs, snap *hw.Snapshot, opts plan.SearchOptions,
	companions func(context.Context, Env, bool, *gguf.Model) (*plan.Companions, error), out *report.Plan, llama string, quiet bool) (*plan.Plan, string, error) {
	var p *plan.Plan
	pr, why := openProjection(ctx, env, in, llama, opts.Base.Program)
	if pr != nil {
		defer pr.cleanup()
		if c, err := companions(ctx, env, true, in.header()); err != nil {
			return nil, "", err
		} else if c != nil {
			return nil, "", errProjectedCompanions
		}
		p, why, out.Projected = searchProjected(ctx, env, pr, snap, opts, quiet)
	}
	if in.ArchErr == nil {
		var err error
		if opts.Base.Companions, err = companions(ctx, env, quiet, in.header()); err != nil {
			return nil, "", err
		}
		if err := opts.Base.Check(); err != nil {
			return nil, "", usagef("--program %s: %v", opts.Base.Program, err)
		}
		if p, err = plan.Search(in.Arch, snap, opts); err != nil {
			return nil, "", err
		}
	}
	return p, why, nil
}

// programOptions are plan's search options for the program --program
// names: its own slots and sliding-window default where the flags do not
// say, and no serving settings for a program that keeps none.
func programOptions(fs *flags, search func() (plan.SearchOptions, error), program string, routerPreset bool) (plan.SearchOptions, error) {
	opts, err := search()
	if err != nil {
		return opts, err
	}
	if opts.Base.Program, err = plan.ParseProgram(program); err != nil {
		return opts, usagef("--program: %v", err)
	}
	if err := fs.llama.ServingFor(&opts); err != nil {
		return opts, asUsage(err)
	}
	if pr := opts.Base.Program; !pr.IsServer() {
		if routerPreset {
			return opts, usagef("--router-preset writes llama-server's presets; --program %s has none", pr)
		}
		if !fs.isSet("np", "parallel") {
			opts.Parallel = pr.Defaults().Parallel
		}
		if !fs.isSet("swa-full") {
			opts.Base.SWAFull = pr.Defaults().SWAFull
		}
	}
	return opts, nil
}

// planExtras are what plan adds to a plan that fits, as its flags ask.
type planExtras struct {
	netGbps       float64
	verify, bench bool
	budget        time.Duration
	llama         string
	quiet         bool
}

// add estimates the chosen candidate's speed (with an empty context and
// with one slot's context full) and its network share, asks llama.cpp
// itself with --verify, and measures the speed with --bench.
func (x planExtras) add(ctx context.Context, env Env, out *report.Plan, in *modelInputs, c *plan.Candidate, snap *hw.Snapshot) error {
	cpu, gpus := plan.Devices(snap)
	var err error
	if in.Arch != nil { // a projected architecture has no model to estimate from
		out.Speed = machineCalibration(env, snap, env.Stderr).EstimateProfile(in.Arch, c.Profile, cpu, gpus, snap, 0, c.CtxPerSlot)
		if out.Network, err = networkEstimate(in.Arch, c.Profile, cpu, gpus, snap, x.netGbps); err != nil {
			return err
		}
		if x.verify {
			if out.EngineCheck, err = engineCheck(ctx, env, in, c.Profile, cpu, gpus, x.llama); err != nil {
				return fmt.Errorf("--verify: %w", err)
			}
		}
	}
	if x.bench {
		out.Measured, err = measure(ctx, env, in, c.Profile, snap, c.CtxPerSlot, x.llama, x.budget, x.quiet)
	}
	return err
}

// searchProjected plans on llama.cpp's own projections, saying so as it
// goes unless quiet; a failed projection is the reason nothing is planned.
func searchProjected(ctx context.Context, env Env, pr *projection, snap *hw.Snapshot, opts plan.SearchOptions, quiet bool) (p *plan.Plan, why, says string) {
	var progress func(string)
	if !quiet {
		fmt.Fprintf(env.Stderr, "architecture %s is not one headroom models: asking %s to project each candidate\n", term.Text(pr.Basics.Arch), term.Text(pr.Bin))
		progress = func(line string) { fmt.Fprintln(env.Stderr, "  "+term.Text(line)) }
	}
	p, err := engine.SearchProjected(ctx, pr.Projector, snap, opts, progress)
	if err != nil {
		return nil, "llama.cpp's own projection failed: " + oneLine(err.Error()), ""
	}
	return p, "", projectedSays(pr)
}

// printPlan prints a plan that fits: the llama-server command line first,
// then why, the speed, the build and the engine check.
func printPlan(w io.Writer, in *modelInputs, p *plan.Plan, out report.Plan) {
	// The reference, device names and the explanation's sentences may
	// quote a header or a machine file: term.Text escapes them.
	args := p.Chosen.Command(modelArgs(in))
	fmt.Fprintf(w, "%s\n\n", wrapCommand(args, textWidth))
	line := func(s string) { fmt.Fprintln(w, wrap(term.Text(s), "  ", "    ", textWidth)) }
	if note := in.inputsNote(); note != "" {
		line(in.Ref + ": " + note)
	}
	for _, l := range p.Explain {
		line(l)
	}
	if p.Chosen.Profile.Embeds() {
		line(embedSpeedLine(out.Speed))
	} else {
		line(speedLine(out.Speed))
	}
	if out.Measured != nil {
		printMeasured(w, out.Measured, out.Speed)
	}
	if out.Network != nil {
		line(networkLine(out.Network))
	}
	line("engine: " + out.Engine.Says)
	for _, b := range out.Backends {
		if !b.Measured {
			line(fmt.Sprintf("backend %s (%s): %s", b.Backend, strings.Join(b.Devices, ", "), b.Says))
		}
	}
	if out.EngineCheck != nil {
		printCheck(w, out.EngineCheck)
	}
}

// modelArgs names the model on a llama-server command line: -m with a
// file, -hf with the Hub file a catalog variant or reference reads.
func modelArgs(in *modelInputs) []string {
	if in.Header == nil {
		if _, lock, e, v, err := catalogVariant(in.Ref); err == nil && e != nil {
			args := lock.ServerArgs(e, *v)
			for i := range args {
				args[i] = term.Text(args[i])
			}
			return args
		}
		return []string{"-hf", term.Text(strings.TrimPrefix(in.Ref, "hf:"))}
	}
	return []string{"-m", term.Text(in.Ref)}
}

// catalogSource is the reference a catalog variant's file is read from.
func catalogSource(ref string) string {
	cat, lock, e, v, err := catalogVariant(ref)
	if err != nil || e == nil || cat == nil {
		return ref
	}
	return lock.Source(e, *v)
}

// networkEstimate is the network share of a token for a plan over
// rpc-servers; nil for a plan on this machine alone.
func networkEstimate(m *arch.Model, p plan.Profile, cpu plan.Device, gpus []plan.Device, s *hw.Snapshot, gbps float64) (*speed.Network, error) {
	r, err := plan.Account(m, p, cpu, gpus)
	if err != nil {
		return nil, nil
	}
	return speed.NetworkTraffic(m, r, s, gbps)
}

func networkLine(n *speed.Network) string {
	return fmt.Sprintf("network: %.1f KiB per token across hosts (%s), %.2f ms per token at %g Gbit/s (%s), on top of the decode time above; per-message latency not counted; --network-gbps sets the link",
		float64(n.BytesPerToken)/1024, strings.Join(n.Crossings, ", "), n.Ms, n.Gbps, n.GbpsSource)
}

func speedLine(est []speed.Result) string {
	if len(est) != 2 || est[0].DecodeTPS == nil || est[1].DecodeTPS == nil {
		var why []string
		for _, e := range est {
			why = append(why, e.Unknown...)
		}
		if len(why) == 0 {
			return "decode speed: not estimated"
		}
		return "decode speed: unknown (" + why[0] + ")"
	}
	line := fmt.Sprintf("decode about %.0f tokens/s per slot with an empty context, %.0f with a full one", *est[0].DecodeTPS, *est[1].DecodeTPS)
	switch {
	case est[0].Calibrated && len(est[0].CalibratedOn) > 0:
		line += fmt.Sprintf(" (calibrated on this machine: %s off on its llama-bench runs, each left out of the fit; 'headroom bench --show')", errorRange(est[0].ErrorLowPct, est[0].ErrorHighPct))
	case est[0].Calibrated:
		line += fmt.Sprintf(" (off by %s on published llama-bench results of a 7B model it was not fitted on)", errorRange(est[0].ErrorLowPct, est[0].ErrorHighPct))
	default:
		line += " (uncalibrated backend: rough)"
	}
	return line
}

// embedSpeedLine is an embedding server's speed: it generates nothing, so
// what counts is how fast it reads its inputs (prompt processing).
func embedSpeedLine(est []speed.Result) string {
	if len(est) == 0 || est[0].PrefillTPS == nil {
		return "embedding speed: not estimated (prompt processing needs each device's published compute peak)"
	}
	return fmt.Sprintf("embeds at most about %.0f tokens/s: prompt processing at the devices' published compute peak, a ceiling rather than an estimate", *est[0].PrefillTPS)
}

// routerPresetTakes refuses the flags given (visit: flag.FlagSet.Visit)
// that a router presets file cannot carry for each model alone.
func routerPresetTakes(visit func(func(*flag.Flag))) error {
	var taken []string
	visit(func(f *flag.Flag) {
		if routerPresetRefuses[f.Name] {
			taken = append(taken, "--"+f.Name)
		}
	})
	if len(taken) > 0 {
		return usagef("--router-preset writes each model's flags alone and takes no %s", strings.Join(taken, ", "))
	}
	return nil
}

// judge sets the report's verdict, reason, plan and command from the
// search (report.Plan.Judge), and warns of an --mlock plan past this
// machine's RLIMIT_MEMLOCK where the plan is for this machine (here).
func judge(out *report.Plan, in *modelInputs, p *plan.Plan, why string, here bool) {
	out.Judge(p, in.ArchErr, why)
	if p == nil || p.Chosen == nil {
		return
	}
	out.Command = p.Chosen.Command(modelArgs(in))
	if r := p.Chosen.Result; r != nil && r.Reason != "" {
		if w := mlockWarning(plan.LockedBytes(r.Buffers, p.Chosen.Profile), here); w != "" {
			p.Explain = append(p.Explain, w)
		}
	}
}
