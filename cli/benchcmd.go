package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/scratch"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/term"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
	"github.com/headroom-llm/headroom/synth"
)

// referenceModels are the shapes a machine is calibrated on: small
// enough to load and run in seconds on two cores, in two quantizations
// (Q8_0 and Q4_K, whose kernels differ), and different enough in bytes
// per layer (a 0.5B model of 24 layers beside a 1.2B of 16) that the
// bandwidth term and the per-layer cost can be told apart. Names are
// synth shapes.
const referenceModels = "qwen2.5-0.5b/Q8_0,qwen3-0.6b/Q4_K_M,tinyllama-1.1b/Q8_0,llama-3.2-1b/Q4_K_M"

// reference is one model bench measures: a synth shape in a quantization.
type reference struct{ shape, quant string }

// parseReferences reads --models: SHAPE/QUANT, comma-separated.
func parseReferences(list string) ([]reference, error) {
	var out []reference
	for _, item := range splitList(list) {
		shape, quant, ok := strings.Cut(item, "/")
		if !ok {
			return nil, usagef("--models: %q is not SHAPE/QUANT (e.g. qwen3-0.6b/Q4_K_M)", item)
		}
		if _, found := synth.Lookup(shape); !found {
			return nil, usagef("--models: no shape %q (headroom synth --help lists them)", shape)
		}
		if _, err := synth.ParseQuant(quant); err != nil {
			return nil, usagef("--models: %v", err)
		}
		out = append(out, reference{shape, quant})
	}
	if len(out) < speed.MinSamples {
		return nil, usagef("--models: a calibration needs %d models or more, got %d", speed.MinSamples, len(out))
	}
	return out, nil
}

// bench sizes: short enough that the four reference models take about a
// minute on a 2-core machine (38.8 s in CI, writing them included), long
// enough that one llama-bench run's spread is a few percent.
const (
	benchPrompt = 128
	benchGen    = 32
)

const benchHelp = `
Measures this machine's speed with llama.cpp's own llama-bench, on a few small
reference models, and fits headroom's speed estimate to it. The models are
twins synth writes: the real tensors in their real types, every weight filled
with pseudo-random values (zero weights run faster than real ones:
docs/speed.md), so nothing is downloaded. Each backend of the machine is
measured with all layers on it: the CPU with -ngl 0, each GPU backend with
every layer offloaded where the model fits.

The runs are kept in the user cache directory under this machine's hardware
(CPU, memory size, GPUs; a new DIMM or card starts afresh), with the llama.cpp
build that made them. From then on plan, fit and recommend estimate decode
and prompt speed with the parameters fitted to them, and say "calibrated on
this machine"; --bench on plan and fit adds its runs to the same set. What the
fit is off by is said as the range of its errors on each run left out of it.

Each model is measured in two passes, in order and then in reverse, of --reps
repetitions each, and the fastest repetition is what is fitted: other work on
the machine only ever slows a run, so the estimates are this machine's speed
with nothing else busy. Takes a minute or two on a 2-core CPU (67-68 s measured); run
it with nothing else busy, since other work on the same cores changes the
figures severalfold.

Examples:
  headroom bench
  headroom bench --llama-server ~/llama.cpp/build/bin/llama-server
  headroom bench --show
  headroom bench --json`

func runBenchCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "bench", "[flags]", benchHelp)
	llama := llamaServerFlag(fs)
	reps := fs.Int("reps", 3, "repetitions of each llama-bench test in each of the two passes; the fastest of them is fitted")
	show := fs.Bool("show", false, "print the calibration kept for this machine without measuring")
	forget := fs.Bool("forget", false, "delete this machine's kept measurements")
	asJSON := fs.Bool("json", false, "print the runs and the fitted parameters as JSON")
	models := fs.String("models", referenceModels, "the reference models, SHAPE/QUANT comma-separated (synth shapes: headroom synth --help)")
	weights := fs.String("weights", string(synth.WeightsRandom), "the reference twins' weights: random (every tensor written, as fast as a real model's; temporary files, 2.9 GB for the default models (file sizes summed), kept until both passes are done), routed or zero (sparse files, faster to write, and faster to run than real weights: docs/speed.md)")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %q", strings.Join(pos, " "))
	}
	if *reps < 1 || *reps > 20 {
		return usagef("--reps must be 1 to 20, not %d", *reps)
	}
	w, err := synth.ParseWeights(*weights)
	if err != nil {
		return usagef("--weights: %v", err)
	}
	refs, err := parseReferences(*models)
	if err != nil {
		return err
	}
	// The bandwidth is measured again here, where the machine is idle,
	// and kept if higher: a first figure taken while the cores were busy
	// is low, and the efficiency is fitted against it.
	snap, err := env.probe(ctx, probeOptions(env, *llama, !*show && !*forget))
	if err != nil {
		return err
	}
	st, ok := samplesFor(env, snap)
	if !ok {
		return errors.New("bench: no place to keep measurements: the probe named no hardware, or neither XDG_CACHE_HOME nor HOME is set")
	}
	switch {
	case *forget:
		if err := st.Forget(); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "forgot this machine's speed measurements (%s)\n", st.Path())
		return nil
	case *show:
		samples, err := st.Load()
		if err != nil && samples == nil {
			return err
		} else if err != nil {
			fmt.Fprintln(env.Stderr, wrap(term.Text(err.Error()), "headroom bench: ", "  ", textWidth))
		}
		return printCalibration(env.Stdout, *asJSON, samples, nil, snap)
	}
	bin, err := engine.FindTool("llama-bench", *llama, nil)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	runs, err := referenceRuns(snap, refs)
	if err != nil {
		return err
	}
	fresh, err := benchReference(ctx, env, bin, snap, runs, w, *reps, *asJSON)
	if err != nil {
		return err
	}
	if err := st.Add(fresh...); err != nil {
		return fmt.Errorf("bench: keeping the runs: %w", err)
	}
	all, err := st.Load()
	if err != nil && all == nil {
		return err
	}
	return printCalibration(env.Stdout, *asJSON, all, fresh, snap)
}

// referenceRun is one reference model measured on one backend.
type referenceRun struct {
	name    string
	shape   synth.Shape
	quant   synth.Quant
	model   *arch.Model
	backend string
	profile plan.Profile
	result  *plan.Result
}

