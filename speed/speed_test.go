package speed

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

// expectBytes recomputes, tensor by tensor, what one token reads when every
// layer runs on one device: all weights but the embedding (experts at the
// routed share), the embedding again if the output is tied, and the KV of
// the filled cells.
func expectBytes(m *arch.Model, typeK, typeV gguf.GGMLType, filled int) (weights, gather, kv, state int64) {
	for _, tn := range m.Tensors {
		switch {
		case tn.Layer == arch.InputLayer:
			gather += int64(tn.Size / tn.Shape[1])
			if m.TiedOutput {
				weights += int64(tn.Size)
			}
		case tn.Expert:
			weights += int64(tn.Size) / int64(m.NExpert) * int64(m.NExpertUsed)
		default:
			weights += int64(tn.Size)
		}
	}
	for _, l := range m.Layers {
		if l.Recurrent {
			state += 4 * int64(l.RDim+l.SDim)
		}
		kind := l.Attention
		if l.KVShared {
			kind = m.Layers[l.KVLayer].Attention
		}
		if kind == arch.NoAttention {
			continue
		}
		cells := filled
		if kind == arch.Sliding {
			cells = min(filled, m.Window)
		}
		k, _ := typeK.RowSize(uint64(l.KDim))
		v, _ := typeV.RowSize(uint64(l.VDim))
		kv += int64(k+v) * int64(cells)
	}
	return
}

// TestBytesPerToken checks the per-token traffic for each kind of layer on
// a machine where the whole model is offloaded to one GPU.
func TestBytesPerToken(t *testing.T) {
	for _, tc := range []struct {
		shape string
		quant synth.Quant
		machine,
		gpu string
		filled int
	}{
		{"tinyllama-1.1b", synth.Q4_K_M, "rtx-4090", "CUDA0", 1000},    // dense, GQA
		{"qwen3-30b-a3b", synth.Q4_K_M, "rtx-5090", "CUDA0", 4096},     // routed experts
		{"gemma-3-1b", synth.Q8_0, "m4-pro-24", "MTL0", 3000},          // sliding window, tied output
		{"gpt-oss-20b", synth.MXFP4_MOE, "m4-max-64", "MTL0", 8000},    // experts and sliding window
		{"mamba2-130m", synth.F16, "rtx-3060-12", "CUDA0", 500},        // recurrent state only
		{"lfm2-350m", synth.Q8_0, "strix-halo-128", "ROCm0", 2000},     // convolution state and attention
		{"deepseek-v2-lite", synth.Q4_K_M, "dgx-spark", "CUDA0", 2048}, // MLA: K only
	} {
		t.Run(tc.shape, func(t *testing.T) {
			m := namedModel(t, tc.shape, tc.quant)
			s := preset(t, tc.machine)
			r := account(t, m, profile(8192, plan.GPULayersAuto), s)
			res, err := Estimate(m, r, s, tc.filled)
			if err != nil {
				t.Fatal(err)
			}
			w, g, kv, st := expectBytes(m, r.Context.TypeK, r.Context.TypeV, tc.filled)
			var gpu, cpu *DeviceResult
			for i := range res.Devices {
				switch res.Devices[i].Device {
				case tc.gpu:
					gpu = &res.Devices[i]
				case "CPU":
					cpu = &res.Devices[i]
				}
			}
			if gpu == nil || cpu == nil {
				t.Fatalf("devices %+v, want %s and CPU", res.Devices, tc.gpu)
			}
			if gpu.WeightBytes != w || gpu.KVBytes != kv || gpu.StateBytes != st {
				t.Errorf("%s reads weights %d, kv %d, state %d; want %d, %d, %d", tc.gpu, gpu.WeightBytes, gpu.KVBytes, gpu.StateBytes, w, kv, st)
			}
			if cpu.GatherBytes != g || cpu.WeightBytes != 0 || cpu.Layers != 0 {
				t.Errorf("CPU: gather %d, weights %d, layers %d; want only the %d-byte embedding row", cpu.GatherBytes, cpu.WeightBytes, cpu.Layers, g)
			}
			if gpu.Layers != m.NLayer+1 {
				t.Errorf("%s runs %d layers, want %d", tc.gpu, gpu.Layers, m.NLayer+1)
			}
			if res.DecodeTPS == nil || *res.DecodeTPS <= 0 {
				t.Fatalf("no decode estimate: %v", res.Unknown)
			}
			// The two terms add up, and the ceiling is above the estimate.
			p := backends[gpu.Backend]
			wantMs := float64(gpu.BytesPerToken)/(p.Efficiency*gpu.BandwidthGBps*1e9)*1e3 + float64(gpu.Layers)*p.LayerOverheadMs
			if math.Abs(gpu.TimeMs-wantMs) > 1e-9 {
				t.Errorf("%s: %.6f ms, want %.6f", tc.gpu, gpu.TimeMs, wantMs)
			}
			if *res.DecodeCeilingTPS <= *res.DecodeTPS {
				t.Errorf("ceiling %.1f is not above the estimate %.1f", *res.DecodeCeilingTPS, *res.DecodeTPS)
			}
		})
	}
}

