package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
	"github.com/headroom-llm/headroom/plan/graph"
)

// splitComputeBytes replays the worst-case graphs on a CPU and GPUs split
// and returns each backend buffer's size, keyed by device name (the CPU's
// buffer is its host buffer type).
func splitComputeBytes(m *arch.Model, c graph.Context, p Profile, cpu Device, gpus []Device, layerDev []string, homes map[string]graph.Home, mem *ggml.Arena, build graph.Builder) map[string]int64 {
	if mem == nil {
		mem = &ggml.Arena{}
	}
	kv := make([]string, len(m.Layers))
	for i := range kv {
		kv[i] = layerDev[i]
		if p.NoKVOffload {
			kv[i] = cpu.Name
		}
	}
	o := ggml.Sched{CPU: cpu.Name, MaxAlloc: map[string]int64{}, Mem: mem,
		CacheTypes: map[string]gguf.GGMLType{"cache_k": c.TypeK, "cache_v": c.TypeV},
		Optimize:   map[string]ggml.Optimizer{}, NoBroadcast3: map[string]bool{},
		Buffers: map[string]ggml.BufferType{cpu.Name: {Align: cpuAlign}},
		Offload: true, // llama.cpp's default
		Copies:  schedCopies(m, p, gpus, layerDev),
		Rules:   p.rules(),
	}
	if g := offloadGPU(gpus); g != nil {
		o.OffloadTo = g.Name
	}
	if h := hostGPU(gpus); h != nil {
		// the host buffer type's, which adds a pad to each chunk's buffer
		o.Buffers[cpu.Name] = ggml.BufferType{Align: h.hostAlignment(), MaxSize: h.computeChunk(), Pad: h.hostPad()}
	}
	for _, g := range gpus {
		switch g.Backend {
		case "Vulkan":
			o.Optimize[g.Name] = ggml.OptVulkan
		case "CUDA", "ROCm":
			o.Optimize[g.Name] = ggml.OptCUDA
		case "Metal":
			if p.rules().MetalReorder {
				o.Optimize[g.Name] = ggml.OptMetal
			}
		}
		o.NoBroadcast3[g.Name] = g.Backend == "Vulkan"
		o.MaxAlloc[g.Name] = g.MaxAlloc
		o.Buffers[g.Name] = ggml.BufferType{Align: g.alignment(), MaxSize: g.computeChunk()}
	}
	peak := map[string]int64{}
	// As on the CPU, the one-token-per-sequence graph only matters when
	// there are more sequences than micro-batch tokens: every tensor the
	// allocator places grows with the token count, and without op offload
	// it copies no weights.
	graphs := []int{c.NUBatch}
	if c.NSeq > c.NUBatch {
		graphs = append(graphs, c.NSeq)
	}
	for _, tokens := range graphs {
		g := build(c, tokens, graph.Placement{CPU: cpu.Name, Homes: homes, KVDevices: kv, LayerDevices: layerDev, Rules: p.rules(),
			PinNorms: tokens < 32 || fullOffload(m, p), Arena: mem})
		for dev, n := range o.Measure(g) {
			peak[dev] = max(peak[dev], n)
		}
	}
	return peak
}

// fullOffload is llama_context's full_offload: -ngl above the layer count,
// so the output layer is offloaded too.
func fullOffload(m *arch.Model, p Profile) bool {
	return p.GPULayers == GPULayersAuto || p.GPULayers > m.NLayer
}

// weightHomes says where each weight of the graph lives, by GGUF name.
func weightHomes(m *arch.Model, p Profile, cpu Device, gpus []Device, layerDev []string) map[string]graph.Home {
	homes := make(map[string]graph.Home, len(m.Tensors)+1)
	weightsInto(m, p, cpu, gpus, layerDev, homes)
	return homes
}
