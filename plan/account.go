package plan

import (
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/graph"
)

// BufferKind is what a buffer holds, by the contract's names.
type BufferKind string

// The kinds of buffer llama.cpp allocates.
const (
	KindModel   BufferKind = "model"   // weights
	KindKV      BufferKind = "kv"      // the KV cache
	KindRS      BufferKind = "rs"      // recurrent state
	KindCompute BufferKind = "compute" // the scheduler's compute buffers
	KindOutput  BufferKind = "output"  // the logits
	// KindStaging is a buffer held only while the model loads (the read
	// buffer of a load without mmap), never beside the compute buffers.
	KindStaging BufferKind = "staging"
)

// Buffer is one allocation llama.cpp makes, named as its log names it.
type Buffer struct {
	Device     string     `json:"device"`
	BufferType string     `json:"buffer_type"`
	Kind       BufferKind `json:"kind"`
	// Model is "" for the main model's buffers, else the companion that
	// owns it: ModelProjector or ModelDraft.
	Model string `json:"model,omitempty"`
	Bytes int64  `json:"bytes"`
	// Largest is the largest single tensor in the buffer, where a device
	// may refuse one that size (set for KV caches: a layer's K or V
	// tensor, which a device with a binding limit cannot run an op on).
	Largest int64 `json:"largest_tensor_bytes,omitempty"`
	// Resident, where set, is how much of a buffer mapped from the file
	// stays in memory once the load is done (CPU_Mapped: the tensors used
	// in place; under --mlock every page from the file's start to the end
	// of the span, which can be more than Bytes); 0 means all of Bytes.
	// See Buffer.ResidentBytes.
	Resident int64 `json:"resident_bytes,omitempty"`
	// Note says how the figure was obtained when it is an estimate, or
	// what of a mapped buffer stays resident.
	Note string `json:"note,omitempty"`
}

// ResidentBytes is what the buffer keeps in memory after the load, which
// is what a memory domain is charged with. A buffer llama.cpp allocates
// is resident whole. The CPU's mapped buffer spans the file from its
// first to its last tensor used in place, but only those tensors' pages
// are read again once loaded: the pages of weights that were repacked or
// copied to a GPU, which lie between them, are read once at load and are
// clean file pages the kernel reclaims (a 17.28 GiB Qwen3-30B-A3B Q4_K_M
// mapped 17691 MiB and repacked 13432 MiB of it, and llama-server ran it
// with 17.8 GB resident, 3.6 GB of it file-backed). Metal's mapped
// buffer is wired whole, so it carries no Resident.
func (b Buffer) ResidentBytes() int64 {
	if b.Resident > 0 {
		return b.Resident
	}
	return b.Bytes
}

// Result is the accountant's answer for one profile.
type Result struct {
	Context graph.Context `json:"-"`
	Buffers []Buffer      `json:"buffers"`
	// LayerDevice is where each block (and, last, the output layer) runs.
	LayerDevice []string `json:"layer_device"`
	// CPUMoE is the profile's --n-cpu-moe: the routed experts of the first
	// CPUMoE layers live in system memory, wherever their layer runs.
	CPUMoE int `json:"cpu_moe_layers,omitempty"`
	// LoadStaging is memory the load needs beside every buffer and gives
	// back once loaded: without mmap, llama.cpp reads each weight bound
	// for a buffer the CPU cannot write directly (CPU_REPACK) into a
	// read buffer of that weight's size, one at a time
	// (llama_model_loader::load_all_data), so the largest such weight.
	LoadStaging *Buffer `json:"load_staging,omitempty"`
	// Serving is what llama-server holds past the load, in host memory:
	// the prompt cache at its bound, the slots' checkpoints and the
	// process beyond its buffers. llama.cpp logs none of it.
	Serving []Buffer `json:"serving,omitempty"`
}

// Account places the model on the CPU and GPUs and lists every buffer.
func Account(m *arch.Model, p Profile, cpu Device, gpus []Device) (*Result, error) {
	p = p.withRules()
	r, err := Place(m, p, cpu, gpus)
	if err != nil {
		return nil, err
	}
	r.Buffers = append(r.Buffers, computeBuffers(m, r.Context, p, cpu, gpus, r.LayerDevice)...)
	return r, nil
}

// Place is Account without compute buffers: layer placement, weights,
// caches and the output buffer. It is for estimates that need where
// things live but not the graph replay (speed, ranking many candidates).
func Place(m *arch.Model, p Profile, cpu Device, gpus []Device) (*Result, error) {
	p = p.withRules()
	mp, err := placeModel(m, p, cpu, gpus)
	if err != nil {
		return nil, err
	}
	return placeWith(m, p, cpu, gpus, mp)
}

