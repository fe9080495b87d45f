// Package speed estimates how fast a planned model runs under llama.cpp:
// decode tokens per second from the bytes each token reads on each device
// over that device's memory bandwidth (at the backend's efficiency), plus
// the backend's fixed cost per layer and per one-dimensional weight (each
// an element-wise op of its own); prefill tokens per second from compute.
// The backend parameters are fitted to published llama-bench results,
// which live in testdata/llamabench.json with their sources, or to the
// user's own llama-bench runs (Calibration); docs/speed.md lists the
// error on every point. A figure the inputs cannot support (a device
// without a known bandwidth, a GPU without a published compute figure) is
// reported as unknown, never guessed.
package speed

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// Result is the speed estimate for one plan on one machine.
type Result struct {
	// CtxTokens is the number of context cells filled when a token is
	// generated: the KV read grows with it.
	CtxTokens int `json:"ctx_tokens"`
	// DecodeTPS is the estimated generation speed for one sequence, nil
	// when some device's figures are unknown (Unknown says which).
	DecodeTPS *float64 `json:"decode_tokens_per_s"`
	// DecodeMsPerToken is 1000/DecodeTPS.
	DecodeMsPerToken *float64 `json:"decode_ms_per_token"`
	// DecodeCeilingTPS is the physical bound: every byte at full spec
	// bandwidth and no fixed cost. It needs only the bandwidths.
	DecodeCeilingTPS *float64 `json:"decode_ceiling_tokens_per_s"`
	// PrefillTPS is the compute-bound prompt speed at the vendors' dense
	// FP16 tensor peak, nil when a device doing matrix work has no
	// published figure.
	PrefillTPS *float64 `json:"prefill_tokens_per_s"`
	// Calibrated is true when every device that does work runs a backend
	// whose parameters were fitted to published results. ErrorLowPct and
	// ErrorHighPct then span the errors of those backends on published
	// points they were not fitted on (Backend): the estimate has been
	// that far below or above what llama-bench measured.
	Calibrated   bool    `json:"calibrated"`
	ErrorLowPct  float64 `json:"error_low_pct,omitempty"`
	ErrorHighPct float64 `json:"error_high_pct,omitempty"`
	// CalibratedOn says, for the backends fitted on this machine's own
	// llama-bench runs rather than published results, which runs; the
	// error range is then their leave-one-out range.
	CalibratedOn []string `json:"calibrated_on,omitempty"`
	// BytesPerToken is the total over devices.
	BytesPerToken int64          `json:"bytes_per_token"`
	Devices       []DeviceResult `json:"devices"`
	// Assumptions are what the figures rest on; Unknown says why a
	// figure is missing.
	Assumptions []string `json:"assumptions"`
	Unknown     []string `json:"unknown,omitempty"`
}

// DeviceResult is one device's share of a token.
type DeviceResult struct {
	Device  string `json:"device"`
	Backend string `json:"backend"`
	Domain  string `json:"domain"`
	// Layers counts the layers (blocks and the output layer) placed on
	// the device.
	Layers int `json:"layers"`
	// What one token reads here: weights (experts at their routed share,
	// the output projection), the embedding rows it gathers, the KV cells
	// filled, the recurrent state.
	WeightBytes   int64 `json:"weight_bytes"`
	GatherBytes   int64 `json:"gather_bytes"`
	KVBytes       int64 `json:"kv_bytes"`
	StateBytes    int64 `json:"state_bytes"`
	BytesPerToken int64 `json:"bytes_per_token"`
	// BandwidthGBps is the domain's spec bandwidth, 0 when unknown.
	BandwidthGBps   float64 `json:"bandwidth_gbps"`
	BandwidthSource string  `json:"bandwidth_source,omitempty"`
	// VectorOps counts the one-dimensional weights (norm scales, biases)
	// applied here, each an element-wise op.
	VectorOps int `json:"vector_ops"`
	// Efficiency, LayerOverheadMs and VectorOverheadMs are the backend's
	// parameters.
	Efficiency       float64 `json:"efficiency"`
	LayerOverheadMs  float64 `json:"layer_overhead_ms"`
	VectorOverheadMs float64 `json:"vector_overhead_ms,omitempty"`
	Calibrated       bool    `json:"calibrated"`
	// ReadMs + OverheadMs = TimeMs, the device's time per token; TimeShare
	// is its fraction of the token.
	ReadMs     float64 `json:"read_ms"`
	OverheadMs float64 `json:"overhead_ms"`
	TimeMs     float64 `json:"time_ms"`
	TimeShare  float64 `json:"time_share"`
	// ActiveParams are the weight elements a token multiplies here;
	// PeakTFLOPS the published figure used for prefill, 0 when none.
	ActiveParams int64   `json:"active_params"`
	PeakTFLOPS   float64 `json:"peak_tflops,omitempty"`
	PeakSource   string  `json:"peak_source,omitempty"`
}

