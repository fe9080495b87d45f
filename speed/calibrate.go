package speed

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// SampleSchema changes when what a Sample records, or how Estimate counts
// the bytes a sample's figures were derived with, changes: samples of
// another schema are not fitted.
// Schema 2 added VectorOps, the count the per-op term is fitted to;
// schema 3 the fastest repetitions, which Fit fits in place of the means.
const SampleSchema = 3

// Sample is one llama-bench measurement on this machine of a plan whose
// work all ran on one backend, with the estimate's inputs for that plan:
// what Fit needs to find the backend's parameters on this machine.
type Sample struct {
	Schema int `json:"schema"`
	// Model says what was measured (a shape and quantization, or a file);
	// Weights what its weights were: random, routed or zero for a twin
	// (docs/speed.md measures how each runs against real data), "" for
	// the model's own file.
	Model   string    `json:"model"`
	Weights string    `json:"weights,omitempty"`
	Backend string    `json:"backend"`
	Build   string    `json:"build"`
	Args    []string  `json:"args"`
	When    time.Time `json:"when"`
	// FullBandwidthMs is Σ bytes/bandwidth over the devices, in ms: the
	// time one token would take at every device's bandwidth figure, at
	// the context filled halfway through the generation test.
	FullBandwidthMs float64 `json:"full_bandwidth_ms"`
	// Bandwidths are the figures FullBandwidthMs was computed with, by
	// memory domain: a sample fits the efficiency against these, and is
	// of no use once a domain's figure changes (Current).
	Bandwidths    map[string]float64 `json:"bandwidths_gbps"`
	BytesPerToken int64              `json:"bytes_per_token"`
	Layers        int                `json:"layers"`
	VectorOps     int                `json:"vector_ops"`
	ActiveParams  int64              `json:"active_params"`
	// The generation and prompt figures llama-bench measured (0 when a
	// test did not run): the mean and standard deviation of the
	// repetitions, and the fastest of them (Best), which is what Fit fits.
	GenTokens     int     `json:"gen_tokens"`
	DecodeTPS     float64 `json:"decode_tokens_per_s"`
	DecodeStddev  float64 `json:"decode_stddev"`
	DecodeBest    float64 `json:"decode_best_tokens_per_s"`
	PromptTokens  int     `json:"prompt_tokens"`
	PrefillTPS    float64 `json:"prefill_tokens_per_s"`
	PrefillStddev float64 `json:"prefill_stddev"`
	PrefillBest   float64 `json:"prefill_best_tokens_per_s"`
}

// fastest is the fastest repetition of a test, its mean where
// llama-bench gave no repetitions.
func fastest(t BenchTest) float64 {
	best := t.MeanTPS
	for _, x := range t.SamplesTPS {
		best = max(best, x)
	}
	return best
}

// NewSample turns a llama-bench measurement of plan r of model m on
// machine s into a Sample. It fails where the measurement cannot teach a
// backend's parameters: work on more than one backend, a device whose
// bandwidth is unknown, no generation figure at an empty context.
func NewSample(name string, m *arch.Model, r *plan.Result, s *hw.Snapshot, meas *Measured) (Sample, error) {
	tg := meas.Test("tg", 0)
	if tg == nil || tg.MeanTPS <= 0 {
		return Sample{}, errors.New("speed: the measurement has no generation figure at an empty context")
	}
	// tgN fills the context from 0 to N cells: its mean token reads N/2.
	est, err := Estimate(m, r, s, tg.Tokens/2)
	if err != nil {
		return Sample{}, err
	}
	smp := Sample{Schema: SampleSchema, Model: name, Build: meas.Build, Args: meas.Args, When: time.Now().UTC().Truncate(time.Second),
		GenTokens: tg.Tokens, DecodeTPS: tg.MeanTPS, DecodeStddev: tg.StddevTPS, DecodeBest: fastest(*tg), BytesPerToken: est.BytesPerToken}
	for _, d := range est.Devices {
		if d.Layers == 0 && d.WeightBytes+d.KVBytes+d.StateBytes == 0 {
			continue
		}
		if smp.Backend != "" && d.Backend != smp.Backend {
			return Sample{}, fmt.Errorf("speed: the plan runs on %s and %s; a calibration sample needs one backend", smp.Backend, d.Backend)
		}
		if d.BandwidthGBps <= 0 {
			return Sample{}, fmt.Errorf("speed: the bandwidth of %s's memory is unknown", d.Device)
		}
		smp.Backend = d.Backend
		smp.FullBandwidthMs += float64(d.BytesPerToken) / (d.BandwidthGBps * 1e9) * 1e3
		if smp.Bandwidths == nil {
			smp.Bandwidths = map[string]float64{}
		}
		smp.Bandwidths[d.Domain] = d.BandwidthGBps
		smp.Layers += d.Layers
		smp.VectorOps += d.VectorOps
		smp.ActiveParams += d.ActiveParams
	}
	if smp.Backend == "" {
		return Sample{}, errors.New("speed: the plan places no work on any device")
	}
	for _, t := range meas.Tests {
		if t.Kind == "pp" && t.Depth == 0 && t.MeanTPS > 0 {
			smp.PromptTokens, smp.PrefillTPS, smp.PrefillStddev, smp.PrefillBest = t.Tokens, t.MeanTPS, t.StddevTPS, fastest(t)
			break
		}
	}
	return smp, nil
}

