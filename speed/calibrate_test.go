package speed

import (
	"math"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/synth"
)

// made builds a sample whose fastest decode and prefill times follow the
// model exactly: x/e + k·V ms per token, with V one-dimensional weights,
// and 2P/F per prompt token. Its means are a tenth slower, as a busy
// machine's would be: Fit must not use them.
func made(model string, fullMs float64, vectors int, params int64, e, k, gflops float64, when time.Time) Sample {
	s := Sample{Schema: SampleSchema, Model: model, Backend: "CPU", Build: "b1", When: when,
		FullBandwidthMs: fullMs, VectorOps: vectors, ActiveParams: params,
		GenTokens: 32, DecodeBest: 1000 / (fullMs/e + k*float64(vectors)),
		PromptTokens: 128, PrefillBest: gflops * 1e9 / (2 * float64(params))}
	s.DecodeTPS, s.PrefillTPS = s.DecodeBest*0.9, s.PrefillBest*0.9
	return s
}

func TestFitRecoversParameters(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		e, k, gflops float64
	}{
		{"two terms", 0.8, 0.05, 120},
		{"no fixed cost", 1.3, 0, 60},
		{"large fixed cost", 0.5, 0.4, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := []Sample{
				made("a", 20, 29, 6e8, tc.e, tc.k, tc.gflops, t0),
				made("b", 45, 17, 1.2e9, tc.e, tc.k, tc.gflops, t0),
				made("c", 110, 37, 3e9, tc.e, tc.k, tc.gflops, t0),
			}
			c := Fit(ss, "")
			if c == nil {
				t.Fatal("no calibration from three exact samples")
			}
			got := c.Backends["CPU"]
			if math.Abs(got.Efficiency-tc.e) > 1e-6 || math.Abs(got.VectorOverheadMs-tc.k) > 1e-6 {
				t.Errorf("fitted e %.6f k %.6f, want %g %g", got.Efficiency, got.VectorOverheadMs, tc.e, tc.k)
			}
			if math.Abs(got.PrefillGFLOPS-tc.gflops) > 1e-6*tc.gflops {
				t.Errorf("fitted prefill %.4f GFLOP/s, want %g", got.PrefillGFLOPS, tc.gflops)
			}
			if got.ErrorLowPct < -1 || got.ErrorHighPct > 1 || !got.Calibrated || got.Samples != 3 || got.PrefillSamples != 3 {
				t.Errorf("exact data: %+v", got)
			}
		})
	}
}

func TestFitRefusesThinData(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	one := made("a", 20, 29, 6e8, 0.8, 0.05, 100, t0)
	if c := Fit([]Sample{one, one, one}, ""); c != nil {
		t.Errorf("three runs of one model fitted: %+v", c)
	}
	if c := Fit([]Sample{one, made("b", 45, 17, 1e9, 0.8, 0.05, 100, t0)}, ""); c != nil {
		t.Errorf("two runs fitted: %+v", c)
	}
	var twins []Sample
	for _, w := range []string{"zero", "routed"} {
		for _, m := range []string{"a", "b", "c"} {
			smp := made(m, 20+float64(len(m)), 29, 6e8, 0.8, 0.05, 100, t0)
			smp.Weights = w
			twins = append(twins, smp)
		}
	}
	if c := Fit(twins, ""); c != nil {
		t.Errorf("zero and routed twins, which run faster than real weights, were fitted: %+v", c)
	}
	old := one
	old.Schema = SampleSchema - 1
	if c := Fit([]Sample{old, old, made("b", 45, 17, 1e9, 0.8, 0.05, 100, t0), made("c", 90, 17, 1e9, 0.8, 0.05, 100, t0)}, ""); c != nil {
		t.Errorf("samples of another schema counted: %+v", c)
	}
}

// A negative per-op cost has no physical meaning: the fit holds it at
// zero and fits the efficiency alone.
func TestFitNeverNegative(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	ss := []Sample{made("a", 20, 40, 6e8, 0.8, 0, 100, t0), made("b", 45, 10, 1e9, 0.8, 0, 100, t0), made("c", 90, 10, 1e9, 0.8, 0, 100, t0)}
	// The deep model ran faster than its bytes say: a two-term fit
	// would want k < 0.
	ss[0].DecodeBest *= 1.3
	got := Fit(ss, "").Backends["CPU"]
	if got.VectorOverheadMs != 0 || got.Efficiency <= 0 {
		t.Errorf("e %g k %g, want k 0 and e > 0", got.Efficiency, got.VectorOverheadMs)
	}
	if got.ErrorHighPct <= 0 && got.ErrorLowPct >= 0 {
		t.Errorf("noisy data gave an empty error range %g..%g", got.ErrorLowPct, got.ErrorHighPct)
	}
}