// modelPlacement is the part of a placement that does not depend on the
// context: where each layer runs and the model buffers.
type modelPlacement struct {
	layerDev []string
	weights  []Buffer
	// homes is each weight's device for graph replays, filled in by the
	// first replay of the placement (most placements a search weighs are
	// never replayed).
	homes map[string]graph.Home
	// staging is Result.LoadStaging.
	staging *Buffer
}

func placeModel(m *arch.Model, p Profile, cpu Device, gpus []Device) (modelPlacement, error) {
	if err := checkOverrides(p.Overrides, cpu, gpus); err != nil {
		return modelPlacement{}, err
	}
	if err := CheckSpeculative(m, p); err != nil {
		return modelPlacement{}, err
	}
	layerDev := placeLayers(m.NLayer, p.GPULayers, p.TensorSplit, gpus, cpu.Name)
	return modelPlacement{layerDev: layerDev, weights: weights(m, p, cpu, gpus, layerDev),
		staging: loadStaging(m, p, cpu, gpus, layerDev)}, nil
}

// placeWith is Place with the model already placed (mp must come from
// placeModel for p, whatever p's context).
func placeWith(m *arch.Model, p Profile, cpu Device, gpus []Device, mp modelPlacement) (*Result, error) {
	ctx, err := resolveContext(p, m, func(k, v gguf.GGMLType) bool { return flashAuto(m, k, v, gpus, mp.layerDev) })
	if err != nil {
		return nil, err
	}
	r := &Result{Context: ctx, CPUMoE: p.CPUMoE, LayerDevice: mp.layerDev, LoadStaging: mp.staging}
	r.Buffers = append(r.Buffers, mp.weights...)
	r.Buffers = append(r.Buffers, kvBuffers(m, ctx, p, cpu, gpus, r.LayerDevice)...)
	r.Buffers = append(r.Buffers, rsBuffers(m, ctx, p, cpu, gpus, r.LayerDevice)...)
	r.Buffers = append(r.Buffers, outputBuffer(m, ctx, p.rules(), cpu, gpus, r.LayerDevice))
	extra, err := p.Companions.buffers(ctx, p, cpu, gpus)
	if err != nil {
		return nil, fmt.Errorf("companion: %w", err)
	}
	r.Buffers = append(r.Buffers, extra...)
	r.Buffers = append(r.Buffers, mtpBuffers(m, ctx, p, cpu, gpus, r.LayerDevice)...)
	r.Serving = servingBuffers(m, ctx, p, cpu)
	return r, nil
}

// bufKey identifies one model buffer: a buffer type on a device.
type bufKey struct{ device, buft string }

// weights decides every tensor's buffer type and totals the model buffers.
func weights(m *arch.Model, p Profile, cpu Device, gpus []Device, layerDev []string) []Buffer {
	return weightsInto(m, p, cpu, gpus, layerDev, nil)
}

// weightsInto is weights that also records, unless homes is nil, where
// each weight lives by GGUF name (weightHomes): one pass of the loader's
// decisions for both.
func weightsInto(m *arch.Model, p Profile, cpu Device, gpus []Device, layerDev []string, homes map[string]graph.Home) []Buffer {
	ld := newLoader(m, p, cpu, gpus, layerDev)
	var tl modelTally
	place := func(t arch.Tensor, k bufKey) {
		d := ld.byName[k.device]
		switch {
		case k.buft == mappedCPU:
			tl.mapped(t, cpu.Name, mappedCPU)
		case k.device == cpu.Name:
			tl.add(k, alignUp(int64(t.Size), 32))
		case p.Mmap && d.Backend == "Metal" && k.buft == d.bufferType():
			// Metal wraps the mapped file in a device buffer
			// (buffer_from_host_ptr) instead of copying the weights: the
			// span between its first and last tensor is what it maps, and
			// it keeps all of it resident.
			tl.mapped(t, d.Name, d.bufferType()+"_Mapped")
		default:
			tl.add(k, alignUp(deviceBytes(d, t), d.alignment()))
		}
	}
	for _, t := range m.Tensors {
		k := ld.buffer(t)
		if homes != nil {
			homes[t.Name] = graph.Home{Device: k.device, Bytes: int64(t.Size)}
			if t.Name == "token_embd.weight" && m.TiedOutput {
				_, dk := ld.tiedOutput(t)
				homes["output.weight"] = graph.Home{Device: dk.device, Bytes: int64(t.Size)}
			}
		}
		if !p.loads(t) {
			// Never created by llama.cpp's loader, so in no buffer and
			// outside the mapped span (llama-model-loader.cpp skips
			// TENSOR_SKIP tensors before assigning a buffer type).
			continue
		}
		place(t, k)
		if t.Layer == arch.InputLayer && m.TiedOutput && strings.HasPrefix(t.Name, "token_embd.weight") {
			// The output projection reuses the embedding. llama.cpp creates
			// it again (TENSOR_DUPLICATED) only when the output layer's
			// buffer type differs from the embedding's, and then loads the
			// weights a second time.
			// A loader that creates the output first finds nothing to
			// reuse: without mmap the weights are loaded twice even into
			// one buffer (Gemma 3n: 5107.10 MiB logged for its 4562.56
			// MiB of tensors).
			if dup, dk := ld.tiedOutput(t); !sameBuffer(dk, k) || m.OutputFirst && !p.Mmap {
				place(dup, dk)
			}
		}
	}
	return tl.buffers(cpu.Name, hostGPU(gpus), p.rules().MetalMappedSpan, p.Mlock)
}

