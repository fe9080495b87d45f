package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
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

// After headroom bench on this machine, plan's decode estimate for three
// shapes it did not measure is within 15% of what llama-bench then
// measures for the plan's own flags, on files whose every weight is
// written (random), as bench's own reference twins are. The machine is the one the test
// runs on (CI's), probed for real.
//
// Speed on two cores swings severalfold with other work on them, so the
// test runs only where HEADROOM_LIVE_SPEED=1 says the machine is otherwise
// idle. It is not in CI: on this project's 2-core VM the same file ran
// 13.1 to 21.0 tokens/s in runs minutes apart with nothing else running
// (docs/speed.md), more than the 15% it holds the estimate to.
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
	for _, h := range heldOut {
		if _, ok := synth.Lookup(h.shape); !ok {
			t.Fatalf("no shape %s", h.shape)
		}
		refs, err := parseReferences(referenceModels)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			if r.shape == h.shape {
				t.Fatalf("%s is a reference model; the check needs one bench did not measure", h.shape)
			}
		}
		file := synthQuantFile(t, h.shape, h.quant, synth.WeightsRandom)
		code, out, errOut := run("plan", file, "-c", "4096", "-np", "1", "--llama-server", llamaServer, "--json")
		var got struct {
			Chosen *plan.Candidate `json:"chosen"`
			Speed  []speed.Result  `json:"speed"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || got.Chosen == nil || len(got.Speed) == 0 || got.Speed[0].DecodeTPS == nil {
			t.Fatalf("%s: plan exit %d (%v)\n%s\n%s", h.shape, code, err, out, errOut)
		}
		est := got.Speed[0]
		if !est.Calibrated || len(est.CalibratedOn) == 0 {
			t.Fatalf("%s: the estimate is not calibrated on this machine: %+v", h.shape, est)
		}
		args := append([]string{"-m", file, "-o", "json"}, engine.BenchArgs(got.Chosen.Profile)...)
		args = append(args, "-p", "0", "-n", "32", "-r", "3")
		direct, err := exec.CommandContext(context.Background(), bench, args...).Output()
		if err != nil {
			t.Fatalf("%s: llama-bench %v: %v", h.shape, args, err)
		}
		var rows []struct {
			NGen   int     `json:"n_gen"`
			Avg    float64 `json:"avg_ts"`
			Stddev float64 `json:"stddev_ts"`
		}
		if err := json.Unmarshal(direct, &rows); err != nil || len(rows) != 1 || rows[0].NGen != 32 {
			t.Fatalf("%s: llama-bench output %s (%v)", h.shape, direct, err)
		}
		off := *est.DecodeTPS/rows[0].Avg - 1
		t.Logf("%s %s: estimate %.2f tokens/s, llama-bench tg32 %.2f ± %.2f: %+.1f%% (%s)", h.shape, h.quant, *est.DecodeTPS, rows[0].Avg, rows[0].Stddev, off*100, strings.Join(engine.BenchArgs(got.Chosen.Profile), " "))
		if math.Abs(off) > 0.15 {
			t.Errorf("%s: the calibrated estimate %.2f tokens/s is %+.1f%% off the measured %.2f", h.shape, *est.DecodeTPS, off*100, rows[0].Avg)
		}
	}
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
