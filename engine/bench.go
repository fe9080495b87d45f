package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

// BenchBudget is how long a measurement may take unless the user says
// otherwise: long enough for a few repetitions of a small model on two
// cores, short enough to wait for.
const BenchBudget = 60 * time.Second

// BenchArgs are llama-bench's flags for the memory and placement of
// profile p: the ones that change what is read per token and where it
// is computed. llama-bench sizes its own context to each test, runs one
// sequence, and takes the same -ngl, -fa, -ctk/-ctv, -b/-ub, -ncmoe, -ot,
// -ts, -nkvo and --load-mode as llama-server.
func BenchArgs(p plan.Profile) []string {
	var a []string
	if p.GPULayers >= 0 {
		a = append(a, "-ngl", strconv.Itoa(p.GPULayers))
	}
	if p.FlashAttn != "" {
		a = append(a, "-fa", string(p.FlashAttn))
	}
	if p.CacheK != "" {
		a = append(a, "-ctk", p.CacheK)
	}
	if p.CacheV != "" {
		a = append(a, "-ctv", p.CacheV)
	}
	if p.Batch > 0 {
		a = append(a, "-b", strconv.Itoa(p.Batch))
	}
	if p.UBatch > 0 {
		a = append(a, "-ub", strconv.Itoa(p.UBatch))
	}
	if p.CPUMoE > 0 {
		a = append(a, "-ncmoe", strconv.Itoa(p.CPUMoE))
	}
	if len(p.Overrides) > 0 {
		ot := make([]string, len(p.Overrides))
		for i, o := range p.Overrides {
			ot[i] = o.Pattern + "=" + o.Buft
		}
		a = append(a, "-ot", strings.Join(ot, ";"))
	}
	if len(p.TensorSplit) > 0 {
		ts := make([]string, len(p.TensorSplit))
		for i, f := range p.TensorSplit {
			ts[i] = strconv.FormatFloat(f, 'f', -1, 64)
		}
		a = append(a, "-ts", strings.Join(ts, "/"))
	}
	if p.NoKVOffload {
		a = append(a, "-nkvo", "1")
	}
	if !p.Mmap {
		a = append(a, "-lm", "none")
	}
	return a
}

// BenchRequest is one measurement: llama-bench Bin on Model with Args.
type BenchRequest struct {
	Bin, Model string
	// Twin says what Model is, for the result (see speed.Measured.Twin).
	Twin string
	Args []string
	// Depth is the context filled before the full-context generation
	// figure; 0 measures none.
	Depth int
	// Budget bounds the whole measurement; 0 is BenchBudget.
	Budget time.Duration
	Env    []string
	// Progress, when set, hears each step before it runs.
	Progress func(string)
}

// benchShape is one choice of the main run's size.
type benchShape struct{ pp, tg, reps int }

// benchShapes are the main run's sizes, most thorough first: the first
// that the probe says fits the budget is run.
func benchShapes() []benchShape {
	return []benchShape{{512, 128, 5}, {512, 64, 5}, {512, 64, 3}, {512, 32, 3}, {256, 32, 2}, {128, 16, 2}, {128, 16, 1}}
}