// Estimate computes decode and prefill speed for the plan r of model m on
// machine s, at a context filled to ctxTokens cells (clamped to the
// planned context per sequence). It returns an error only for inputs that
// do not belong together; missing device figures or backend parameters
// give a Result with nil speeds and the reasons in Unknown.
func Estimate(m *arch.Model, r *plan.Result, s *hw.Snapshot, ctxTokens int) (Result, error) {
	return (*Calibration)(nil).Estimate(m, r, s, ctxTokens)
}

// Estimate is the package's Estimate with this machine's fitted
// parameters for the backends c calibrates, params.go's for the others.
// A nil c calibrates nothing.
func (c *Calibration) Estimate(m *arch.Model, r *plan.Result, s *hw.Snapshot, ctxTokens int) (Result, error) {
	res := Result{CtxTokens: ctxTokens}
	if err := checkInputs(m, r, s, ctxTokens); err != nil {
		return res, err
	}
	if seq := r.Context.NCtxSeq; seq > 0 && ctxTokens > seq {
		res.Assumptions = append(res.Assumptions, fmt.Sprintf("context clamped from %d to the %d cells a sequence has", ctxTokens, seq))
		ctxTokens = seq
		res.CtxTokens = seq
	}
	res.Assumptions = append(res.Assumptions,
		"one sequence, batch 1: each token reads every always-active weight once, routed experts at n_expert_used/n_expert, one embedding row, and the filled KV cells (sliding layers at most their window)",
		"decode time per token = sum over devices of bytes/(efficiency*bandwidth) + layers*layer_overhead + vector_ops*vector_overhead of the device's backend; devices run one after another")
	traffic := perDevice(m, r, ctxTokens, &res.Assumptions)

	var total, ceiling, prefill float64
	decodeKnown, prefillKnown := true, true
	prefillFitted, prefillPeak := false, false
	res.Calibrated = true
	for _, t := range traffic {
		d, cal, err := deviceResult(s, t, c)
		if err != nil {
			return res, err
		}
		res.BytesPerToken += d.BytesPerToken
		busy := t.layers > 0 || t.weights+t.kv+t.state > 0
		switch {
		case busy && d.Efficiency == 0:
			decodeKnown = false
			res.Unknown = append(res.Unknown, fmt.Sprintf("%s: headroom has no decode parameters for the %s backend, so no decode estimate", d.Device, d.Backend))
		case d.BandwidthGBps > 0 && d.Efficiency > 0:
			read := float64(d.BytesPerToken) / (d.Efficiency * d.BandwidthGBps * 1e9) * 1e3
			p := Backend{LayerOverheadMs: d.LayerOverheadMs, VectorOverheadMs: d.VectorOverheadMs}
			d.ReadMs, d.OverheadMs = read, p.overheadMs(d.Layers, d.VectorOps)
			d.TimeMs = d.ReadMs + d.OverheadMs
			ceiling += float64(d.BytesPerToken) / (d.BandwidthGBps * 1e9) * 1e3
		case busy:
			decodeKnown = false
			res.Unknown = append(res.Unknown, fmt.Sprintf("%s: the bandwidth of its memory (domain %s) is unknown, so no decode estimate", d.Device, d.Domain))
		default:
			// Only the embedding lookup: a few KiB per token, nothing to
			// time even without a bandwidth figure.
			res.Assumptions = append(res.Assumptions, fmt.Sprintf("%s only gathers the embedding row (%d bytes per token), counted as no time", d.Device, d.GatherBytes))
		}
		if busy && !d.Calibrated {
			res.Calibrated = false
		}
		if busy && d.Calibrated {
			p, _, _ := c.backend(d.Backend)
			res.ErrorLowPct = math.Min(res.ErrorLowPct, p.ErrorLowPct)
			res.ErrorHighPct = math.Max(res.ErrorHighPct, p.ErrorHighPct)
			if cal != nil && !slices.Contains(res.CalibratedOn, p.Source) {
				res.CalibratedOn = append(res.CalibratedOn, p.Source)
			}
		}
		switch sec, how := prefillSeconds(d, cal); how {
		case "fitted":
			prefill, prefillFitted = prefill+sec, true
		case "peak":
			prefill, prefillPeak = prefill+sec, true
		case "unknown":
			prefillKnown = false
			res.Unknown = append(res.Unknown, fmt.Sprintf("%s: no published compute figure and no prompt measured on this machine, so no prefill estimate", d.Device))
		}
		total += d.TimeMs
		res.Devices = append(res.Devices, d)
	}
	res.Assumptions = append(res.Assumptions, c.backendAssumptions(res.Devices)...)
	if !res.Calibrated {
		res.ErrorLowPct, res.ErrorHighPct = 0, 0
		res.Assumptions = append(res.Assumptions, "some work runs on a backend without calibration data: the decode figure rests on stated priors and has no error bound")
	}
	if decodeKnown && total > 0 {
		tps := 1000 / total
		res.DecodeTPS, res.DecodeMsPerToken = &tps, &total
		for i := range res.Devices {
			res.Devices[i].TimeShare = res.Devices[i].TimeMs / total
		}
	}
	if decodeKnown && ceiling > 0 {
		c := 1000 / ceiling
		res.DecodeCeilingTPS = &c
	}
	if prefillKnown && prefill > 0 {
		p := 1 / prefill
		res.PrefillTPS = &p
		if prefillPeak {
			res.Assumptions = append(res.Assumptions,
				"prefill = 2 FLOPs per active weight per token at 100% of the dense FP16 tensor peak: an upper figure, with no efficiency fitted (no published prefill point pairs with a vendor FLOPS figure); attention FLOPs and CPU work are left out")
		}
		if prefillFitted {
			res.Assumptions = append(res.Assumptions,
				"prefill = 2 FLOPs per active weight per token at the rate llama-bench's prompt tests reached on this machine")
		}
	}
	return res, nil
}

