package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/speed"
)

// sizedBench writes a stand-in llama-bench beside a llama-server path
// that does not exist: it generates at 30e9 bytes per second of its
// model file (plus 0.3 ms per token), and reads prompts at 20e9/size
// tokens per second, as llama-bench's JSON.
func sizedBench(t *testing.T) (llamaServer string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in is a shell script")
	}
	dir := t.TempDir()
	script := `#!/bin/sh
m=""; p=512; n=128; r=5
while [ $# -gt 0 ]; do
	case "$1" in
	-m) m=$2; shift ;;
	-p) p=$2; shift ;;
	-n) n=$2; shift ;;
	-r) r=$2; shift ;;
	esac
	shift
done
size=$(wc -c < "$m")
tg=$(awk -v s="$size" 'BEGIN { printf "%.4f", 1000 / (s / 30e6 + 0.3) }')
pp=$(awk -v s="$size" 'BEGIN { printf "%.4f", 20e9 / s }')
echo "["
echo "{\"build_commit\": \"abc1234\", \"build_number\": 7, \"n_prompt\": $p, \"n_gen\": 0, \"n_depth\": 0, \"avg_ts\": $pp, \"stddev_ts\": 0.5, \"samples_ts\": [$pp]},"
echo "{\"build_commit\": \"abc1234\", \"build_number\": 7, \"n_prompt\": 0, \"n_gen\": $n, \"n_depth\": 0, \"avg_ts\": $tg, \"stddev_ts\": 0.1, \"samples_ts\": [$tg]}"
echo "]"
`
	if err := os.WriteFile(filepath.Join(dir, "llama-bench"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "llama-server")
}

// benchHome runs headroom commands on one fake probed machine with one
// home directory, so that what bench keeps, plan and recommend read.
type benchHome struct {
	t    *testing.T
	home string
	// hardware is the probe's key; "" makes it a machine the probe could
	// not name.
	hardware string
}

func (h benchHome) run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Getenv: homeGetenv(h.home, nil),
		Probe: func(ctx context.Context, o hw.ProbeOptions) (*hw.Snapshot, error) {
			o.Root, o.Runner, o.GOOS, o.Host, o.LlamaServer = os.DirFS("../hw/testdata/probe/cpu-cgroup2/root"), noPrograms{}, "linux", "t", "-"
			o.MeasureBandwidth = func(context.Context) (float64, string, error) { return 20, "measured here: fake", nil }
			return hw.Probe(ctx, o)
		}}
	code := Main(context.Background(), args, env)
	// Lines wrap at 100 columns: the checks read the words.
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	return code, flat(out.String()), flat(errb.String())
}