// Calibration is a machine's backend parameters fitted to llama-bench
// measurements taken on it. The zero value and nil calibrate nothing:
// Estimate then uses the published fits and priors of params.go.
type Calibration struct {
	// Build is the llama.cpp build whose measurements were fitted.
	Build    string                `json:"build"`
	Backends map[string]Calibrated `json:"backends"`
}

// Calibrated is one backend's parameters fitted on this machine.
type Calibrated struct {
	// Backend holds the fitted decode parameters; its error range is the
	// leave-one-out range of this machine's samples.
	Backend
	// PrefillGFLOPS is the rate at which prompt tokens' 2 FLOPs per
	// active weight were done, fitted to the prompt figures; 0 without
	// any.
	PrefillGFLOPS float64 `json:"prefill_gflops,omitempty"`
	// Samples counts the llama-bench runs fitted, PrefillSamples the
	// models with a prompt figure among them (each model's runs pooled).
	Samples        int `json:"samples"`
	PrefillSamples int `json:"prefill_samples"`
	// Models names what was measured.
	Models []string `json:"models"`
}

// Fit fits each backend's parameters to the samples of one build whose
// weights were real or random (realWeights): the newest build among them
// unless build names one. A backend needs runs of MinSamples models, each
// model's runs pooled (Pooled). The fit's two terms are the efficiency and a cost per one-dimensional
// weight (VectorOverheadMs); where the fit gives that cost negative, it is
// held at zero and only the efficiency is fitted. The per-layer cost of
// params.go's published fits is not fitted here: on this project's CPU
// machine, a cost per small op predicted shapes outside the fit better
// than one per layer, and a fit of both gave the layer a negative cost
// (docs/speed.md). Nil when no backend has enough.
func Fit(samples []Sample, build string) *Calibration {
	if build == "" {
		build = newestBuild(samples)
	}
	by := map[string][]Sample{}
	for _, s := range samples {
		if s.Schema == SampleSchema && s.Build == build && s.DecodeBest > 0 && s.FullBandwidthMs > 0 && realWeights(s.Weights) {
			by[s.Backend] = append(by[s.Backend], s)
		}
	}

	c := &Calibration{Build: build, Backends: map[string]Calibrated{}}
	for name, runs := range by {
		models := modelsOf(runs)
		ss := Pooled(runs)
		if len(ss) < MinSamples {
			continue
		}
		e, v := fitDecode(ss)
		cal := Calibrated{Backend: Backend{Name: name, Efficiency: e, VectorOverheadMs: v, Calibrated: true}, Samples: len(runs), Models: models}
		cal.ErrorLowPct, cal.ErrorHighPct = machineLeftOut(ss)
		cal.PrefillGFLOPS, cal.PrefillSamples = fitPrefill(ss)
		cal.Source = fmt.Sprintf("this machine's %d llama-bench runs of build %s (%s)", len(runs), build, strings.Join(cal.Models, ", "))
		c.Backends[name] = cal
	}
	if len(c.Backends) == 0 {
		return nil
	}
	return c
}

// realWeights reports whether a sample ran on weights that run as fast as
// a real model's: the model's own file ("") or a twin with every weight
// written. Zero and routed twins run faster in generation (docs/speed.md:
// up to 50% and 28% on this project's machine), so they are kept but
// not fitted.
func realWeights(w string) bool { return w == "" || w == "random" }

// MinSamples is the fewest models (or, for one model, runs with
// different flags) whose runs Fit fits a backend to: two parameters from
// fewer leave none out to say how far the fit is off.
const MinSamples = 3

