package cli

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/speed"
)

// fit --bench's generation speed agrees with a separate llama-bench run
// of the same file, flags and sizes, on two shapes: the fastest
// repetition of each within 10% of the other.
//
// The fastest repetition, because this VM's speed swings with nothing in
// it to show why (single repetitions of one file 14.1-44.2 tokens/s
// minutes apart; docs/speed.md) and other work only ever slows a run: CI
// once had --bench at 42.99 ± 0.32 where llama-bench right after gave
// 29.74 ± 0.83. So each side keeps its fastest over up to four rounds
// (--bench, then llama-bench, in turn) and the test stops at the first
// round where they agree. What it still catches is --bench measuring
// something else: other threads, flags or sizes move the fastest of every
// round, not only some.
//
// Two busy cores slow llama.cpp's threads tenfold (2.48 against 29.64
// tokens/s once in CI, with other packages' tests running beside it), so
// the test runs only where HEADROOM_LIVE_SPEED=1 says nothing else runs:
// .ci/run runs it alone after the suite.
func TestLiveBench(t *testing.T) {
	llamaServer := liveEngine(t)
	if os.Getenv("HEADROOM_LIVE_SPEED") != "1" {
		t.Skip("speed is measured with nothing else running: set HEADROOM_LIVE_SPEED=1 on an idle machine")
	}
	bench, err := engine.FindTool("llama-bench", llamaServer, nil)
	if err != nil {
		t.Skipf("no llama-bench beside %s", llamaServer)
	}
	const rounds, within = 4, 0.10
	for _, shape := range []string{"qwen3-0.6b", "llama-3.2-1b"} {
		file := synthFile(t, shape)
		var viaFit, direct float64
		for round := 1; ; round++ {
			tg, args := liveFitBench(t, shape, file, llamaServer)
			viaFit = max(viaFit, tg.MeanTPS, slices.Max(append([]float64{0}, tg.SamplesTPS...)))
			samples := liveLlamaBench(t, shape, bench, args)
			direct = max(direct, slices.Max(samples))
			off := viaFit/direct - 1
			t.Logf("%s round %d: --bench tg%d fastest %.2f (this round %.2f ± %.2f, %v), llama-bench fastest %.2f (this round %.2f), %+.1f%%",
				shape, round, tg.Tokens, viaFit, tg.MeanTPS, tg.StddevTPS, tg.SamplesTPS, direct, slices.Max(samples), 100*off)
			if math.Abs(viaFit-direct) <= within*max(viaFit, direct) {
				break
			}
			if round == rounds {
				t.Errorf("%s: --bench's fastest repetition %.2f tokens/s, llama-bench's %.2f (%+.1f%%) after %d rounds; allowed %.0f%%",
					shape, viaFit, direct, 100*off, rounds, 100*within)
				break
			}
		}
	}
}

// liveFitBench runs fit --bench on file and returns its generation test
// and the llama-bench arguments it used, sizes included.
func liveFitBench(t *testing.T, shape, file, llamaServer string) (*speed.BenchTest, []string) {
	t.Helper()
	code, out, errOut := run(t, "fit", file, "-c", "4096", "-np", "1", "--llama-server", llamaServer, "--bench", "--bench-budget", "45s", "--json", "--quiet")
	var got struct {
		Measured *speed.Measured `json:"speed_measured"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || got.Measured == nil {
		t.Fatalf("%s: exit %d (%v)\n%s\n%s", shape, code, err, out, errOut)
	}
	tg, pp := got.Measured.Test("tg", 0), got.Measured.Test("pp", 0)
	if tg == nil || pp == nil {
		t.Fatalf("%s: tests %+v", shape, got.Measured.Tests)
	}
	args := append([]string{"-m", file, "-o", "json"}, got.Measured.Args...)
	args = append(args, "-p", strconv.Itoa(pp.Tokens), "-n", strconv.Itoa(tg.Tokens), "-r", strconv.Itoa(max(tg.Repetitions, 3)))
	return tg, args
}

// liveLlamaBench runs llama-bench with args and returns its generation
// test's repetitions in tokens/s.
func liveLlamaBench(t *testing.T, shape, bench string, args []string) []float64 {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), bench, args...).Output()
	if err != nil {
		t.Fatalf("%s: llama-bench %v: %v", shape, args, err)
	}
	var rows []struct {
		NGen    int       `json:"n_gen"`
		Avg     float64   `json:"avg_ts"`
		Samples []float64 `json:"samples_ts"`
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("%s: llama-bench's JSON: %v\n%s", shape, err, out)
	}
	for _, r := range rows {
		if r.NGen > 0 {
			return append([]float64{r.Avg}, r.Samples...)
		}
	}
	t.Fatalf("%s: llama-bench gave no generation row:\n%s", shape, out)
	return nil
}

// BenchmarkPlanBench records how long plan --bench takes end to end on a
// catalog variant with the real llama-bench (synth's twin written, the
// probe, the main run) under a 20 s budget.
func BenchmarkPlanBench(b *testing.B) {
	llamaServer := os.Getenv("HEADROOM_LLAMA_SERVER")
	if llamaServer == "" {
		b.Skip("no real llama-server: set HEADROOM_LLAMA_SERVER")
	}
	for b.Loop() {
		if code, out, errOut := run(b, "plan", "qwen3-0.6b/Q4_K_M", "--llama-server", llamaServer, "-np", "1", "--bench", "--bench-budget", "20s", "--quiet"); code != 0 {
			b.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
	}
}