func TestBenchCalibrates(t *testing.T) {
	llama := sizedBench(t)
	h := benchHome{t: t, home: t.TempDir()}

	// Before: a probed machine's rough figures offer bench in one line.
	code, out, errOut := h.run("recommend")
	if code != 0 || !strings.Contains(out, "'headroom bench' measures this machine") {
		t.Fatalf("uncalibrated recommend: exit %d\n%s\n%s", code, out, errOut)
	}
	_, before, _ := h.run("plan", "qwen3-0.6b/Q8_0", "-np", "1", "--json")
	before1 := recommendRows(t, h)[0]

	code, out, errOut = h.run("bench", "--llama-server", llama, "--reps", "2", "--models", "qwen2.5-0.5b/Q4_K_M,mamba2-130m/Q8_0,lfm2-350m/Q8_0")
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s\n%s", code, out, errOut)
	}
	// Two passes, the second in reverse; each twin written once.
	for _, want := range []string{"[", "1/6 qwen2.5-0.5b Q4_K_M", "3/6 lfm2-350m Q8_0", "4/6 lfm2-350m Q8_0", "6/6 qwen2.5-0.5b Q4_K_M", "6 runs in", "writing random weights"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("progress lacks %q:\n%s", want, errOut)
		}
	}
	if n := strings.Count(errOut, "writing random weights"); n != 3 {
		t.Errorf("%d twins written for three models:\n%s", n, errOut)
	}
	for _, want := range []string{"calibrated from 6 kept runs of llama.cpp b7 (abc1234)", "CPU: ", "ms per one-dimensional weight per token", "with each left out", "mamba2-130m Q8_0", "by the prior before it"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	files, _ := filepath.Glob(filepath.Join(h.home, ".cache", "headroom", "speed", "samples-*.json"))
	if len(files) != 1 {
		t.Fatalf("kept files: %v", files)
	}

	// After: plan and recommend estimate with this machine's fit and say so.
	code, after, errOut := h.run("plan", "qwen3-0.6b/Q8_0", "-np", "1", "--json")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, errOut)
	}
	var b, a struct {
		Speed []speed.Result `json:"speed"`
	}
	if json.Unmarshal([]byte(before), &b) != nil || json.Unmarshal([]byte(after), &a) != nil || len(a.Speed) == 0 || len(b.Speed) == 0 {
		t.Fatalf("plan JSON:\n%s\n%s", before, after)
	}
	if b.Speed[0].Calibrated || !a.Speed[0].Calibrated || len(a.Speed[0].CalibratedOn) != 1 || a.Speed[0].PrefillTPS == nil || b.Speed[0].PrefillTPS != nil {
		t.Errorf("before: calibrated %v prefill %v; after: calibrated %v on %v prefill %v",
			b.Speed[0].Calibrated, b.Speed[0].PrefillTPS, a.Speed[0].Calibrated, a.Speed[0].CalibratedOn, a.Speed[0].PrefillTPS)
	}
	// The stand-in generates at 30 GB/s of file plus 0.3 ms: the fit
	// must land near what it would measure for this model.
	if e := *a.Speed[0].DecodeTPS; e < 35 || e > 60 {
		t.Errorf("calibrated estimate %.1f tokens/s for a 0.6 GB file at 30 GB/s", e)
	}
	_, text, _ := h.run("plan", "qwen3-0.6b/Q8_0", "-np", "1")
	if !strings.Contains(text, "calibrated on this machine") {
		t.Errorf("plan does not say it is calibrated here:\n%s", text)
	}
	// The ranking follows the calibrated figures: the machine reads
	// about twice as fast as the prior said, so larger models reach the
	// usable speed (10 tokens/s) and come first.
	after1 := recommendRows(t, h)[0]
	if after1.Entry+after1.Quant == before1.Entry+before1.Quant || *after1.Speed.DecodeTokensPerSec < 10 || before1.Speed.Calibrated || !after1.Speed.Calibrated {
		t.Errorf("first row before bench %s %s at %.1f tokens/s, after %s %s at %.1f", before1.Entry, before1.Quant, *before1.Speed.DecodeTokensPerSec,
			after1.Entry, after1.Quant, *after1.Speed.DecodeTokensPerSec)
	}
	if before1.ParamsB >= after1.ParamsB {
		t.Errorf("the calibrated first row has %gB parameters, the uncalibrated one %gB: a faster machine should put a larger model first", after1.ParamsB, before1.ParamsB)
	}
	_, rec, _ := h.run("recommend")
	if !strings.Contains(rec, "calibrated on this machine's 6 llama-bench runs of build b7 (abc1234)") || strings.Contains(rec, "'headroom bench' measures") {
		t.Errorf("recommend after bench:\n%s", rec)
	}
	_, shown, _ := h.run("bench", "--show")
	if !strings.Contains(shown, "calibrated from 6 kept runs") {
		t.Errorf("bench --show:\n%s", shown)
	}
	if code, _, _ := h.run("bench", "--forget"); code != 0 {
		t.Fatal("bench --forget failed")
	}
	_, rec, _ = h.run("recommend")
	if !strings.Contains(rec, "'headroom bench' measures") {
		t.Errorf("recommend after --forget is still calibrated:\n%s", rec)
	}
	// A preset is not this machine: nothing to offer, nothing applied.
	_, preset, _ := h.run("recommend", "--machine", "cpu-32")
	if strings.Contains(preset, "headroom bench") || strings.Contains(preset, "calibrated on this machine") {
		t.Errorf("a preset offered or used this machine's calibration:\n%s", preset)
	}
}

