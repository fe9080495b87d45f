package speed

import "strings"

// Backend holds the two parameters of the decode model for one llama.cpp
// backend: the share of a device's spec bandwidth its kernels reach while
// streaming weights, and a fixed cost per layer per token (kernel dispatch,
// synchronization, the small ops between matrix products). A flat
// efficiency alone cannot fit the published data: on one chip the smaller
// quantizations show a lower bytes-per-second because the fixed cost is a
// larger share of a shorter token (docs/speed.md).
type Backend struct {
	Name string `json:"name"`
	// Efficiency is the fraction of spec bandwidth reached on weight and
	// KV reads.
	Efficiency float64 `json:"efficiency"`
	// LayerOverheadMs is the fixed time per token for each layer (each
	// entry of plan.Result.LayerDevice, the output layer included) that
	// runs on a device of this backend.
	LayerOverheadMs float64 `json:"layer_overhead_ms"`
	// VectorOverheadMs is the fixed time per token for each
	// one-dimensional weight (a norm's scale, a bias) on a device of this
	// backend: each is an element-wise op of its own in the graph, and on
	// a CPU these small ops, not the layers, are what a token pays for
	// beyond its bytes (docs/speed.md, "Why a cost per one-dimensional weight, not per layer").
	// Only a machine's own calibration fits it; params.go's rows hold it
	// at zero.
	VectorOverheadMs float64 `json:"vector_overhead_ms,omitempty"`
	// Calibrated is true when the parameters were fitted to published
	// llama-bench results. ErrorLowPct and ErrorHighPct are then the
	// lowest and highest signed error (estimate/published - 1) on points
	// the parameters were not fitted on: each fitted point predicted by a
	// refit without it, and the held-out points (TestLeftOutRange derives
	// them from speed/testdata/llamabench.json, rounded outward). The
	// error on the fitted points themselves is smaller and says less.
	Calibrated   bool    `json:"calibrated"`
	ErrorLowPct  float64 `json:"error_low_pct,omitempty"`
	ErrorHighPct float64 `json:"error_high_pct,omitempty"`
	// Source says where the parameters come from.
	Source string `json:"source"`
}

// TimeMs is the backend's time for one token that reads fullBandwidthMs
// worth of bytes at the bandwidth figures, runs layers layers and applies
// vectors one-dimensional weights.
func (b Backend) TimeMs(fullBandwidthMs float64, layers, vectors int) float64 {
	return fullBandwidthMs/b.Efficiency + b.overheadMs(layers, vectors)
}

func (b Backend) overheadMs(layers, vectors int) float64 {
	return float64(layers)*b.LayerOverheadMs + float64(vectors)*b.VectorOverheadMs
}

// backends are the decode parameters per backend. The Metal and CUDA rows
// are least-squares fits (relative error) of t = bytes/(e*BW) + c*layers
// to speed/testdata/llamabench.json; TestFittedParameters re-derives them
// from that file and fails if they drift. The other rows are stated priors,
// flagged uncalibrated, because the reference holds no published point for
// them.
var backends = map[string]Backend{
	"Metal": {Name: "Metal", Efficiency: 0.922, LayerOverheadMs: 0.1589, Calibrated: true, ErrorLowPct: -12, ErrorHighPct: 8,
		Source: "fitted to 18 llama-bench tg128 points of Llama-2-7B F16/Q8_0/Q4_0 on six Apple chips, build 8e672ef (llama.cpp discussion #4167; the points in speed/testdata/llamabench.json)"},
	"CUDA": {Name: "CUDA", Efficiency: 0.886, LayerOverheadMs: 0.0345, Calibrated: true, ErrorLowPct: -6, ErrorHighPct: 23,
		Source: "fitted to 5 llama-bench tg128 points of Llama-2-7B Q4_0 on five NVIDIA cards (llama.cpp discussion #15013 and secondary quotes; the points in speed/testdata/llamabench.json)"},
	"CPU": {Name: "CPU", Efficiency: 0.7, LayerOverheadMs: 0,
		Source: "uncalibrated prior: pvaz/llamafit's RAM term B/(0.7*BW); no published CPU llama-bench point in the reference"},
	"ROCm": {Name: "ROCm", Efficiency: 0.9, LayerOverheadMs: 0.0345,
		Source: "uncalibrated prior: the reference's two-term starting point (0.9 of spec bandwidth) with CUDA's fitted per-layer cost; no published ROCm point in the reference"},
	"Vulkan": {Name: "Vulkan", Efficiency: 0.9, LayerOverheadMs: 0.0345,
		Source: "uncalibrated prior: the reference's two-term starting point (0.9 of spec bandwidth) with CUDA's fitted per-layer cost; no published Vulkan point in the reference"},
	"SYCL": {Name: "SYCL", Efficiency: 0.9, LayerOverheadMs: 0.0345,
		Source: "uncalibrated prior: the reference's two-term starting point (0.9 of spec bandwidth) with CUDA's fitted per-layer cost; no published SYCL point in the reference"},
}

// BackendParams returns the decode parameters of a backend and whether
// headroom has any.
func BackendParams(name string) (Backend, bool) {
	b, ok := backends[name]
	return b, ok
}

// computeFigure is a vendor's published dense peak throughput for a GPU.
type computeFigure struct {
	// Name matches a device description exactly or as its last words, as
	// the bandwidth table in hw/presets.json does.
	Name string
	// FP16TFLOPS is "Peak FP16 Tensor TFLOPS with FP32 Accumulate", dense
	// (without the sparsity feature).
	FP16TFLOPS float64
	Source     string
}

// computeFigures holds only figures found in a vendor document. Apple
// publishes no TFLOPS figure for the M3 and M4 families, NVIDIA gives the
// GB10 only as sparse FP4, and AMD's Radeon 8060S page gives none for its
// GPU alone, so those devices have no prefill estimate.
var computeFigures = []computeFigure{
	{Name: "RTX 4090", FP16TFLOPS: 165.2,
		Source: "NVIDIA Ada GPU Architecture whitepaper, Appendix A (GeForce RTX 4090): Peak FP16 Tensor TFLOPS with FP32 Accumulate 165.2 dense / 330.4 sparse"},
	{Name: "RTX 3090", FP16TFLOPS: 71,
		Source: "NVIDIA Ampere GA102 GPU Architecture whitepaper, Appendix A (GeForce RTX 3090): Peak FP16 Tensor TFLOPS with FP32 Accumulate 71 dense / 142 sparse"},
}

// lookupCompute finds a device's published compute figure by its
// description.
func lookupCompute(description string) (computeFigure, bool) {
	name := strings.ToLower(strings.Join(strings.Fields(description), " "))
	for _, f := range computeFigures {
		pat := strings.ToLower(f.Name)
		if name == pat || strings.HasSuffix(name, " "+pat) {
			return f, true
		}
	}
	return computeFigure{}, false
}