// Bench measures prompt processing and generation speed with llama-bench
// within the request's budget. A short probe (128 prompt tokens, 16
// generated, once) times the model first; the main run then takes the
// most repetitions and tokens the remaining budget allows, and the
// full-context generation figure follows when there is time to fill the
// context. What the budget cut is said in Notes.
func Bench(ctx context.Context, r BenchRequest) (*speed.Measured, error) {
	budget := r.Budget
	if budget <= 0 {
		budget = BenchBudget
	}
	say := func(format string, args ...any) {
		if r.Progress != nil {
			r.Progress(fmt.Sprintf(format, args...))
		}
	}
	start := time.Now()
	m := &speed.Measured{Tool: r.Bin, Args: r.Args, Twin: r.Twin}
	say("llama-bench: probing (128 prompt tokens, 16 generated, once)")
	probe, build, err := runBench(ctx, r, "-p", "128", "-n", "16", "-r", "1")
	if err != nil {
		return nil, err
	}
	m.Build = build
	pp, tg := probe.Test("pp", 0), probe.Test("tg", 0)
	if pp == nil || tg == nil || pp.MeanTPS <= 0 || tg.MeanTPS <= 0 {
		return nil, fmt.Errorf("llama-bench's probe measured no speed: %+v", probe.Tests)
	}
	probeTime := time.Since(start).Seconds()
	perToken := func(pps, tgs int) float64 { return float64(pps)/pp.MeanTPS + float64(tgs)/tg.MeanTPS }
	// Loading and warming up: paid again by every run; about 19 s of a
	// 30 s probe for a 1.9 GiB 3B twin on two cores (docs/speed.md).
	overhead := max(probeTime-perToken(128, 16), 0)
	left := budget.Seconds() - probeTime
	var depthCost float64
	if r.Depth > 0 {
		// Filling the context reads ever more KV; half again on top of
		// the empty-context prefill is a margin, not a model.
		depthCost = overhead + 1.5*float64(r.Depth)/pp.MeanTPS + perToken(0, 16)
	}
	// The main run comes first; time for the full-context figure is kept
	// back only where it is at most half of what is left.
	reserve := 0.0
	if depthCost <= left/2 {
		reserve = depthCost
	}
	shapes := benchShapes()
	chosen := benchShape{}
	for _, s := range shapes {
		if overhead+float64(s.reps)*perToken(s.pp, s.tg) <= left-reserve {
			chosen = s
			break
		}
	}
	if chosen.reps == 0 {
		m.Tests = probe.Tests
		m.Notes = append(m.Notes, fmt.Sprintf("only the probe fitted the %s budget (one run of 128 prompt tokens and 16 generated, after %.0f s of loading and warming up); --bench-budget gives more", budget, overhead))
	} else {
		if chosen != shapes[0] {
			m.Notes = append(m.Notes, fmt.Sprintf("%d prompt and %d generated tokens, %d repetitions, to stay within the %s budget (llama-bench's defaults are 512, 128 and 5)", chosen.pp, chosen.tg, chosen.reps, budget))
		}
		say("llama-bench: pp%d and tg%d, %d repetitions (about %.0f s)", chosen.pp, chosen.tg, chosen.reps, overhead+float64(chosen.reps)*perToken(chosen.pp, chosen.tg))
		main, _, err := runBench(ctx, r, "-p", strconv.Itoa(chosen.pp), "-n", strconv.Itoa(chosen.tg), "-r", strconv.Itoa(chosen.reps))
		if err != nil {
			return nil, err
		}
		m.Tests = main.Tests
	}
	if r.Depth > 0 {
		left = budget.Seconds() - time.Since(start).Seconds()
		if depthCost <= left {
			say("llama-bench: tg16 after %d tokens of context (about %.0f s)", r.Depth, depthCost)
			deep, _, err := runBench(ctx, r, "-p", "0", "-n", "16", "-d", strconv.Itoa(r.Depth), "-r", "1")
			if err != nil {
				return nil, err
			}
			m.Tests = append(m.Tests, deep.Tests...)
		} else {
			m.Notes = append(m.Notes, fmt.Sprintf("generation with the context full (%d tokens) not measured: filling it would take about %.0f s at the measured prompt speed, past what is left of the %s budget", r.Depth, depthCost, budget))
		}
	}
	m.Seconds = time.Since(start).Seconds()
	return m, nil
}

// BenchOnce runs llama-bench once with pp prompt tokens, tg generated
// and reps repetitions, without a probe or a budget: for a caller that
// has sized the run itself, such as a machine's calibration on small
// reference models. r.Depth and r.Budget are not used.
func BenchOnce(ctx context.Context, r BenchRequest, pp, tg, reps int) (*speed.Measured, error) {
	start := time.Now()
	m, build, err := runBench(ctx, r, "-p", strconv.Itoa(pp), "-n", strconv.Itoa(tg), "-r", strconv.Itoa(reps))
	if err != nil {
		return nil, err
	}
	m.Tool, m.Build, m.Args, m.Twin, m.Seconds = r.Bin, build, r.Args, r.Twin, time.Since(start).Seconds()
	return m, nil
}

// benchRow is the part of llama-bench's JSON output headroom reads.
type benchRow struct {
	BuildCommit string    `json:"build_commit"`
	BuildNumber int       `json:"build_number"`
	NPrompt     int       `json:"n_prompt"`
	NGen        int       `json:"n_gen"`
	NDepth      int       `json:"n_depth"`
	AvgTS       float64   `json:"avg_ts"`
	StddevTS    float64   `json:"stddev_ts"`
	SamplesTS   []float64 `json:"samples_ts"`
}

// runBench runs llama-bench once with the request's flags and size, and
// reads its JSON.
func runBench(ctx context.Context, r BenchRequest, size ...string) (*speed.Measured, string, error) {
	args := append([]string{"-m", r.Model, "-o", "json"}, r.Args...)
	args = append(args, size...)
	cmd := exec.CommandContext(ctx, r.Bin, args...)
	cmd.Env = r.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("llama-bench %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 3))
	}
	return parseBench(stdout.Bytes())
}

// parseBench reads llama-bench's -o json output.
func parseBench(out []byte) (*speed.Measured, string, error) {
	var rows []benchRow
	if err := json.Unmarshal(out, &rows); err != nil {
		return nil, "", fmt.Errorf("reading llama-bench's JSON output: %w", err)
	}
	if len(rows) == 0 {
		return nil, "", fmt.Errorf("llama-bench printed no results")
	}
	m := &speed.Measured{}
	for _, row := range rows {
		t := speed.BenchTest{Kind: "pp", Tokens: row.NPrompt, Depth: row.NDepth, Repetitions: len(row.SamplesTS),
			MeanTPS: row.AvgTS, StddevTPS: row.StddevTS, SamplesTPS: row.SamplesTS}
		if row.NGen > 0 {
			t.Kind, t.Tokens = "tg", row.NGen
		}
		m.Tests = append(m.Tests, t)
	}
	build := rows[0].BuildCommit
	if n := rows[0].BuildNumber; n > 1 {
		build = fmt.Sprintf("b%d (%s)", n, build)
	}
	return m, build, nil
}

// lastLines is the last n non-empty lines of s, joined.
func lastLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, " | ")
}