// MetalPage is the page size on Apple silicon (sysconf(_SC_PAGESIZE)), to
// which Metal aligns the start of a buffer over the mapped file.
const MetalPage = 16 << 10

// loader decides which buffer each weight goes into, as llama.cpp's
// model loader does; the model buffers and the scheduler's weight homes
// both ask it.
type loader struct {
	m        *arch.Model
	p        Profile
	cpu      Device
	gpus     []Device
	layerDev []string
	byName   map[string]Device
}

func newLoader(m *arch.Model, p Profile, cpu Device, gpus []Device, layerDev []string) loader {
	byName := map[string]Device{cpu.Name: cpu}
	for _, g := range gpus {
		byName[g.Name] = g
	}
	return loader{m: m, p: p, cpu: cpu, gpus: gpus, layerDev: layerDev, byName: byName}
}

// buffer is where weight t is loaded: the buffer type of the first -ot
// override that matches its name, else system memory for a routed expert
// that --n-cpu-moe keeps there, else the first buffer type of its layer's
// device that takes it (tensors of no layer go to the CPU).
func (l loader) buffer(t arch.Tensor) bufKey {
	for _, o := range l.p.Overrides {
		if o.Matches(t.Name) {
			return l.overridden(t, o.Buft)
		}
	}
	if l.p.expertsOnCPU(t) {
		return l.overridden(t, l.cpu.Name)
	}
	dev := l.cpu.Name
	if t.Layer >= 0 && t.Layer <= l.m.NLayer {
		dev = l.layerDev[t.Layer]
	}
	return chooseBuffer(t, l.byName[dev], l.cpu, l.gpus, l.p.Mmap)
}

// overridden is where an override to buffer type buft puts t. A GPU's
// buffer type is taken as it is. The CPU's is judged like a weight of a
// layer on the CPU (since llama.cpp b6049, "when overriding to a CPU
// buffer, consider the extra buffer types"): the first GPU's pinned host
// buffer, which under mmap is the mapped file, else a repack buffer where
// the CPU repacks the weight, else plain CPU.
// Builds before b6049 (without Rules.OverrideCPUExtra) took the CPU's own buffer
// type: the mapped file under mmap, else plain CPU memory.
func (l loader) overridden(t arch.Tensor, buft string) bufKey {
	for _, g := range l.gpus {
		if g.bufferType() == buft {
			return bufKey{g.Name, buft}
		}
	}
	if !l.p.rules().OverrideCPUExtra {
		return bufKey{l.cpu.Name, cpuOwnBuffer(l.p.Mmap)}
	}
	return chooseBuffer(t, l.cpu, l.cpu, l.gpus, l.p.Mmap)
}

// tiedOutput is the output projection of a model that ties it to the
// token embedding emb, as the output layer would hold it, and its buffer.
func (l loader) tiedOutput(emb arch.Tensor) (arch.Tensor, bufKey) {
	dup := emb
	dup.Name, dup.Layer = "output.weight", l.m.NLayer
	return dup, l.buffer(dup)
}

// mappedCPU marks the CPU buffer type when weights stay in the mapped file.
const mappedCPU = "CPU_Mapped"

// cpuOwnBuffer is the CPU backend's own buffer type: the mapped file
// under mmap, else plain CPU memory.
func cpuOwnBuffer(mmap bool) string {
	if mmap {
		return mappedCPU
	}
	return "CPU"
}

// sameBuffer reports whether two choices land in the same llama.cpp
// buffer-type context: the mapped file and the plain CPU buffer type are one.
func sameBuffer(a, b bufKey) bool {
	norm := func(k bufKey) bufKey {
		if k.buft == mappedCPU {
			k.buft = "CPU"
		}
		return k
	}
	return norm(a) == norm(b)
}

