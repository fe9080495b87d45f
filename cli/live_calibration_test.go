package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
	"github.com/headroom-llm/headroom/synth"
)

// heldOut are shapes headroom bench does not measure: the calibration is
// judged on models it has not seen, of other families and sizes.
var heldOut = []struct{ shape, quant string }{
	{"gemma-3-1b", "Q8_0"},
	{"granite-3.3-2b", "Q4_K_M"},
	{"smollm3-3b", "Q4_K_M"},
}

// maxSwing is the widest ratio of the fastest to the slowest of a
// model's four runs beside one held-out shape that the test judges. Four
// runs spanning 1.5-fold have a standard deviation of about a fifth of
// their mean (the range over 2.06), so each mean is uncertain by about
// 10% and the ratio of two by about 14%: as much as the 15% judged, so
// such a shape is logged, not judged. Runs of one file on this project's
// VM a minute apart have differed up to 2.9-fold.
const maxSwing = 1.5

// swing is the fastest over the slowest of xs.
func swing(xs []float64) float64 {
	return slices.Max(xs) / slices.Min(xs)
}

// pairedWith is the reference model each held-out shape is measured
// beside: one bench measured, so its estimate is the calibration's.
const pairedWith = "llama-3.2-1b/Q4_K_M"

// After headroom bench on this machine, plan's decode estimate for three
// shapes it did not measure is within 15% of what llama-bench then
// measures for the plan's own flags, on files whose every weight is
// written (random), as bench's own reference twins are. The machine is
// the one the test runs on (CI's), probed for real.
//
// A machine's speed is not one figure: on this project's 2-core VM one
// file ran 43.0 then 29.7 tokens/s over 90 s of back-to-back llama-bench
// runs, idle otherwise (docs/speed.md), and no estimate can know where
// in that swing a later run falls. So each held-out shape is measured
// between runs of a reference model bench fitted (R H H R, twice), and the
// check is on what the estimate can know: the held-out shape's speed
// relative to the reference's, estimated against measured, within 15%.
// A shape whose own runs, or the reference's beside it, swing more than
// maxSwing is logged and not judged; the test skips when no shape could
// be.
// The plain errors, of the held-out shape and of the reference, are
// logged and held to 50%: the uncalibrated prior was off by -54%.
//
// Speed on two cores swings severalfold with other work on them, so the
// test runs only where HEADROOM_LIVE_SPEED=1 says the machine is otherwise
// idle. It is not in CI: run 5 in docs/speed.md judged one shape of
// three, at -14.3%, a point from the bound, and a red CI lands nothing.
func TestLiveCalibration(t *testing.T) {
	llamaServer := liveEngine(t)
	if os.Getenv("HEADROOM_LIVE_SPEED") != "1" {
		t.Skip("speed is measured with nothing else running: set HEADROOM_LIVE_SPEED=1 on an idle machine")
	}
	bench, err := engine.FindTool("llama-bench", llamaServer, nil)
	if err != nil {
		t.Skipf("no llama-bench beside %s", llamaServer)
	}
	home := t.TempDir()
	run := func(args ...string) (int, string, string) { return runIn(home, nil, args...) }
	code, out, errOut := run("bench", "--llama-server", llamaServer)
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("headroom bench:\n%s", out)
	refs, err := parseReferences(referenceModels)
	if err != nil {
		t.Fatal(err)
	}
	// estimate plans a file as a user would and returns plan's calibrated
	// decode estimate with the llama-bench flags of the plan.
	estimate := func(file string) (float64, []string) {
		t.Helper()
		code, out, errOut := run("plan", file, "-c", "4096", "-np", "1", "--llama-server", llamaServer, "--json")
		var got struct {
			Chosen *plan.Candidate `json:"chosen"`
			Speed  []speed.Result  `json:"speed"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || got.Chosen == nil || len(got.Speed) == 0 || got.Speed[0].DecodeTPS == nil {
			t.Fatalf("%s: plan exit %d (%v)\n%s\n%s", file, code, err, out, errOut)
		}
		if est := got.Speed[0]; !est.Calibrated || len(est.CalibratedOn) == 0 {
			t.Fatalf("%s: the estimate is not calibrated on this machine: %+v", file, est)
		}
		return *got.Speed[0].DecodeTPS, engine.BenchArgs(got.Chosen.Profile)
	}
	measure := func(file string, flags []string) float64 {
		t.Helper()
		args := append([]string{"-m", file, "-o", "json"}, flags...)
		args = append(args, "-p", "0", "-n", "32", "-r", "3")
		direct, err := exec.CommandContext(context.Background(), bench, args...).Output()
		if err != nil {
			t.Fatalf("llama-bench %v: %v", args, err)
		}
		var rows []struct {
			NGen int     `json:"n_gen"`
			Avg  float64 `json:"avg_ts"`
		}
		if err := json.Unmarshal(direct, &rows); err != nil || len(rows) != 1 || rows[0].NGen != 32 {
			t.Fatalf("llama-bench output %s (%v)", direct, err)
		}
		return rows[0].Avg
	}
	shape, quant, _ := strings.Cut(pairedWith, "/")
	if !slices.ContainsFunc(refs, func(r reference) bool { return r.shape == shape && r.quant == quant }) {
		t.Fatalf("%s is not a reference model: the pair needs one the calibration fitted", pairedWith)
	}
	judged := 0
	defer func() {
		if judged == 0 && !t.Failed() {
			t.Skipf("the machine's speed swung more than %.1f-fold under every held-out shape: nothing could be judged", maxSwing)
		}
	}()
	refFile := synthQuantFile(t, shape, quant, synth.WeightsRandom)
	refEst, refFlags := estimate(refFile)
	for _, h := range heldOut {
		if _, ok := synth.Lookup(h.shape); !ok {
			t.Fatalf("no shape %s", h.shape)
		}
		for _, r := range refs {
			if r.shape == h.shape {
				t.Fatalf("%s is a reference model; the check needs one bench did not measure", h.shape)
			}
		}
		file := synthQuantFile(t, h.shape, h.quant, synth.WeightsRandom)
		est, flags := estimate(file)
		// R H H R, twice: a drift over the eight runs slows both alike.
		var hs, rs []float64
		for range 2 {
			rs = append(rs, measure(refFile, refFlags))
			hs = append(hs, measure(file, flags), measure(file, flags))
			rs = append(rs, measure(refFile, refFlags))
		}
		if sw := max(swing(hs), swing(rs)); sw > maxSwing {
			t.Logf("%s %s: not judged: llama-bench measured it at %s and %s at %s tokens/s, a %.2f-fold swing, wider than a 15%% judgement can stand", h.shape, h.quant, figures(hs), pairedWith, figures(rs), sw)
			continue
		}
		judged++
		held, ref := mean(hs), mean(rs)
		plain, refPlain := est/held-1, refEst/ref-1
		paired := (est/refEst)/(held/ref) - 1
		t.Logf("%s %s: estimate %.2f tokens/s, llama-bench tg32 %s: %+.1f%%; beside %s (estimate %.2f, measured %s: %+.1f%%): %+.1f%% (%s)",
			h.shape, h.quant, est, figures(hs), plain*100, pairedWith, refEst, figures(rs), refPlain*100, paired*100, strings.Join(flags, " "))
		if math.Abs(paired) > 0.15 {
			t.Errorf("%s: estimated %.2fx the speed of %s, measured %.2fx: %+.1f%%", h.shape, est/refEst, pairedWith, held/ref, paired*100)
		}
		// The level itself, held to what this VM's swing leaves room for:
		// a calibration off by half (the prior was -54%) fails here.
		for _, e := range []float64{plain, refPlain} {
			if math.Abs(e) > 0.5 {
				t.Errorf("%s: the calibrated estimates are %+.1f%% (held out) and %+.1f%% (%s) off what was measured", h.shape, plain*100, refPlain*100, pairedWith)
				break
			}
		}
	}
}

func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// figures prints measured rates as "a, b, c".
func figures(xs []float64) string {
	var out []string
	for _, x := range xs {
		out = append(out, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(out, ", ")
}

// synthQuantFile writes a synth file of a shape in a quantization, its
// weights filled as w says.
func synthQuantFile(t testing.TB, shape, quant string, w synth.Weights) string {
	t.Helper()
	s, ok := synth.Lookup(shape)
	if !ok {
		t.Fatalf("no shape %s", shape)
	}
	b, err := synth.Build(s, synth.Quant(quant))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), shape+"-"+quant+".gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if w != synth.WeightsZero {
		f, err := b.Layout()
		if err != nil {
			t.Fatal(err)
		}
		if err := synth.FillFile(context.Background(), path, f, w.Selects, 7); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// BenchmarkBench records how long headroom bench takes on this machine
// with the real llama-bench (three reference twins written and measured).
func BenchmarkBench(b *testing.B) {
	llamaServer := os.Getenv("HEADROOM_LLAMA_SERVER")
	if llamaServer == "" {
		b.Skip("no real llama-server: set HEADROOM_LLAMA_SERVER")
	}
	home := b.TempDir()
	for b.Loop() {
		var out bytes.Buffer
		env := Env{Stdout: &out, Stderr: &out, Getenv: homeGetenv(home, nil)}
		if code := Main(context.Background(), []string{"bench", "--llama-server", llamaServer}, env); code != 0 {
			b.Fatalf("exit %d\n%s", code, out.String())
		}
	}
}
