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
	// Align and HostAlign are the offset alignments of the device's
	// buffers and of its pinned host buffers, which the compute buffers
	// are laid out with; 0 means the backend's usual value.
	Align     int64 `json:"alignment_bytes,omitempty"`
	HostAlign int64 `json:"host_alignment_bytes,omitempty"`
	// Features are CPU instruction sets (avx2, avx512, neon, dotprod,
	// i8mm); they decide which weights ggml repacks.
	Features []string `json:"features,omitempty"`
	// Endpoint is the rpc-server of an RPC device, and Buft its buffer
	// type's name, which names the server's own device index and the
	// endpoint ("RPC0[10.0.0.2:50052]").
	Endpoint string `json:"endpoint,omitempty"`
	Buft     string `json:"buffer_type,omitempty"`
	// NoEvents: the device reports no events capability, which a CUDA or
	// HIP build made with GGML_CUDA_NO_PEER_COPY does
	// (ggml_backend_cuda_device_get_props); llama.cpp then runs without
	// pipeline parallelism.
	NoEvents bool `json:"no_events,omitempty"`
}

// bufferType is the name llama.cpp prints for the device's own buffers.
func (d Device) bufferType() string {
	if d.Buft != "" {
		return d.Buft
	}
	return d.Name
}

// bufferTypeOn is the buffer type of the caches llama.cpp puts on device
// dev: the GPU's own (which for an RPC device names its server, not the
// device), or dev itself for the CPU.
func bufferTypeOn(dev string, gpus []Device) string {
	for _, g := range gpus {
		if g.Name == dev {
			return g.bufferType()
		}
	}
	return dev
}

// hostGPU is the GPU whose pinned host buffer type llama.cpp adds to the
// CPU's buffer types and uses for the host's compute buffer: the first
// device that has one (an RPC device has none), or nil.
func hostGPU(gpus []Device) *Device {
	for i := range gpus {
		if gpus[i].HostBuffer() != "" {
			return &gpus[i]
		}
	}
	return nil
}

// offloadGPU is the device the scheduler offloads host-weight ops to: the
// first that accepts offloaded ops (ggml-rpc's devices accept none), or
// nil.
func offloadGPU(gpus []Device) *Device {
	for i := range gpus {
		if gpus[i].Backend != "RPC" {
			return &gpus[i]
		}
	}
	return nil
}

// HostBuffer is the pinned host buffer type of a GPU backend (CUDA_Host,
// Vulkan_Host, ROCm_Host), or "" where the backend has none (Metal shares
// memory with the CPU).
func (d Device) HostBuffer() string {
	switch d.Backend {
	case "CUDA":
		return "CUDA_Host"
	case "Vulkan":
		return "Vulkan_Host"
	case "ROCm":
		return "ROCm_Host"
	case "SYCL":
		return "SYCL_Host"
	}
	return ""
}

func (d Device) has(feature string) bool { return slices.Contains(d.Features, feature) }

// computeChunk is the largest buffer the device's buffer types allocate
// (ggml_backend_buft_get_max_size), in which ggml-alloc measures a compute
// buffer chunk by chunk, a tensor that does not fit in the chunks so far
// starting a new one: Vulkan's suballocation block, 1 GiB by default, for
// the device and its pinned host buffer type alike (ministral-3-3b's
// 2102.01 MiB host buffer on llvmpipe is three chunks: two kq of 1 GiB
// and the rest); 0, unbounded, elsewhere.
func (d Device) computeChunk() int64 {
	if d.Backend == "Vulkan" {
		return 1 << 30
	}
	return 0
}

// alignment is the device buffer's tensor alignment.
func (d Device) alignment() int64 {
	if d.Align > 0 {
		return d.Align
	}
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

// hostAlignment is the alignment of the device's pinned host buffer type,
// which holds the host's compute buffer: Vulkan's minMemoryMapAlignment
// (64 bytes on the drivers measured), the CPU's TENSOR_ALIGNMENT for CUDA's.
func (d Device) hostAlignment() int64 {
	if d.HostAlign > 0 {
		return d.HostAlign
	}
	if d.Backend == "Vulkan" {
		return 64
	}
	return cpuAlign
}

// hostPad is what the device's pinned host buffer type adds to every
// buffer it allocates: Vulkan_Host asks for 32 bytes more than it is given
// (ggml_backend_vk_host_buffer_type_alloc_buffer), which the size llama.cpp
// prints includes; CUDA_Host adds nothing.
func (d Device) hostPad() int64 {
	if d.Backend == "Vulkan" {
		return 32
	}
	return 0
}