// checkInputs refuses an estimate's inputs that do not belong together.
func checkInputs(m *arch.Model, r *plan.Result, s *hw.Snapshot, ctxTokens int) error {
	switch {
	case m == nil || r == nil || s == nil:
		return errors.New("speed: model, plan and machine are all needed")
	case len(r.LayerDevice) != m.NLayer+1:
		return fmt.Errorf("speed: the plan places %d layers, the model has %d plus the output layer", len(r.LayerDevice), m.NLayer)
	case ctxTokens < 0:
		return fmt.Errorf("speed: ctx_tokens is %d, expected zero or more", ctxTokens)
	}
	return nil
}

// prefillSeconds is the time device d takes to prefill one token: at the
// rate llama-bench's prompt tests reached here ("fitted"), else at its
// published peak ("peak"); "unknown" where it has neither, "" where it
// holds no active weight.
func prefillSeconds(d DeviceResult, cal *Calibrated) (float64, string) {
	switch {
	case d.ActiveParams == 0:
		return 0, ""
	case cal != nil && cal.PrefillGFLOPS > 0:
		return 2 * float64(d.ActiveParams) / (cal.PrefillGFLOPS * 1e9), "fitted"
	case d.PeakTFLOPS > 0:
		return 2 * float64(d.ActiveParams) / (d.PeakTFLOPS * 1e12), "peak"
	}
	return 0, "unknown"
}

