package plan

import "slices"

// Device is a compute device as llama.cpp names it: CPU, CUDA0, Vulkan0,
// MTL0, ROCm0.
type Device struct {
	Name    string `json:"name"`
	Backend string `json:"backend"` // CPU, CUDA, Vulkan, Metal, ROCm
	// Free is the memory the backend reports free; llama.cpp splits layers
	// across GPUs in proportion to it when no -ts is given.
	Free int64 `json:"free_bytes"`
	// MaxAlloc is the largest single tensor the device can bind (Vulkan's
	// maxStorageBufferRange); 0 means no limit. A weight larger than this
	// stays in host memory.
	MaxAlloc int64 `json:"max_alloc_bytes,omitempty"`
	// Features are CPU instruction sets (avx2, avx512, neon, dotprod,
	// i8mm); they decide which weights ggml repacks.
	Features []string `json:"features,omitempty"`
}

// HostBuffer is the pinned host buffer type of a GPU backend (CUDA_Host,
// Vulkan_Host, ROCm_Host), or "" where the backend has none (Metal shares
// memory with the CPU).
func (d Device) HostBuffer() string {
	switch d.Backend {
	case "CUDA", "Vulkan", "ROCm", "SYCL":
		return d.Backend + "_Host"
	}
	return ""
}

func (d Device) has(feature string) bool { return slices.Contains(d.Features, feature) }

// alignment is the device buffer's tensor alignment.
func (d Device) alignment() int64 {
	switch d.Backend {
	case "CUDA", "ROCm":
		return 128
	case "Metal":
		return 32
	case "Vulkan":
		return 64
	}
	return 32 // TENSOR_ALIGNMENT of the CPU buffer types
}