// chooseBuffer walks llama.cpp's buffer-type list for a weight on a device
// (llama-model.cpp select_weight_buft): the device's own buffer type, then
// the CPU list: the first GPU's pinned host buffer, the CPU's extra
// (repack) buffer type, plain CPU. Each is taken if its device supports the
// weight's op; a GPU cannot run any op on a weight larger than it can bind
// (Vulkan's maxStorageBufferRange), and the host buffer is judged by the
// GPU it belongs to. Under mmap a host buffer is replaced by
// the mapped file ("avoid using a host buffer when using mmap").
func chooseBuffer(t arch.Tensor, d, cpu Device, gpus []Device, mmap bool) bufKey {
	fitsOn := func(g Device) bool {
		return g.MaxAlloc == 0 || int64(t.Size) <= g.MaxAlloc
	}
	cpuBuft := cpuOwnBuffer(mmap)
	if d.Backend != "CPU" && fitsOn(d) {
		return bufKey{d.Name, d.bufferType()}
	}
	if h := hostGPU(gpus); h != nil && fitsOn(*h) {
		if mmap {
			return bufKey{cpu.Name, cpuBuft}
		}
		return bufKey{cpu.Name, h.HostBuffer()}
	}
	if repackable(cpu, t) {
		return bufKey{cpu.Name, "CPU_REPACK"}
	}
	return bufKey{cpu.Name, cpuBuft}
}

func alignUp(x, a int64) int64 { return (x + a - 1) / a * a }

// deviceBytes is a tensor's size in a device buffer. CUDA pads quantized
// rows to a multiple of 512 elements so its kernels can read whole tiles.
func deviceBytes(d Device, t arch.Tensor) int64 {
	n := int64(t.Size)
	if (d.Backend == "CUDA" || d.Backend == "ROCm") && t.Shape[0]%512 != 0 {
		if info, _ := t.Type.Info(); info.Quantized {
			if extra, ok := t.Type.RowSize(512 - t.Shape[0]%512); ok {
				n += int64(extra)
			}
		}
	}
	return n
}

// repackable reports whether ggml's CPU backend keeps an interleaved copy
// of a weight (ggml-cpu/repack.cpp): matrix-multiplied weights of certain
// types whose row count divides the interleave, depending on the CPU.
func repackable(cpu Device, t arch.Tensor) bool {
	if !matmulWeight(t) {
		return false
	}
	rows := t.Shape[1]
	x86 := cpu.has("avx2")
	armDot := cpu.has("neon") && cpu.has("dotprod")
	armMM := cpu.has("neon") && cpu.has("i8mm")
	switch t.Type {
	case gguf.TypeQ4_0:
		return x86 && rows%8 == 0 || (armMM || armDot) && rows%4 == 0
	case gguf.TypeQ4_K:
		return (x86 || armMM || armDot) && rows%8 == 0
	case gguf.TypeIQ4_NL:
		return x86 && rows%8 == 0 || cpu.has("neon") && rows%4 == 0
	case gguf.TypeMXFP4:
		return x86 && rows%8 == 0 || armDot && rows%4 == 0
	case gguf.TypeQ2_K:
		return cpu.has("avx512") && rows%8 == 0
	case gguf.TypeQ8_0:
		return (armMM || armDot) && rows%4 == 0
	case gguf.TypeQ5_K, gguf.TypeQ6_K:
		return (armMM || armDot) && rows%8 == 0
	}
	return false
}

// matmulWeight reports whether a tensor is the left operand of a matrix
// multiplication: 2-D projection weights and 3-D expert stacks. The
// exceptions are looked up by name: embeddings are gathered (GET_ROWS),
// norms and biases are added or multiplied element-wise, convolution and
// SSM parameters feed their own ops.
func matmulWeight(t arch.Tensor) bool {
	if !strings.HasSuffix(t.Name, ".weight") || len(t.Shape) < 2 || t.Layer == arch.InputLayer {
		return false
	}
	if t.Expert {
		return len(t.Shape) == 3
	}
	if len(t.Shape) != 2 || t.Shape[1] == 1 {
		return false
	}
	name := strings.TrimSuffix(t.Name, ".weight")
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	switch {
	case name == "attn_q_b" || name == "attn_kv_b":
		// MLA's low-rank up-projections (DeepSeek V3's and Kimi K2's
		// query) are multiplied like any projection.
		return true
	case strings.HasSuffix(name, "_norm") || strings.HasSuffix(name, "_b"):
		return false
	}
	switch name {
	case "token_embd", "per_layer_token_embd", "pos_embd", "token_types", "rope_freqs",
		"conv", "conv1d", "ssm_conv1d", "ssm_a", "ssm_d", "ssm_dt", "attn_sinks":
		return false
	}
	return true
}

// Total returns the sum of the buffers on a device.
func (r *Result) Total(device string) int64 {
	var n int64
	for _, b := range r.Buffers {
		if b.Device == device {
			n += b.Bytes
		}
	}
	return n
}

func (r *Result) String() string {
	var b strings.Builder
	for _, x := range r.Buffers {
		fmt.Fprintf(&b, "%-8s %-12s %-8s %10.2f MiB\n", x.Device, x.BufferType, x.Kind, float64(x.Bytes)/(1<<20))
	}
	return b.String()
}