// Pooled makes one sample of each model's runs with the same flags and
// the same bytes, whose DecodeTPS and PrefillTPS are the fastest
// repetition of any of them (DecodeBest, PrefillBest); the other fields
// are the first run's. A model measured twice (bench's second pass) then
// weighs once in the fit, and the error range leaves a whole model out,
// never one of its runs with the other still in.
//
// The fastest, not the mean: other work on the machine only ever slows a
// run, so the fastest repetition is the closest to the machine's own
// speed. On this project's 2-core VM one model's repetitions a minute
// apart ran 15.8 to 44.2 tokens/s, while the fastest of 12 repetitions
// came out within 2.2% in two sessions of it (docs/speed.md).
func Pooled(runs []Sample) []Sample {
	type key struct {
		model, args string
		ms          float64
	}
	var out []Sample
	index := map[key]int{}
	for _, s := range runs {
		k := key{s.Model, strings.Join(s.Args, " "), s.FullBandwidthMs}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, s)
			out[i].DecodeTPS, out[i].PrefillTPS = 0, 0
		}
		out[i].DecodeTPS = max(out[i].DecodeTPS, s.DecodeBest)
		out[i].PrefillTPS = max(out[i].PrefillTPS, s.PrefillBest)
	}
	return out
}

// machineLeftOut refits without each (pooled) sample in turn and returns the lowest
// and highest signed error on the one left out, in whole percent rounded
// outward: how the fit does on a model it has not seen.
func machineLeftOut(ss []Sample) (lo, hi float64) {
	for i := range ss {
		rest := append(append([]Sample{}, ss[:i]...), ss[i+1:]...)
		e, v := fitDecode(rest)
		got := 1000 / Backend{Efficiency: e, VectorOverheadMs: v}.TimeMs(ss[i].FullBandwidthMs, ss[i].Layers, ss[i].VectorOps)
		err := (got/ss[i].DecodeTPS - 1) * 100
		lo, hi = math.Min(lo, math.Floor(err)), math.Max(hi, math.Ceil(err))
	}
	return lo, hi
}

// modelsOf names the models the samples measured, sorted, once each.
func modelsOf(ss []Sample) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s.Model) {
			out = append(out, s.Model)
		}
	}
	sort.Strings(out)
	return out
}

// fitDecode minimizes Σ((x/e + v·V − t)/t)² over the samples, where x is
// the token's time at full bandwidth, V its one-dimensional weights and t
// the measured time per token: linear in u = 1/e and v.
func fitDecode(ss []Sample) (eff, perVectorMs float64) {
	var a, b, d, p, q float64
	for _, s := range ss {
		t := 1000 / s.DecodeTPS
		X, Y := s.FullBandwidthMs/t, float64(s.VectorOps)/t
		a, b, d = a+X*X, b+X*Y, d+Y*Y
		p, q = p+X, q+Y
	}
	if det := a*d - b*b; len(ss) >= 2 && math.Abs(det) > 1e-12*a*d {
		u, k := (p*d-b*q)/det, (a*q-b*p)/det
		if u > 0 && k >= 0 {
			return 1 / u, k
		}
	}
	// One parameter: u = Σ X / Σ X².
	return a / p, 0
}

// fitPrefill fits the rate of prompt processing, minimizing
// Σ((2P/F − t)/t)² with P the active weights and t the time per prompt
// token; F in GFLOP/s.
func fitPrefill(ss []Sample) (gflops float64, n int) {
	var num, den float64
	for _, s := range ss {
		if s.PrefillTPS <= 0 || s.ActiveParams <= 0 {
			continue
		}
		t := 1 / s.PrefillTPS
		w := 2 * float64(s.ActiveParams) / t // v = 1/F: minimize Σ(v·w − 1)²
		num, den = num+w, den+w*w
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return den / num / 1e9, n
}

// Current keeps the samples whose bandwidth figures are the machine's
// figures now: an efficiency fitted against one figure means nothing
// against another (a bandwidth measured again, higher).
func Current(samples []Sample, s *hw.Snapshot) []Sample {
	var out []Sample
	for _, smp := range samples {
		ok := len(smp.Bandwidths) > 0
		for dom, gbps := range smp.Bandwidths {
			if d := s.Domain(dom); d == nil || d.BandwidthGBps != gbps {
				ok = false
			}
		}
		if ok {
			out = append(out, smp)
		}
	}
	return out
}

// newestBuild is the build of the most recent sample Fit can use: a
// routed --bench run of a new build does not hide an older build's
// calibration.
func newestBuild(samples []Sample) string {
	var build string
	var when time.Time
	for _, s := range samples {
		if s.Schema == SampleSchema && realWeights(s.Weights) && !s.When.Before(when) {
			build, when = s.Build, s.When
		}
	}
	return build
}

// backend returns the parameters Estimate uses for a backend: this
// machine's fit where there is one, else params.go's.
func (c *Calibration) backend(name string) (Backend, *Calibrated, bool) {
	if c != nil {
		if cal, ok := c.Backends[name]; ok {
			return cal.Backend, &cal, true
		}
	}
	b, ok := backends[name]
	return b, nil, ok
}