// device finds a device's share of the token.
func device(t *testing.T, res Result, name string) DeviceResult {
	t.Helper()
	for _, d := range res.Devices {
		if d.Device == name {
			return d
		}
	}
	t.Fatalf("no device %s in %+v", name, res.Devices)
	return DeviceResult{}
}

// TestSlidingWindowCapsKV: past the window, only the layers reading a
// global cache read more as the context grows. Gemma 3n's last ten layers
// keep no cache but attend over layer 18's (sliding) or 19's (global), so
// two of them are global readers beside the four global layers.
func TestSlidingWindowCapsKV(t *testing.T) {
	for _, tc := range []struct {
		shape         string
		globalReaders int
	}{
		{"gemma-3-1b", 4},
		{"gemma-3n-e2b", 6},
	} {
		m := namedModel(t, tc.shape, synth.Q8_0)
		s := preset(t, "m4-max-64")
		r := account(t, m, profile(32768, plan.GPULayersAuto), s)
		kvAt := func(filled int) int64 {
			res, err := Estimate(m, r, s, filled)
			if err != nil {
				t.Fatal(err)
			}
			return device(t, res, "MTL0").KVBytes
		}
		var perCell int64
		readers := 0
		for _, l := range m.Layers {
			kind := l.Attention
			if l.KVShared {
				kind = m.Layers[l.KVLayer].Attention
			}
			if kind == arch.Full {
				k, _ := r.Context.TypeK.RowSize(uint64(l.KDim))
				v, _ := r.Context.TypeV.RowSize(uint64(l.VDim))
				perCell += int64(k + v)
				readers++
			}
		}
		if readers != tc.globalReaders {
			t.Fatalf("%s: %d layers read a global cache, want %d", tc.shape, readers, tc.globalReaders)
		}
		if got := kvAt(20000) - kvAt(10000); got != 10000*perCell {
			t.Errorf("%s: 10000 more cells read %d more bytes, want %d (the global readers only)", tc.shape, got, 10000*perCell)
		}
	}
}

// TestPartialOffload: layers left on the CPU read system RAM at its
// bandwidth and backend, and cost most of the token.
func TestPartialOffload(t *testing.T) {
	m := namedModel(t, "llama-3.1-70b", synth.Q4_K_M)
	s := preset(t, "rtx-4090")
	r := account(t, m, profile(8192, 40), s)
	res, err := Estimate(m, r, s, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Devices) != 2 {
		t.Fatalf("devices %+v", res.Devices)
	}
	cpu, gpu := device(t, res, "CPU"), device(t, res, "CUDA0")
	if cpu.Layers != 41 || gpu.Layers != 40 {
		t.Fatalf("CPU %d layers, GPU %d; want 41 and 40", cpu.Layers, gpu.Layers)
	}
	if cpu.BandwidthGBps != 89.6 || gpu.BandwidthGBps != 1008 {
		t.Errorf("bandwidths %g and %g, want the preset's 89.6 and 1008", cpu.BandwidthGBps, gpu.BandwidthGBps)
	}
	if cpu.TimeShare < 0.8 || math.Abs(cpu.TimeShare+gpu.TimeShare-1) > 1e-9 {
		t.Errorf("time shares %.3f + %.3f", cpu.TimeShare, gpu.TimeShare)
	}
	if res.Calibrated || res.ErrorLowPct != 0 || res.ErrorHighPct != 0 {
		t.Errorf("CPU layers run on an uncalibrated backend, yet calibrated=%v error %v..%v", res.Calibrated, res.ErrorLowPct, res.ErrorHighPct)
	}
	if res.PrefillTPS != nil {
		t.Errorf("prefill %.0f with CPU layers, which have no compute figure", *res.PrefillTPS)
	}
}

// TestUnknownFigures: a device without a bandwidth gives no decode
// estimate, a GPU without a published compute figure no prefill; neither
// is guessed.
func TestUnknownFigures(t *testing.T) {
	m := namedModel(t, "qwen3-8b", synth.Q4_K_M)
	for _, tc := range []struct {
		machine       string
		dropBandwidth string // domain whose bandwidth is removed
		backend       string // renames CUDA0's backend after planning
		decode        bool
		prefill       bool
		unknown       string
	}{
		{"rtx-4090", "", "", true, true, ""},
		{"rtx-4090", "ram", "", true, true, ""}, // the CPU only gathers the embedding
		{"rtx-4090", "gpu0", "", false, true, "CUDA0: the bandwidth"},
		{"rtx-4090", "", "CANN", false, true, "no decode parameters for the CANN backend"},
		{"m4-max-64", "", "", true, false, "MTL0: no published compute figure"},
		{"rtx-5070", "", "", true, false, "CUDA0: no published compute figure"},
	} {
		t.Run(tc.machine+"-"+tc.dropBandwidth+tc.backend, func(t *testing.T) {
			s := preset(t, tc.machine)
			if tc.dropBandwidth != "" {
				s.Domain(tc.dropBandwidth).BandwidthGBps = 0
			}
			r := account(t, m, profile(4096, plan.GPULayersAuto), s)
			if tc.backend != "" {
				s.Device("CUDA0").Backend = tc.backend
			}
			res, err := Estimate(m, r, s, 1024)
			if err != nil {
				t.Fatal(err)
			}
			if (res.DecodeTPS != nil) != tc.decode || (res.DecodeCeilingTPS != nil) != tc.decode {
				t.Errorf("decode known %v, want %v (%v)", res.DecodeTPS != nil, tc.decode, res.Unknown)
			}
			if (res.PrefillTPS != nil) != tc.prefill {
				t.Errorf("prefill known %v, want %v (%v)", res.PrefillTPS != nil, tc.prefill, res.Unknown)
			}
			if tc.unknown != "" && !strings.Contains(strings.Join(res.Unknown, "\n"), tc.unknown) {
				t.Errorf("unknown %q, want a line with %q", res.Unknown, tc.unknown)
			}
		})
	}
}

