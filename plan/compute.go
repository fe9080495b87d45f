package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/plan/ggml"
	"github.com/headroom-llm/headroom/plan/graph"
)

// outputBuffer is the logits buffer (llama_context::output_reserve):
// n_vocab floats per output row, reserved for n_seq_max rows (or a build's
// own rule, Rules.OutputRows and OutputEmbd), in the host buffer type of
// the device holding the output layer, else the CPU's.
func outputBuffer(m *arch.Model, c graph.Context, rules builds.Rules, cpu Device, gpus []Device, layerDev []string) Buffer {
	buft, pad := cpu.Name, int64(0)
	for _, g := range gpus {
		if g.Name == layerDev[m.NLayer] && g.HostBuffer() != "" {
			buft, pad = g.HostBuffer(), g.hostPad()
		}
	}
	rows, row := c.NSeq, m.NVocab
	if rules.OutputRows > 0 {
		rows = rules.OutputRows
	}
	if rules.OutputEmbd || c.Embeddings {
		row += m.NEmbd
	}
	return Buffer{Device: cpu.Name, BufferType: buft, Kind: KindOutput, Bytes: int64(4*row*rows) + pad}
}

const (
	computeNote = "rough estimate from the graph's largest live tensors; no graph replay for this architecture or device split yet"
	replayNote  = "replay of ggml's allocator on llama.cpp's graph (docs/accuracy.md has the measured error)"
)

// cpuComputeBytes replays the worst-case graphs llama.cpp reserves (a full
// micro-batch, and one token per sequence) and keeps the larger. Every
// tensor the allocator places grows with the token count, so the
// one-token-per-sequence graph only matters when there are more sequences
// than micro-batch tokens.
func cpuComputeBytes(c graph.Context, rules builds.Rules, build graph.Builder) int64 {
	record := func(n int) *ggml.Graph { return build(c, n, graph.Placement{CPU: "CPU", Rules: rules}) }
	pp := ggml.Reserve(record(c.NUBatch), cpuAlign)
	if c.NSeq <= c.NUBatch {
		return pp
	}
	return max(pp, ggml.Reserve(record(c.NSeq), cpuAlign))
}

// cpuAlign is TENSOR_ALIGNMENT, the CPU buffer type's alignment.
const cpuAlign = 32

// computeBuffers estimates the scheduler's compute buffers. llama.cpp
// sizes them by allocating the worst-case graph (a full micro-batch
// against a full cache) with ggml-alloc, which reuses memory as tensors
// die; the peak is dominated by the attention scores (without flash
// attention), the micro-batch's activations, and the logits.
func computeBuffers(m *arch.Model, c graph.Context, p Profile, cpu Device, gpus []Device, layerDev []string) []Buffer {
	return computeBuffersWith(graph.For(m), m, c, p, cpu, gpus, layerDev, nil, nil)
}