// referenceRuns lists the runs for this machine: every reference model
// on the CPU, and on each GPU backend with every layer offloaded where
// the plan says it fits.
func referenceRuns(snap *hw.Snapshot, refs []reference) ([]referenceRun, error) {
	cpu, gpus := plan.Devices(snap)
	backends := []string{}
	for _, g := range gpus {
		if dv := snap.Device(g.Name); dv != nil && !slices.Contains(backends, dv.Backend) {
			backends = append(backends, dv.Backend)
		}
	}
	var out []referenceRun
	for _, backend := range append([]string{"CPU"}, backends...) {
		for _, rm := range refs {
			shape, ok := synth.Lookup(rm.shape)
			if !ok {
				return nil, fmt.Errorf("bench: no reference shape %s (a bug)", rm.shape)
			}
			m, err := synth.Model(shape, synth.Quant(rm.quant))
			if err != nil {
				return nil, err
			}
			p := plan.Defaults()
			p.Ctx, p.Parallel, p.GPULayers = benchPrompt+benchGen, 1, 0
			var devs []plan.Device
			if backend != "CPU" {
				p.GPULayers = m.NLayer + 1
				for _, g := range gpus {
					if dv := snap.Device(g.Name); dv != nil && dv.Backend == backend {
						devs = append(devs, g)
					}
				}
			}
			r, err := plan.Account(m, p, cpu, devs)
			if err != nil {
				continue
			}
			if a, err := plan.Assess(m, nil, p, snap); err != nil || a.Verdict != plan.Fits {
				continue
			}
			out = append(out, referenceRun{name: rm.shape + " " + rm.quant, shape: shape, quant: synth.Quant(rm.quant), model: m, backend: backend, profile: p, result: r})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("bench: no reference model fits this machine's memory now")
	}
	return out, nil
}

// benchReference runs llama-bench on each reference run's twin and turns
// the measurements into samples, printing progress on stderr. The runs
// are measured twice, in order and then in reverse (A B C D D C B A): a
// machine whose speed drifts while it works (this project's VM lost 30%
// over 90 s of back-to-back runs of one file, docs/speed.md) then slows
// each model's pair of runs alike, instead of making the models measured
// first look faster than the rest.
func benchReference(ctx context.Context, env Env, bin string, snap *hw.Snapshot, runs []referenceRun, w synth.Weights, reps int, quiet bool) ([]speed.Sample, error) {
	// Named by this process: twins left by a run that was killed
	// (SIGKILL) are removed here, by the next run.
	dir, err := scratch.Dir("headroom-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	order := make([]int, 0, 2*len(runs))
	for i := range runs {
		order = append(order, i)
	}
	for i := range runs {
		order = append(order, len(runs)-1-i)
	}
	paths := map[string]string{}
	var out []speed.Sample
	start := time.Now()
	for step, i := range order {
		run := runs[i]
		say := func(format string, a ...any) {
			head := fmt.Sprintf("%s %d/%d %s on %s: ", bar(step, len(order)), step+1, len(order), run.name, run.backend)
			fmt.Fprintln(env.Stderr, wrap(fmt.Sprintf(format, a...), head, "    ", textWidth))
		}
		path, ok := paths[run.name]
		if !ok {
			path = filepath.Join(dir, fmt.Sprintf("ref-%d.gguf", len(paths)))
			if w != synth.WeightsZero {
				say("writing %s weights", w)
			}
			if err := writeTwin(ctx, path, run, w); err != nil {
				return nil, err
			}
			paths[run.name] = path
		}
		args := engine.BenchArgs(run.profile)
		say("llama-bench pp%d tg%d x%d %s", benchPrompt, benchGen, reps, strings.Join(args, " "))
		meas, err := engine.BenchOnce(ctx, engine.BenchRequest{Bin: bin, Model: path, Twin: fmt.Sprintf("a twin synth writes, %s weights", w), Args: args, Env: os.Environ()}, benchPrompt, benchGen, reps)
		if err != nil {
			return nil, fmt.Errorf("bench: %s on %s: %w", run.name, run.backend, err)
		}
		smp, err := speed.NewSample(run.name, run.model, run.result, snap, meas)
		if err != nil {
			return nil, fmt.Errorf("bench: %s on %s: %w", run.name, run.backend, err)
		}
		smp.Weights = string(w)
		if !quiet {
			say("generation %.1f ± %.1f tokens/s (fastest %.1f), prompt %.1f ± %.1f (%.0f s)", smp.DecodeTPS, smp.DecodeStddev, smp.DecodeBest, smp.PrefillTPS, smp.PrefillStddev, meas.Seconds)
		}
		out = append(out, smp)
	}
	fmt.Fprintf(env.Stderr, "%s %d runs in %.0f s\n", bar(len(order), len(order)), len(order), time.Since(start).Seconds())
	return out, nil
}

// writeTwin writes run's twin to path with weights w.
func writeTwin(ctx context.Context, path string, run referenceRun, w synth.Weights) error {
	b, err := synth.Build(run.shape, run.quant)
	if err != nil {
		return err
	}
	if err := b.WriteFile(path); err != nil {
		return err
	}
	if w == synth.WeightsZero {
		return nil
	}
	f, err := b.Layout()
	if err != nil {
		return err
	}
	return synth.FillFile(ctx, path, f, w.Selects, 1)
}

// bar draws done of n as a 20-column progress bar.
func bar(done, n int) string {
	full := 20 * done / max(n, 1)
	return "[" + strings.Repeat("#", full) + strings.Repeat(".", 20-full) + "]"
}

// printCalibration prints what the kept runs fit, and each fresh run
// beside the estimate before and after.
func printCalibration(w io.Writer, asJSON bool, all, fresh []speed.Sample, snap *hw.Snapshot) error {
	current := speed.Current(all, snap)
	cal := speed.Fit(current, "")
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Hardware    string             `json:"hardware"`
			Runs        []speed.Sample     `json:"runs"`
			Kept        int                `json:"kept_runs"`
			Calibration *speed.Calibration `json:"calibration"`
		}{snap.Hardware, fresh, len(all), cal})
	}
	fmt.Fprintf(w, "machine: %s\n", term.Text(snap.Hardware))
	for _, d := range snap.Domains {
		if d.BandwidthGBps > 0 {
			fmt.Fprintf(w, "  %s: %.1f GB/s (%s)\n", d.ID, d.BandwidthGBps, term.Text(d.BandwidthSource))
		}
	}
	if stale := len(all) - len(current); stale > 0 {
		fmt.Fprintf(w, "%d kept runs were fitted against another bandwidth figure and are left out\n", stale)
	}
	if cal == nil {
		fmt.Fprintf(w, "not calibrated: %d runs kept; a backend needs runs of %d models or more of one llama.cpp build ('headroom bench' makes them)\n", len(all), speed.MinSamples)
		return nil
	}
	fitted := 0
	for _, b := range cal.Backends {
		fitted += b.Samples
	}
	fmt.Fprintf(w, "calibrated from %d kept runs of llama.cpp %s\n", fitted, term.Text(cal.Build))
	names := make([]string, 0, len(cal.Backends))
	for n := range cal.Backends {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		b := cal.Backends[n]
		line := fmt.Sprintf("  %s: %.0f%% of the bandwidth figure, %.4f ms per one-dimensional weight per token", n, b.Efficiency*100, b.VectorOverheadMs)
		if b.PrefillGFLOPS > 0 {
			line += fmt.Sprintf(", prompt at %.0f GFLOP/s", b.PrefillGFLOPS)
		}
		fmt.Fprintln(w, line)
		fmt.Fprintf(w, "    %d runs of %s; with each left out, its estimate was %s off\n", b.Samples, strings.Join(b.Models, ", "), errorRange(b.ErrorLowPct, b.ErrorHighPct))
	}
	if len(fresh) > 0 {
		fmt.Fprintln(w, "this run, tokens/s: measured by llama-bench (the fastest repetition, each pass's in brackets), estimated by the fit, and by the prior before it")
		fmt.Fprintf(w, "  %-22s %-4s %-19s %-12s %-13s %s\n", "model", "on", "generation", "fitted", "prior", "prompt (fitted)")
		passes := map[string][]string{}
		for _, s := range fresh {
			k := s.Model + "\x00" + s.Backend
			passes[k] = append(passes[k], fmt.Sprintf("%.1f", s.DecodeBest))
		}
		for _, s := range speed.Pooled(fresh) {
			b, ok := cal.Backends[s.Backend]
			if !ok {
				continue
			}
			fitted := 1000 / b.TimeMs(s.FullBandwidthMs, s.Layers, s.VectorOps)
			prior := "-"
			if p, ok := speed.BackendParams(s.Backend); ok && p.Efficiency > 0 {
				v := 1000 / p.TimeMs(s.FullBandwidthMs, s.Layers, s.VectorOps)
				prior = fmt.Sprintf("%.1f (%+.0f%%)", v, (v/s.DecodeTPS-1)*100)
			}
			prompt := "-"
			if b.PrefillGFLOPS > 0 && s.PrefillTPS > 0 {
				pp := b.PrefillGFLOPS * 1e9 / (2 * float64(s.ActiveParams))
				prompt = fmt.Sprintf("%.0f (%+.0f%%)", s.PrefillTPS, (pp/s.PrefillTPS-1)*100)
			}
			gen := fmt.Sprintf("%.1f", s.DecodeTPS)
			if p := passes[s.Model+"\x00"+s.Backend]; len(p) > 1 {
				gen += " (" + strings.Join(p, "/") + ")"
			}
			fmt.Fprintf(w, "  %-22s %-4s %-19s %-12s %-13s %s\n", s.Model, s.Backend, gen,
				fmt.Sprintf("%.1f (%+.0f%%)", fitted, (fitted/s.DecodeTPS-1)*100), prior, prompt)
		}
	}
	return nil
}
