package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// -fa auto turns flash attention off where a layer's CUDA device has no
// kernel for it (a K cache of another type than V, say), keeping the
// cache made for it: V not transposed, and the attention graph then
// transposes it into a copy, which the compute buffer holds.
func TestFlashAutoOnCUDA(t *testing.T) {
	m := model(t, "llama-3.2-1b", synth.Q8_0)
	cpu := Device{Name: "CPU", Backend: "CPU"}
	account := func(backend, ctk, ctv string, fa FlashAttn) *Result {
		t.Helper()
		gpu := Device{Name: backend + "0", Backend: backend, Free: 24 << 30}
		p := Defaults()
		p.Ctx, p.Parallel, p.GPULayers, p.FlashAttn, p.CacheK, p.CacheV = 4096, 1, 999, fa, ctk, ctv
		r, err := Account(m, p, cpu, []Device{gpu})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	compute := func(r *Result, dev string) int64 {
		for _, b := range r.Buffers {
			if b.Kind == KindCompute && b.Device == dev {
				return b.Bytes
			}
		}
		t.Fatalf("no %s compute buffer", dev)
		return 0
	}
	for _, tc := range []struct {
		backend, ctk, ctv string
		flash             bool
	}{
		{"CUDA", "f16", "f16", true},
		{"CUDA", "q8_0", "q8_0", true},
		{"CUDA", "q8_0", "f16", false}, // K and V of different types
		{"ROCm", "q8_0", "f16", false},
		{"Vulkan", "q8_0", "f16", true},
		{"CUDA", "f16", "q8_0", true}, // a quantized V makes it on outright
	} {
		r := account(tc.backend, tc.ctk, tc.ctv, FlashAuto)
		if r.Context.Flash != tc.flash || r.Context.VTrans {
			t.Errorf("%s -ctk %s -ctv %s -fa auto: flash %v, V transposed %v; want flash %v, not transposed", tc.backend, tc.ctk, tc.ctv, r.Context.Flash, r.Context.VTrans, tc.flash)
		}
	}
	// Turned off, the graph is the one without flash attention, whose
	// scores (256 MiB at 4096 cells, 512 tokens and 32 heads) the buffer
	// holds, against a V that is not transposed: far above flash
	// attention's buffer (216 MiB above here).
	off, on := account("CUDA", "q8_0", "f16", FlashAuto), account("CUDA", "q8_0", "q8_0", FlashAuto)
	if d := compute(off, "CUDA0") - compute(on, "CUDA0"); d < 128<<20 {
		t.Errorf("CUDA0 compute with flash attention turned off by auto is %d bytes above flash attention's, want most of the 256 MiB of scores", d)
	}
}

// CUDA's kernels by head size and cache type (ggml_cuda_get_best_fattn_kernel).
func TestCUDAFlashKernels(t *testing.T) {
	layer := func(heads, headK, headV int) arch.Layer {
		return arch.Layer{Attention: arch.Full, HeadsKV: heads, KDim: heads * headK, VDim: heads * headV}
	}
	m := &arch.Model{NHead: 32}
	for _, tc := range []struct {
		name   string
		l      arch.Layer
		k, v   gguf.GGMLType
		kernel bool
	}{
		{"head 128", layer(8, 128, 128), gguf.TypeF16, gguf.TypeF16, true},
		{"head 256 q8_0", layer(8, 256, 256), gguf.TypeQ8_0, gguf.TypeQ8_0, true},
		{"q4_1 cache", layer(8, 128, 128), gguf.TypeQ4_1, gguf.TypeQ4_1, false},
		{"mixed types", layer(8, 128, 128), gguf.TypeQ8_0, gguf.TypeF16, false},
		{"head 160", layer(8, 160, 160), gguf.TypeF16, gguf.TypeF16, false},
		{"192/128 at 8 heads a group", layer(4, 192, 128), gguf.TypeF16, gguf.TypeF16, true},
		{"192/128 without grouping", layer(32, 192, 128), gguf.TypeF16, gguf.TypeF16, false},
		{"512 without grouping", layer(32, 512, 512), gguf.TypeF16, gguf.TypeF16, false},
	} {
		if got := cudaFlash(m, tc.l, tc.k, tc.v); got != tc.kernel {
			t.Errorf("%s: kernel %v, want %v", tc.name, got, tc.kernel)
		}
	}
}