// The newest build's samples are fitted unless a build is named; others
// are left alone.
func TestFitPicksBuild(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	var ss []Sample
	for i, m := range []string{"a", "b", "c"} {
		old := made(m, 20+30*float64(i), 20+5*i, 1e9, 0.5, 0, 100, t0)
		old.Build = "old"
		ss = append(ss, old, made(m, 20+30*float64(i), 20+5*i, 1e9, 0.9, 0, 100, t0.Add(time.Hour)))
	}
	ss[len(ss)-1].Build = "b1"
	if c := Fit(ss, ""); c == nil || c.Build != "b1" || math.Abs(c.Backends["CPU"].Efficiency-0.9) > 1e-9 {
		t.Errorf("newest: %+v", c)
	}
	if c := Fit(ss, "old"); c == nil || math.Abs(c.Backends["CPU"].Efficiency-0.5) > 1e-9 {
		t.Errorf("named old build: %+v", c)
	}
	// A newer build's routed --bench run does not hide b1's calibration.
	routed := made("x", 20, 20, 1e9, 0.9, 0, 100, t0.Add(2*time.Hour))
	routed.Build, routed.Weights = "b2", "routed"
	if c := Fit(append(ss, routed), ""); c == nil || c.Build != "b1" {
		t.Errorf("a routed run of a newer build: %+v", c)
	}
}

// A calibration changes the CPU's figures, names the runs it came from,
// and gives a CPU plan the prefill figure it has none of without one.
func TestEstimateWithCalibration(t *testing.T) {
	m := namedModel(t, "qwen3-0.6b", synth.Quant("Q8_0"))
	s := preset(t, "cpu-32")
	r := account(t, m, profile(4096, 0), s)
	base, err := Estimate(m, r, s, 16)
	if err != nil {
		t.Fatal(err)
	}
	if base.Calibrated || base.PrefillTPS != nil || len(base.CalibratedOn) != 0 {
		t.Fatalf("uncalibrated CPU: calibrated %v prefill %v on %v", base.Calibrated, base.PrefillTPS, base.CalibratedOn)
	}
	cal := &Calibration{Build: "b1", Backends: map[string]Calibrated{"CPU": {
		Backend:       Backend{Name: "CPU", Efficiency: 1.4, VectorOverheadMs: 0.02, Calibrated: true, ErrorLowPct: -4, ErrorHighPct: 6, Source: "fitted here"},
		PrefillGFLOPS: 90, Samples: 5, PrefillSamples: 5,
	}}}
	got, err := cal.Estimate(m, r, s, 16)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Calibrated || got.ErrorLowPct != -4 || got.ErrorHighPct != 6 || len(got.CalibratedOn) != 1 || got.CalibratedOn[0] != "fitted here" {
		t.Errorf("calibrated: %v %g..%g %v", got.Calibrated, got.ErrorLowPct, got.ErrorHighPct, got.CalibratedOn)
	}
	d := got.Devices[0]
	// Qwen3's 28 blocks have four norms each (attention, feed-forward, Q
	// and K), and the output norm makes 113 one-dimensional weights.
	if d.VectorOps != 4*28+1 {
		t.Errorf("%d one-dimensional weights, want 113", d.VectorOps)
	}
	wantMs := float64(d.BytesPerToken)/(1.4*d.BandwidthGBps*1e9)*1e3 + 0.02*float64(d.VectorOps)
	if math.Abs(*got.DecodeMsPerToken-wantMs) > 1e-9 {
		t.Errorf("decode %.6f ms, want %.6f", *got.DecodeMsPerToken, wantMs)
	}
	if got.PrefillTPS == nil || math.Abs(*got.PrefillTPS-90e9/(2*float64(d.ActiveParams))) > 1e-6 {
		t.Errorf("prefill %v, want %.3f", got.PrefillTPS, 90e9/(2*float64(d.ActiveParams)))
	}
	// A backend it does not calibrate keeps params.go's figures (the CPU
	// gathers one embedding row there: a thousand bytes, timed at its own
	// parameters either way).
	gpu := preset(t, "rtx-4090")
	rg := account(t, m, profile(4096, 99), gpu)
	plain, _ := Estimate(m, rg, gpu, 16)
	with, _ := cal.Estimate(m, rg, gpu, 16)
	if math.Abs(*plain.DecodeTPS / *with.DecodeTPS - 1) > 1e-5 || len(with.CalibratedOn) != 0 || !with.Calibrated || with.ErrorHighPct != plain.ErrorHighPct {
		t.Errorf("a CPU calibration changed a CUDA plan: %g -> %g (%v)", *plain.DecodeTPS, *with.DecodeTPS, with.CalibratedOn)
	}
}