// TestPrefill: 2 FLOPs per active weight at the published peak.
func TestPrefill(t *testing.T) {
	m := namedModel(t, "qwen3-30b-a3b", synth.Q4_K_M)
	s := preset(t, "rtx-4090")
	r := account(t, m, profile(4096, plan.GPULayersAuto), s)
	res, err := Estimate(m, r, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	var active int64
	for _, tn := range m.Tensors {
		switch {
		case len(tn.Shape) < 2 || tn.Layer == arch.InputLayer:
		case tn.Expert:
			active += int64(tn.Elements()) / int64(m.NExpert) * int64(m.NExpertUsed)
		default:
			active += int64(tn.Elements())
		}
	}
	// About 3.3B active of 30.5B: the A3B in the name.
	if active < 3.0e9 || active > 3.6e9 {
		t.Fatalf("active parameters %d, expected about 3.3e9", active)
	}
	want := 165.2e12 / (2 * float64(active))
	if res.PrefillTPS == nil || math.Abs(*res.PrefillTPS/want-1) > 1e-9 {
		t.Errorf("prefill %v, want %.0f", res.PrefillTPS, want)
	}
}

// TestNoKVOffload: with -nkvo the cache is read from system RAM.
func TestNoKVOffload(t *testing.T) {
	m := namedModel(t, "llama-3.1-8b", synth.Q4_K_M)
	s := preset(t, "rtx-4090")
	p := profile(32768, plan.GPULayersAuto)
	p.NoKVOffload = true
	r := account(t, m, p, s)
	res, err := Estimate(m, r, s, 32768)
	if err != nil {
		t.Fatal(err)
	}
	cpu, gpu := device(t, res, "CPU"), device(t, res, "CUDA0")
	if gpu.KVBytes != 0 || cpu.KVBytes != 32768*32*2*1024*2 {
		t.Errorf("KV read on CPU %d, GPU %d; want all %d on the CPU", cpu.KVBytes, gpu.KVBytes, 32768*32*2*1024*2)
	}
}

// TestContextClamp: a context past the planned one is clamped and said so.
func TestContextClamp(t *testing.T) {
	m := namedModel(t, "tinyllama-1.1b", synth.Q4_K_M)
	s := preset(t, "cpu-32")
	r := account(t, m, profile(2048, plan.GPULayersAuto), s)
	res, err := Estimate(m, r, s, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if res.CtxTokens != 2048 || !strings.Contains(strings.Join(res.Assumptions, "\n"), "clamped") {
		t.Errorf("ctx %d, assumptions %q", res.CtxTokens, res.Assumptions)
	}
}

func TestEstimateErrors(t *testing.T) {
	m := namedModel(t, "tinyllama-1.1b", synth.Q4_K_M)
	s := preset(t, "rtx-4090")
	r := account(t, m, profile(2048, plan.GPULayersAuto), s)
	short := *r
	short.LayerDevice = r.LayerDevice[:3]
	other := preset(t, "m4-pro-24")
	for _, tc := range []struct {
		name string
		m    *arch.Model
		r    *plan.Result
		s    *hw.Snapshot
		ctx  int
		want string
	}{
		{"nil model", nil, r, s, 0, "all needed"},
		{"layer count", m, &short, s, 0, "places 3 layers"},
		{"negative context", m, r, s, -1, "expected zero or more"},
		{"device missing", m, r, other, 0, "does not have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Estimate(tc.m, tc.r, tc.s, tc.ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestJSONShape pins the snake_case contract and null for unknown figures.
func TestJSONShape(t *testing.T) {
	m := namedModel(t, "tinyllama-1.1b", synth.Q4_K_M)
	s := preset(t, "m4-16")
	r := account(t, m, profile(2048, plan.GPULayersAuto), s)
	res, err := Estimate(m, r, s, 512)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"decode_tokens_per_s":`, `"prefill_tokens_per_s":null`, `"bytes_per_token":`,
		`"time_share":`, `"bandwidth_gbps":120`, `"calibrated":true`, `"error_low_pct":-12`, `"error_high_pct":8`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON lacks %s:\n%s", want, data)
		}
	}
}