func TestBenchRefusals(t *testing.T) {
	h := benchHome{t: t, home: t.TempDir()}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bench", "extra"}, exitUsage, "takes no arguments"},
		{[]string{"bench", "--reps", "0"}, exitUsage, "--reps must be 1 to 20"},
		{[]string{"bench", "--weights", "some"}, exitUsage, "unknown weights"},
		{[]string{"bench", "--models", "qwen3-0.6b"}, exitUsage, "is not SHAPE/QUANT"},
		{[]string{"bench", "--models", "nosuch/Q8_0,qwen3-0.6b/Q8_0"}, exitUsage, "no shape"},
		{[]string{"bench", "--models", "qwen3-0.6b/Q9_9,qwen3-0.6b/Q8_0"}, exitUsage, "--models"},
		{[]string{"bench", "--models", "qwen3-0.6b/Q8_0"}, exitUsage, "3 models or more"},
		{[]string{"bench", "--llama-server", filepath.Join(t.TempDir(), "llama-server")}, exitError, "llama-bench not found"},
	} {
		code, out, errOut := h.run(tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s%s", tc.args, code, tc.code, tc.want, out, errOut)
		}
	}
	// A damaged file is named and set aside, not silently replaced.
	dir := filepath.Join(h.home, ".cache", "headroom", "speed")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, _ = h.run("bench", "--show")
	snap, _ := benchHome{t: t, home: h.home}.probe()
	st, _ := samplesFor(Env{Getenv: homeGetenv(h.home, nil)}, snap)
	if err := os.WriteFile(st.Path(), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := h.run("bench", "--show")
	if code == 0 || !strings.Contains(errOut, st.Path()) || !strings.Contains(errOut, "set aside as") {
		t.Errorf("damaged file: exit %d\n%s%s", code, out, errOut)
	}
	// Set aside, where the user can look at it, and out of the way.
	if _, err := os.Stat(st.Path() + ".damaged"); err != nil {
		t.Errorf("the damaged file was not set aside: %v", err)
	}
	if code, _, errOut = h.run("plan", "qwen3-0.6b/Q8_0", "-np", "1"); code != 0 || strings.Contains(errOut, "speed measurements") {
		t.Errorf("plan after the damaged file was set aside: exit %d\n%s", code, errOut)
	}
}

// recommendRows is recommend --json's fitting rows on h's machine, in
// rank order.
func recommendRows(t *testing.T, h benchHome) []catalog.Row {
	t.Helper()
	_, out, errOut := h.run("recommend", "--json")
	var rep struct {
		Rows []catalog.Row `json:"configurations"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("recommend --json: %v\n%s", err, errOut)
	}
	var fit []catalog.Row
	for _, r := range rep.Rows {
		if r.Enabled && r.Speed != nil && r.Speed.DecodeTokensPerSec != nil {
			fit = append(fit, r)
		}
	}
	if len(fit) == 0 {
		t.Fatalf("no fitting row with a speed:\n%s", out)
	}
	return fit
}

// probe is the fake machine benchHome runs on.
func (h benchHome) probe() (*hw.Snapshot, error) {
	o := hw.ProbeOptions{Root: os.DirFS("../hw/testdata/probe/cpu-cgroup2/root"), Runner: noPrograms{}, GOOS: "linux", Host: "t", LlamaServer: "-",
		MeasureBandwidth: func(context.Context) (float64, string, error) { return 20, "measured here: fake", nil }}
	return hw.Probe(context.Background(), o)
}

// The server's calibration is fitted again only when the kept runs
// change, and then at once.
func TestCalibrationMemo(t *testing.T) {
	h := benchHome{t: t, home: t.TempDir()}
	snap, err := h.probe()
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Getenv: homeGetenv(h.home, nil)}
	memo := &calibrationMemo{env: env}
	if c := memo.get(snap); c != nil {
		t.Fatalf("calibrated with nothing kept: %+v", c)
	}
	st, _ := samplesFor(env, snap)
	run := func(model string, tps float64, layers int) speed.Sample {
		return speed.Sample{Schema: speed.SampleSchema, Model: model, Backend: "CPU", Build: "b1", Weights: "random",
			FullBandwidthMs: 1000 / tps / 2, Bandwidths: map[string]float64{"ram": 20}, Layers: layers, ActiveParams: 1e9, DecodeTPS: tps, DecodeBest: tps}
	}
	if err := st.Add(run("a", 50, 20), run("b", 30, 30), run("c", 20, 16)); err != nil {
		t.Fatal(err)
	}
	first := memo.get(snap)
	if first == nil || first.Backends["CPU"].Samples != 3 {
		t.Fatalf("after three runs: %+v", first)
	}
	if again := memo.get(snap); again != first {
		t.Error("fitted again with nothing changed")
	}
	if err := st.Add(run("d", 40, 24)); err != nil {
		t.Fatal(err)
	}
	if c := memo.get(snap); c == nil || c.Backends["CPU"].Samples != 4 {
		t.Errorf("a fourth run kept, the memo still has %+v", c)
	}
}