// backendAssumptions states the parameters of each backend the devices
// use: its efficiency, its overheads and where they come from.
func (c *Calibration) backendAssumptions(devices []DeviceResult) []string {
	var out []string
	for _, b := range usedBackends(devices) {
		p, _, ok := c.backend(b)
		if !ok {
			continue
		}
		over := fmt.Sprintf("%.4f ms per layer", p.LayerOverheadMs)
		switch {
		case p.VectorOverheadMs > 0 && p.LayerOverheadMs == 0:
			over = fmt.Sprintf("%.4f ms per one-dimensional weight", p.VectorOverheadMs)
		case p.VectorOverheadMs > 0:
			over += fmt.Sprintf(" and %.4f ms per one-dimensional weight", p.VectorOverheadMs)
		}
		out = append(out, fmt.Sprintf("%s: efficiency %.3f, %s per token; %s", b, p.Efficiency, over, p.Source))
	}
	return out
}

// EstimateProfile is Estimate of profile p of model m placed on the
// snapshot's devices cpu and gpus, at each context fill in fills. It
// places without the compute replay (plan.Place): a token reads weights
// and caches, never a compute buffer, so the replay would change nothing
// here and cost most of the time. A fill that cannot be estimated is left
// out, and every fill when p cannot be placed.
func EstimateProfile(m *arch.Model, p plan.Profile, cpu plan.Device, gpus []plan.Device, s *hw.Snapshot, fills ...int) []Result {
	return (*Calibration)(nil).EstimateProfile(m, p, cpu, gpus, s, fills...)
}

// EstimateProfile is the package's EstimateProfile with c's parameters.
func (c *Calibration) EstimateProfile(m *arch.Model, p plan.Profile, cpu plan.Device, gpus []plan.Device, s *hw.Snapshot, fills ...int) []Result {
	out := []Result{}
	r, err := plan.Place(m, p, cpu, gpus)
	if err != nil {
		return out
	}
	for _, filled := range fills {
		if e, err := c.Estimate(m, r, s, filled); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// deviceResult looks a device up in the snapshot and fills in its figures
// and its backend's parameters.
func deviceResult(s *hw.Snapshot, t *traffic, c *Calibration) (DeviceResult, *Calibrated, error) {
	dv := s.Device(t.device)
	if dv == nil {
		return DeviceResult{}, nil, fmt.Errorf("speed: the plan uses device %s, which the machine does not have", t.device)
	}
	d := DeviceResult{Device: dv.Name, Backend: dv.Backend, Domain: dv.Domain, Layers: t.layers,
		WeightBytes: t.weights, GatherBytes: t.gather, KVBytes: t.kv, StateBytes: t.state,
		BytesPerToken: t.bytes(), ActiveParams: t.params, VectorOps: t.vectors}
	if dom := s.Domain(dv.Domain); dom != nil {
		d.BandwidthGBps, d.BandwidthSource = dom.BandwidthGBps, dom.BandwidthSource
	}
	if f, ok := lookupCompute(dv.Description); ok && dv.Type != hw.TypeCPU {
		d.PeakTFLOPS, d.PeakSource = f.FP16TFLOPS, f.Source
	}
	// Without parameters the efficiency stays zero and the caller reports
	// the device as unknown rather than borrowing another backend's.
	p, cal, ok := c.backend(dv.Backend)
	if ok {
		d.Efficiency, d.LayerOverheadMs, d.VectorOverheadMs, d.Calibrated = p.Efficiency, p.LayerOverheadMs, p.VectorOverheadMs, p.Calibrated
	}
	return d, cal, nil
}

// usedBackends lists the backends of the devices that do work, once each,
// in device order.
func usedBackends(ds []DeviceResult) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range ds {
		if (d.Layers > 0 || d.WeightBytes+d.KVBytes+d.StateBytes > 0) && !seen[d.Backend] {
			seen[d.Backend] = true
			out = append(out, d.Backend)
		}
	}
	return out
}
