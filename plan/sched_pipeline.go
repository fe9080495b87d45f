package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file holds llama_context's choice of pipeline parallelism; what
// the scheduler then does with its input copies is ggml.Sched.Copies
// (plan/ggml/pipeline.go).

// schedCopies is the number of input copies ggml_backend_sched_new is asked
// for: GGML_SCHED_MAX_COPIES (ggml.MaxCopies) when llama_context turns
// pipeline parallelism on (llama-context.cpp: more than one device, every layer and the output
// layer offloaded, layer split, the KV cache offloaded, no tensor
// overrides, and every non-CPU device able to run asynchronously with
// events), else 1. Measured over rpc-servers (conformance/testdata/server,
// the rpc cases: "pipeline parallelism enabled", "sched copies = 4").
func schedCopies(m *arch.Model, p Profile, gpus []Device, layerDev []string) int {
	if len(gpus) < 2 || p.NoKVOffload || len(p.Overrides) > 0 || p.CPUMoE > 0 {
		return 1
	}
	if p.GPULayers != GPULayersAuto && p.GPULayers <= m.NLayer {
		return 1
	}
	for _, g := range gpus {
		if !asyncEvents(g.Backend) || g.NoEvents {
			return 1
		}
	}
	onGPU := 0
	for _, d := range layerDev {
		for _, g := range gpus {
			if d == g.Name {
				onGPU++
				break
			}
		}
	}
	if onGPU < len(layerDev) {
		return 1
	}
	return ggml.MaxCopies
}

// asyncEvents says whether a backend's devices report both the async and
// the events capability (ggml_backend_dev_get_props), which pipeline
// parallelism requires of every device: ggml-rpc's do (it queues commands
// on its connection), as do CUDA's, ROCm's (CUDA's code) and Vulkan's.
func asyncEvents(backend string) bool {
	switch backend {
	case "RPC", "CUDA", "ROCm", "Vulkan":
		return true
	}
	return false
}