// NewSample refuses what cannot teach one backend's parameters.
func TestNewSample(t *testing.T) {
	m := namedModel(t, "qwen3-0.6b", synth.Quant("Q8_0"))
	cpu := preset(t, "cpu-32")
	meas := &Measured{Build: "b1", Tests: []BenchTest{{Kind: "pp", Tokens: 128, MeanTPS: 150, SamplesTPS: []float64{140, 160, 150}}, {Kind: "tg", Tokens: 32, MeanTPS: 40}}}
	smp, err := NewSample("qwen3-0.6b Q8_0", m, account(t, m, profile(4096, 0), cpu), cpu, meas)
	if err != nil {
		t.Fatal(err)
	}
	est, _ := Estimate(m, account(t, m, profile(4096, 0), cpu), cpu, 16)
	d := est.Devices[0]
	if smp.Backend != "CPU" || smp.Layers != d.Layers || smp.VectorOps != d.VectorOps || smp.VectorOps == 0 || smp.ActiveParams != d.ActiveParams || smp.PrefillTPS != 150 || smp.PrefillBest != 160 || smp.DecodeTPS != 40 || smp.DecodeBest != 40 ||
		math.Abs(smp.FullBandwidthMs-float64(d.BytesPerToken)/(d.BandwidthGBps*1e9)*1e3) > 1e-12 {
		t.Errorf("sample %+v from device %+v", smp, d)
	}
	if len(Current([]Sample{smp}, cpu)) != 1 {
		t.Errorf("a sample of this machine's figures %v is not current", smp.Bandwidths)
	}
	faster := preset(t, "cpu-32")
	for i := range faster.Domains {
		faster.Domains[i].BandwidthGBps *= 2
	}
	if len(Current([]Sample{smp}, faster)) != 0 {
		t.Error("a sample fitted against another bandwidth figure is current")
	}
	gpu := preset(t, "rtx-4090")
	if _, err := NewSample("split", m, account(t, m, profile(4096, 10), gpu), gpu, meas); err == nil {
		t.Error("a plan on CPU and CUDA gave a sample")
	}
	if _, err := NewSample("no tg", m, account(t, m, profile(4096, 0), cpu), cpu, &Measured{Tests: meas.Tests[:1]}); err == nil {
		t.Error("a measurement without generation gave a sample")
	}
}

// A model's runs in bench's two passes weigh once in the fit, as the
// fastest repetition of any of them; runs with other flags stay apart.
func TestPooled(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	a1 := made("a", 20, 10, 6e8, 1, 0, 100, t0)
	a2 := a1
	a1.DecodeBest, a2.DecodeBest = 1000/30.0, 1000/20.0
	a1.PrefillBest, a2.PrefillBest = 100, 50
	other := a1
	other.Args = []string{"-fa", "on"}
	got := Pooled([]Sample{a1, made("b", 40, 10, 6e8, 1, 0, 100, t0), a2, other})
	if len(got) != 3 || got[0].Model != "a" || got[1].Model != "b" || len(got[2].Args) != 2 {
		t.Fatalf("pooled %d samples: %+v", len(got), got)
	}
	if got[0].DecodeTPS != 50 || got[0].PrefillTPS != 100 {
		t.Errorf("a: %.6f tokens/s, prompt %.6f; want the fastest, 50 (second run) and 100 (first)", got[0].DecodeTPS, got[0].PrefillTPS)
	}
	if math.Abs(got[2].DecodeTPS-1000/30.0) > 1e-9 {
		t.Errorf("a with other flags: %g, want its own 33.3", got[2].DecodeTPS)
	}
	// Three models measured twice each, the second pass slowed by other
	// work: six runs fitted as three, on the fastest, the left-out error
	// taken model by model.
	var ss []Sample
	for i, m := range []string{"a", "b", "c"} {
		fast := made(m, 20+30*float64(i), 30-10*i, 1e9, 0.8, 0.05, 100, t0)
		slow := fast
		slow.DecodeBest *= 0.6 - 0.1*float64(i)
		ss = append(ss, fast, slow)
	}
	c := Fit(ss, "").Backends["CPU"]
	if c.Samples != 6 || math.Abs(c.Efficiency-0.8) > 1e-6 || math.Abs(c.VectorOverheadMs-0.05) > 1e-6 {
		t.Errorf("fit of two passes whose fastest is exact: %+v", c)
	}
}
