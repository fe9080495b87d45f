package plan

import "github.com/headroom-llm/headroom/arch"

// This file holds the scheduler's pipeline parallelism, kept apart from
// sched.go: two hooks there (schedOptions.copies and the leaf list
// splitGraph returns) are all it needs.

// schedMaxCopies is GGML_SCHED_MAX_COPIES (ggml-backend.cpp): the copies of
// every input the scheduler keeps when it runs pipeline parallel, so that
// one micro-batch's inputs can be written while the previous one still
// computes on the next device.
const schedMaxCopies = 4

// schedCopies is the number of input copies ggml_backend_sched_new is asked
// for: GGML_SCHED_MAX_COPIES when llama_context turns pipeline parallelism
// on (llama-context.cpp: more than one device, every layer and the output
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
		if !asyncEvents(g.Backend) {
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
	return schedMaxCopies
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

// pipelineLeafs is the leaf list of a split graph the scheduler runs with
// o.copies > 1 (ggml_backend_sched_split_graph): every graph input gets
// copies-1 duplicates beside itself, and every split input copy (a tensor
// copied to the backend of the split that reads it) copies in all; all of
// them are flagged input and output, so ggml-alloc places them before
// anything else and never frees them. They come first, as the scheduler
// adds them to the graph copy before the original leafs.
func pipelineLeafs(leafs, nodes, splitInputs []*gtensor, o schedOptions) []*gtensor {
	// Only inputs that a scheduled node reads are copied (a graph can
	// carry an input it does not use, inp_embd when tokens come in).
	// A node that reads an input on another backend reads the copy
	// splitGraph made instead; the copy's source is the input.
	read := map[*gtensor]bool{}
	for _, n := range append(nodes[:len(nodes):len(nodes)], splitInputs...) {
		if n.op == opView && len(n.src) <= 1 && !n.inplace {
			continue
		}
		for _, s := range n.src {
			if s.input && !s.external {
				read[s] = true
			}
		}
	}
	out := make([]*gtensor, 0, len(leafs)+(len(read)+len(splitInputs))*o.copies)
	pin := func(t *gtensor) {
		t.input, t.output = true, true
		out = append(out, t)
		for i := 1; i < o.copies; i++ {
			c := o.mem.tensor()
			*c = gtensor{name: t.name, bytes: t.bytes, op: t.op, dev: t.dev, layout: t.layout, kind: kNone, input: true, output: true}
			out = append(out, c)
		}
	}
	for _, l := range leafs {
		if read[l] {
			pin(l)
		}
	}
	for _, c := range splitInputs {
		pin(c)
	}
	return append(out, leafs...)
}
