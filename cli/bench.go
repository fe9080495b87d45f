package cli

import (
	"context"
	"fmt"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/scratch"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/term"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/speed"
	"github.com/headroom-llm/headroom/synth"
)

// benchFlags registers --bench and --bench-budget and returns them.
func benchFlags(fs *flags) (bench *bool, budget *time.Duration) {
	bench = fs.Bool("bench", false, "measure the plan's speed with llama.cpp's own llama-bench (beside --llama-server, or on PATH) on a sparse twin of the model's header, before any download: prompt and generation tokens per second, beside the estimate")
	budget = fs.Duration("bench-budget", engine.BenchBudget, "the most time --bench may take; fewer repetitions and tokens on a slow model, said in the output")
	return bench, budget
}

// measure runs llama-bench with profile p on the model: its own file
// where it is local, else a sparse twin of its header (a Hub model's
// header bytes, or the header synth writes for a catalog variant's
// shape), whose weights read as zeros.
//
// A measurement whose work all ran on one backend is kept with this
// machine's others (headroom bench), and so calibrates later estimates.
func measure(ctx context.Context, env Env, in *modelInputs, p plan.Profile, snap *hw.Snapshot, ctxPerSlot int, llamaServer string, budget time.Duration, quiet bool) (*speed.Measured, error) {
	bin, err := engine.FindTool("llama-bench", llamaServer, nil)
	if err != nil {
		return nil, fmt.Errorf("--bench: %w", err)
	}
	// Named by this process: twins left by a run that was killed
	// (SIGKILL) are removed here, by the next run.
	dir, err := scratch.Dir("headroom-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	model, twin, err := benchModel(ctx, env, in, dir)
	if err != nil {
		return nil, fmt.Errorf("--bench: %w", err)
	}
	var progress func(string)
	if !quiet {
		progress = func(line string) { fmt.Fprintln(env.Stderr, wrap(term.Text(line), "", "  ", textWidth)) }
	}
	m, err := engine.Bench(ctx, engine.BenchRequest{Bin: bin, Model: model, Twin: twin, Args: engine.BenchArgs(p),
		Depth: ctxPerSlot, Budget: budget, Env: os.Environ(), Progress: progress})
	if err != nil {
		return nil, fmt.Errorf("--bench: %w", err)
	}
	weights := string(synth.WeightsRouted)
	if twin == ownFile {
		weights = ""
	}
	keepSample(env, in.Ref, weights, in.Arch, p, snap, m)
	if p.Parallel > 1 {
		m.Notes = append(m.Notes, fmt.Sprintf("llama-bench runs one sequence; with all %d slots generating at once each gets less", p.Parallel))
	}
	if p.Companions != nil && p.Companions.Draft != nil {
		m.Notes = append(m.Notes, "measured without the draft model: what speculative decoding gains depends on the text")
	}
	return m, nil
}

// ownFile says a measurement ran on the model's own file.
const ownFile = "the model file itself"

// benchModel is the file llama-bench loads and what it is.
func benchModel(ctx context.Context, env Env, in *modelInputs, dir string) (path, what string, err error) {
	switch {
	case in.Header != nil && in.Header.Artifact != nil && len(in.Header.Artifact.Files) > 0 && in.Header.Artifact.Files[0].Path != "":
		return in.Header.Artifact.Files[0].Path, ownFile, nil
	case in.Header != nil:
		paths, err := source.NewClient(env.Getenv).WriteTwin(ctx, in.Header, dir)
		if err != nil {
			return "", "", err
		}
		what = "a sparse twin of the Hub file: its header bytes, then zeros to its size"
		if err := routeTwin(ctx, paths); err != nil {
			return "", "", err
		}
		what += routedSays
		return paths[0], what, nil
	case in.Shape != nil:
		s, err := in.Shape.Resolve()
		if err != nil {
			return "", "", err
		}
		b, err := synth.Build(s, synth.Quant(in.Quant))
		if err != nil {
			return "", "", err
		}
		path = filepath.Join(dir, "twin.gguf")
		if err := b.WriteFile(path); err != nil {
			return "", "", err
		}
		what = "a sparse twin synth writes from the catalog's shape and quantization: the same tensors, zeros for weights"
		if err := routeTwin(ctx, []string{path}); err != nil {
			return "", "", err
		}
		what += routedSays
		return path, what, nil
	}
	return "", "", fmt.Errorf("nothing to measure %s on", in.Ref)
}

// printMeasured prints what llama-bench measured, beside the estimate.
func printMeasured(w io.Writer, m *speed.Measured, est []speed.Result) {
	var parts []string
	for _, t := range m.Tests {
		what := "prompt"
		if t.Kind == "tg" {
			what = "generation"
		}
		at := ""
		if t.Depth > 0 {
			at = fmt.Sprintf(" after %d tokens of context", t.Depth)
		}
		parts = append(parts, fmt.Sprintf("%s %.1f ± %.1f tokens/s (%s%d%s, %d runs)", what, t.MeanTPS, t.StddevTPS, t.Kind, t.Tokens, at, t.Repetitions))
	}
	say := func(s string) { fmt.Fprintln(w, wrap(s, "  ", "    ", textWidth)) }
	say(fmt.Sprintf("measured by llama-bench %s in %.0f s: %s", m.Build, m.Seconds, strings.Join(parts, "; ")))
	if tg := m.Test("tg", 0); tg != nil && len(est) > 0 && est[0].DecodeTPS != nil {
		// A calibration fits the fastest repetition (speed.Pooled), so
		// that is what the estimate is held to; the mean is said too.
		best := slices.Max(append([]float64{tg.MeanTPS}, tg.SamplesTPS...))
		say(fmt.Sprintf("the estimate of %.1f tokens/s is %+.0f%% off the fastest repetition measured (%.1f), %+.0f%% off the mean",
			*est[0].DecodeTPS, (*est[0].DecodeTPS/best-1)*100, best, (*est[0].DecodeTPS/tg.MeanTPS-1)*100))
	}
	say("measured on " + m.Twin)
	for _, n := range m.Notes {
		say(n)
	}
}

// routedSays is what a twin with routing filled in adds to its
// description.
const routedSays = ", except the embedding, norms and expert routers, filled with pseudo-random values: each token's hidden state is its own and, in a mixture of experts, so are its experts (docs/speed.md: in generation such twins ran from 4% slower to 28% faster than fully random copies here, zero ones 6-50% faster)"

// routeTwin fills the tensors that make each token's computation its own
// (synth.RoutingTensor: the embedding, the norms, the expert routers) in
// a twin's files with pseudo-random values. With every weight zero a
// router's logits tie, every token picks the same experts, and a batch
// reads a fraction of the expert weights a real model's batch reads;
// and zero activations run faster than real ones even in a dense model
// (docs/speed.md measures both).
func routeTwin(ctx context.Context, paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		var h *gguf.File
		st, err := f.Stat()
		if err == nil {
			h, err = gguf.Read(f, st.Size())
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("reading the twin's header %s: %w", p, err)
		}
		// Shards hold different tensors; each is filled where it lies.
		if err := synth.FillFile(ctx, p, h, synth.RoutingTensor, 1); err != nil {
			return fmt.Errorf("filling the twin's embedding, norms and routers: %w", err)
		}
	}
	return nil
}