// computeBuffersWith is computeBuffers with the model's graph builder
// already chosen (choosing it checks every tensor of the model, which a
// search need not repeat for each profile) and, unless nil, the weights'
// homes (weightHomes) for this placement, and an arena for the graphs
// (nil for a fresh one).
func computeBuffersWith(build graph.Builder, m *arch.Model, c graph.Context, p Profile, cpu Device, gpus []Device, layerDev []string, homes map[string]graph.Home, mem *ggml.Arena) []Buffer {
	T := int64(c.NUBatch)
	f32 := int64(4)
	nKV := int64(c.NCtxSeq)
	maxFF := int64(0)
	heads := int64(m.NHead)
	for _, l := range m.Layers {
		maxFF = max(maxFF, int64(l.FF))
	}
	if m.NExpertUsed > 0 && m.NFFExpert > 0 {
		maxFF = max(maxFF, int64(m.NExpertUsed*m.NFFExpert))
	}
	embd := int64(m.NEmbd)
	// Attention: the KQ scores of one layer (softmax is done in place),
	// the mask, and the layer's input and projections.
	attn := embd * T * f32 * 4
	mask := nKV * T * f32
	if !c.Flash {
		attn += heads*nKV*T*f32 + mask
	} else {
		attn += mask / 2
	}
	ffn := (2*maxFF + 2*embd) * T * f32
	logits := int64(m.NVocab)*T*f32 + embd*T*f32*2
	peak := max(attn, ffn, logits)

	if len(gpus) > 0 && build != nil {
		if homes == nil {
			homes = weightHomes(m, p, cpu, gpus, layerDev)
		}
		return splitComputeBuffers(m, c, p, cpu, gpus, layerDev, homes, mem, build)
	}
	if len(gpus) == 0 {
		if build != nil {
			return []Buffer{{Device: cpu.Name, BufferType: cpu.Name, Kind: KindCompute, Bytes: cpuComputeBytes(c, p.rules(), build), Note: replayNote}}
		}
		return []Buffer{{Device: cpu.Name, BufferType: cpu.Name, Kind: KindCompute, Bytes: peak, Note: computeNote}}
	}
	var out []Buffer
	used := map[string]bool{}
	for _, d := range layerDev {
		used[d] = true
	}
	// The output projection runs where its weight lives, which is the CPU
	// when the output layer stays there or the weight is too large for
	// the device.
	outHome := weightHomes(m, p, cpu, gpus, layerDev)["output.weight"].Device
	if outHome == "" {
		outHome = layerDev[m.NLayer]
	}
	used[outHome] = true
	// With layers in host memory and a batch of 32 or more, the scheduler
	// offloads their matrix multiplications to the first GPU, which then
	// needs a compute buffer even with no layer of its own.
	if g := offloadGPU(gpus); g != nil && used[cpu.Name] && c.NUBatch >= 32 {
		used[g.Name] = true
	}
	for _, g := range gpus {
		if used[g.Name] {
			out = append(out, Buffer{Device: g.Name, BufferType: g.bufferType(), Kind: KindCompute, Bytes: peak, Note: computeNote})
		}
	}
	host := cpu.Name
	if h := hostGPU(gpus); h != nil {
		host = h.HostBuffer()
	}
	hostBytes := embd*T*f32 + mask
	if used[cpu.Name] {
		hostBytes = peak
	}
	out = append(out, Buffer{Device: cpu.Name, BufferType: host, Kind: KindCompute, Bytes: hostBytes, Note: computeNote})
	return out
}

// splitComputeBuffers lists the compute buffers of a CPU and GPU split from
// the scheduler replay: one per GPU that runs anything, and the host's.
func splitComputeBuffers(m *arch.Model, c graph.Context, p Profile, cpu Device, gpus []Device, layerDev []string, homes map[string]graph.Home, mem *ggml.Arena, build graph.Builder) []Buffer {
	peak := splitComputeBytes(m, c, p, cpu, gpus, layerDev, homes, mem, build)
	var out []Buffer
	for _, g := range gpus {
		if n, ok := peak[g.Name]; ok {
			out = append(out, Buffer{Device: g.Name, BufferType: g.bufferType(), Kind: KindCompute, Bytes: n, Note: schedNote})
		}
	}
	host := cpu.Name
	if h := hostGPU(gpus); h != nil {
		host = h.HostBuffer()
	}
	out = append(out, Buffer{Device: cpu.Name, BufferType: host, Kind: KindCompute, Bytes: peak[cpu.Name], Note: schedNote})
	return out
}

// schedNote marks compute buffers of a device split. The scheduler model
// (backend assignment, op offload with weight copies, per-split input
// copies) matches llama.cpp exactly in many measured Vulkan cases but not
// all, so it is an estimate, not an exact replay.
const schedNote = "estimate from a model of ggml's scheduler and allocator on llama.cpp's graph split over devices (docs/accuracy.md has the measured error)"
