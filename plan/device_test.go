package plan

import (
	"github.com/headroom-llm/headroom/synth"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// CUDA (and ROCm, which shares its code) allocates a quantized weight
// whose rows are not a multiple of 512 elements with one short row more
// (ggml_backend_cuda_buffer_type_get_alloc_size, MATRIX_ROW_PADDING), so
// its kernels read whole tiles; other buffers hold the bytes alone.
func TestDeviceBytes(t *testing.T) {
	tensor := func(typ gguf.GGMLType, ne0, ne1 uint64) arch.Tensor {
		row, _ := typ.RowSize(ne0)
		return arch.Tensor{Tensor: gguf.Tensor{TensorInfo: gguf.TensorInfo{Shape: []uint64{ne0, ne1}, Type: typ, Size: row * ne1}}}
	}
	q4k1152 := tensor(gguf.TypeQ4_K, 1152, 100) // 1152 % 512 = 128
	short, _ := gguf.TypeQ4_K.RowSize(384)
	for _, tc := range []struct {
		name    string
		backend string
		t       arch.Tensor
		want    int64
	}{
		{"CUDA pads a short quantized row", "CUDA", q4k1152, int64(q4k1152.Size + short)},
		{"ROCm pads alike", "ROCm", q4k1152, int64(q4k1152.Size + short)},
		{"Vulkan does not", "Vulkan", q4k1152, int64(q4k1152.Size)},
		{"Metal does not", "Metal", q4k1152, int64(q4k1152.Size)},
		{"rows of 512 need none", "CUDA", tensor(gguf.TypeQ4_K, 2048, 100), int64(tensor(gguf.TypeQ4_K, 2048, 100).Size)},
		{"F32 is not quantized", "CUDA", tensor(gguf.TypeF32, 1152, 1), 1152 * 4},
		{"F16 is not quantized", "CUDA", tensor(gguf.TypeF16, 1152, 3), 1152 * 2 * 3},
	} {
		if got := deviceBytes(Device{Name: "GPU0", Backend: tc.backend}, tc.t); got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.name, got, tc.want)
		}
	}
}

// The buffer types' alignments and the host pads, as each backend's
// get_alignment and alloc_buffer give them: CUDA's device buffers align
// to 128, its pinned host buffers to the CPU's 32 and add nothing;
// Vulkan_Host adds 32 bytes to every buffer.
func TestBackendBufferRules(t *testing.T) {
	for _, tc := range []struct {
		backend          string
		align, hostAlign int64
		host             string
		pad              int64
	}{
		{"CUDA", 128, 32, "CUDA_Host", 0},
		{"ROCm", 128, 32, "ROCm_Host", 0},
		{"Vulkan", 64, 64, "Vulkan_Host", 32},
		{"Metal", 32, 32, "", 0},
	} {
		d := Device{Name: "GPU0", Backend: tc.backend}
		if d.alignment() != tc.align || d.hostAlignment() != tc.hostAlign || d.HostBuffer() != tc.host || d.hostPad() != tc.pad {
			t.Errorf("%s: align %d, host %q align %d pad %d", tc.backend, d.alignment(), d.HostBuffer(), d.hostAlignment(), d.hostPad())
		}
	}
}

// A GPU that reports no events capability (a CUDA or HIP build with
// GGML_CUDA_NO_PEER_COPY) turns llama.cpp's pipeline parallelism off: one
// copy of the graph inputs instead of four, on every device.
func TestNoEventsNoPipeline(t *testing.T) {
	m := model(t, "qwen3-8b", synth.Q4_K_M)
	cpu := Device{Name: "CPU", Backend: "CPU"}
	compute := func(noEvents bool) map[string]int64 {
		gpus := []Device{
			{Name: "ROCm0", Backend: "ROCm", Free: 24 << 30, NoEvents: noEvents},
			{Name: "ROCm1", Backend: "ROCm", Free: 24 << 30, NoEvents: noEvents},
		}
		p := Defaults()
		p.Ctx, p.Parallel, p.GPULayers = 8192, 1, 99
		r, err := Account(m, p, cpu, gpus)
		if err != nil {
			t.Fatal(err)
		}
		return byType(r.Buffers, KindCompute)
	}
	pp, one := compute(false), compute(true)
	// The host holds the graph inputs the devices read, four times over
	// or once: above all the F16 KQ mask of flash attention, 8192 x 512 x
	// 2 B = 8 MiB, beside a few KiB of positions and indices.
	mask := int64(8192 * 512 * 2)
	if d := pp["ROCm_Host"] - one["ROCm_Host"]; d < 3*mask || d > 3*mask+3*(64<<10) {
		t.Errorf("ROCm_Host compute %d with pipeline parallelism, %d without: want three more copies of the 8 MiB mask and the small inputs", pp["ROCm_Host"], one["ROCm_Host"])
	}
	for _, d := range []string{"ROCm0", "ROCm1"} {
		if one[d] >= pp[d] {
			t.Errorf("%s compute %d without pipeline parallelism, not under %d with it", d, one[d], pp[d])
		}
	}
}
