package plan

import (
	"strconv"
	"sync"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/plan/ggml"
	"github.com/headroom-llm/headroom/plan/graph"
)

// Companions are the models llama-server loads beside the main one: a
// multimodal projector (--mmproj) and a speculative-decoding draft (-md).
// Their buffers are auxiliary charges in every assessment and in every
// candidate a search weighs, as llama.cpp's fit adds them to its margins.
type Companions struct {
	// Projector is the --mmproj file's encoder, ProjectorName the file as
	// given.
	Projector     *arch.Projector `json:"-"`
	ProjectorName string          `json:"projector,omitempty"`
	// ProjectorOnCPU is --no-mmproj-offload: the projector stays in
	// system memory and runs on the CPU.
	ProjectorOnCPU bool `json:"projector_on_cpu,omitempty"`
	// ImageMinTokens and ImageMaxTokens are --image-min-tokens and
	// --image-max-tokens (0: not given), passed on to llama-server; taken
	// only for projectors whose warm-up they leave as it is
	// (arch.ImageTokensKeepWarmup).
	ImageMinTokens int `json:"image_min_tokens,omitempty"`
	ImageMaxTokens int `json:"image_max_tokens,omitempty"`
	// Draft is the -md model, DraftName the file as given.
	Draft     *arch.Model `json:"-"`
	DraftName string      `json:"draft,omitempty"`
	// DraftGPULayers is -ngld; GPULayersAuto (llama-server's default)
	// offloads all of it.
	DraftGPULayers int `json:"draft_gpu_layers,omitempty"`

	// The draft's buffers depend on a few settings of the main profile
	// only; a search asks about the same ones many times.
	mu    sync.Mutex
	draft map[draftKey][]Buffer
	// proj is the projector's replayed compute buffers: nil where it is
	// not replayed.
	proj map[projKey][]Buffer
}

// Companion names in Buffer.Model.
const (
	ModelProjector = "projector"
	ModelDraft     = "draft"
)

// Flags are the llama-server flags that load the companions.
func (c *Companions) Flags() []string {
	if c == nil {
		return nil
	}
	var out []string
	if c.Projector != nil {
		out = append(out, "--mmproj", c.ProjectorName)
		if c.ProjectorOnCPU {
			out = append(out, "--no-mmproj-offload")
		}
		if c.ImageMinTokens > 0 {
			out = append(out, "--image-min-tokens", strconv.Itoa(c.ImageMinTokens))
		}
		if c.ImageMaxTokens > 0 {
			out = append(out, "--image-max-tokens", strconv.Itoa(c.ImageMaxTokens))
		}
	}
	if c.Draft != nil {
		out = append(out, "-md", c.DraftName)
		if c.DraftGPULayers != GPULayersAuto {
			out = append(out, "-ngld", strconv.Itoa(c.DraftGPULayers))
		}
	}
	return out
}

// buffers lists the companions' buffers for a main context ctx of profile p.
func (c *Companions) buffers(ctx graph.Context, p Profile, cpu Device, gpus []Device) ([]Buffer, error) {
	if c == nil {
		return nil, nil
	}
	var out []Buffer
	if c.Projector != nil {
		out = append(out, c.projectorBuffers(ctx, p.FlashAttn, p.rules(), cpu, gpus)...)
	}
	if c.Draft != nil {
		d, err := c.draftBuffers(ctx, p, cpu, gpus)
		if err != nil {
			return nil, err
		}
		out = append(out, d...)
	}
	return out, nil
}

// projectorNote says how far the projector's compute figures go where
// they are not replayed.
const projectorNote = "rough estimate of the encoder's compute buffer at its warm-up image (clip.vision.image_size, or the fixed token count of dynamic-resolution types): the feed-forward activations, the residual stream with Q, K and V, and without flash attention the attention scores; not a graph replay"

// projectorReplayNote marks a projector compute buffer from the replay of
// clip's encoder graph (plan/graph.ProjectorGraph): measured exact on the
// CPU for Gemma 3's, Pixtral's, Qwen2-VL's and Qwen2.5-VL's
// (plan/testdata/projector.json).
const projectorReplayNote = "replay of ggml's allocator on clip's encoder graph at its warm-up image, as libmtmd reserves it on the CPU"

// projectorBuffers is what libmtmd allocates for the projector: every
// weight in the buffer of the first GPU (or the CPU with
// --no-mmproj-offload), the encoder's compute buffer there, and a host
// compute buffer holding the graph's inputs, of which the image's
// pixels in f32 are nearly all. The encoder's graph is replayed where
// headroom has it (on the CPU Gemma 3's, Pixtral's, Qwen2-VL's and
// Qwen2.5-VL's; on Vulkan Gemma 3's); elsewhere its compute buffer is
// estimated.
func (c *Companions) projectorBuffers(ctx graph.Context, fa FlashAttn, rules builds.Rules, cpu Device, gpus []Device) []Buffer {
	dev := cpu
	if !c.ProjectorOnCPU {
		if g := offloadGPU(gpus); g != nil {
			dev = *g
		}
	}
	buft := dev.bufferType()
	var weights int64
	for _, t := range c.Projector.Tensors {
		weights += alignUp(deviceBytes(dev, arch.Tensor{Tensor: t}), dev.alignment())
	}
	out := []Buffer{{Device: dev.Name, BufferType: buft, Kind: KindModel, Model: ModelProjector, Bytes: weights}}
	if v := c.Projector.Vision; v != nil {
		// clip takes -fa from llama-server but resolves auto on its own:
		// on wherever the backend runs the encoder's attention, which
		// the CPU always does (clip_model_loader::warmup).
		bufs, replayed := c.projectorCompute(fa != FlashOff, rules, cpu, dev)
		out = append(out, bufs...)
		if !replayed {
			out = append(out, projectorEstimate(*v, ctx.Flash, dev, cpu)...)
		}
	}
	if c.Projector.Audio {
		out = append(out, Buffer{Device: dev.Name, BufferType: buft, Kind: KindCompute, Model: ModelProjector,
			Note: "the audio encoder's compute buffer is not modelled: not counted"})
	}
	return out
}

// projectorEstimate is the rough estimate of the encoder's compute
// buffers on dev (projectorNote), and on the host the image's pixels
// the graph reads from there when dev is a GPU.
func projectorEstimate(v arch.VisionEncoder, flash bool, dev, cpu Device) []Buffer {
	n := int64(v.Patches())
	act := n * int64(v.Embd) * 4
	compute := n*int64(v.FF)*4 + 3*act
	if !flash {
		compute += n * n * int64(v.Heads) * 4
	}
	out := []Buffer{{Device: dev.Name, BufferType: dev.bufferType(), Kind: KindCompute, Model: ModelProjector, Bytes: compute, Note: projectorNote}}
	if dev.Name != cpu.Name {
		pixels := int64(v.Warmup()) * int64(v.Warmup()) * 3 * 4
		out = append(out, Buffer{Device: cpu.Name, BufferType: cpu.Name, Kind: KindCompute, Model: ModelProjector, Bytes: pixels, Note: projectorNote})
	}
	return out
}

// vulkanProjectorReplay are the projector types whose encoder graph is
// replayed on Vulkan as clip's scheduler splits it: measured on llvmpipe
// (plan/testdata/projector.json). Pixtral's is not: the backend's
// reorder lowers its peak with flash attention where the model of it
// does not (vulkan_not_replayed there). Nor is Qwen's: llvmpipe refuses
// its masked flash attention and binds none of its largest tensors, and
// the scheduler model does not know which ops Vulkan takes.
var vulkanProjectorReplay = map[string]bool{arch.ProjectorGemma3: true}

// projectorVulkanNote marks the projector's compute buffers from the
// replay of clip's scheduler on a Vulkan device and the host.
const projectorVulkanNote = "replay of ggml's scheduler and allocator on clip's encoder graph at its warm-up image, its weights on the GPU and its inputs on the host, as libmtmd reserves it (measured on Vulkan over Mesa llvmpipe)"

// projectorCompute is the compute buffers clip reserves for the
// encoder with its weights on dev, from a replay of its graph, and
// whether headroom replays this projector there. A search asks for them
// with every candidate, so each replay is kept.
func (c *Companions) projectorCompute(flash bool, rules builds.Rules, cpu, dev Device) ([]Buffer, bool) {
	key := projKey{flash, cpu.Name, dev.Name}
	c.mu.Lock()
	cached, ok := c.proj[key]
	c.mu.Unlock()
	if ok {
		return cached, cached != nil
	}
	var out []Buffer
	switch {
	case dev.Name == cpu.Name:
		if g, ok := graph.ProjectorGraph(c.Projector, flash); ok {
			out = []Buffer{{Device: cpu.Name, BufferType: cpu.bufferType(), Kind: KindCompute, Model: ModelProjector,
				Bytes: ggml.Reserve(g, cpuAlign), Note: projectorReplayNote}}
		}
	case dev.Backend == "Vulkan" && vulkanProjectorReplay[c.Projector.Type]:
		out = c.projectorSched(flash, rules, cpu, dev)
	}
	c.mu.Lock()
	if c.proj == nil {
		c.proj = map[projKey][]Buffer{}
	}
	c.proj[key] = out
	c.mu.Unlock()
	return out, out != nil
}

// projKey is what a replay of the projector depends on besides the
// projector: flash attention and the devices.
type projKey struct {
	flash    bool
	cpu, dev string
}

// projectorSched replays clip's scheduler on a Vulkan device dev and the
// host for projectorCompute: dev's compute buffer and the host's (the
// graph's inputs, in the CPU backend's own buffer type); nil where the
// graph is not replayed.
func (c *Companions) projectorSched(flash bool, rules builds.Rules, cpu, dev Device) []Buffer {
	g, ok := graph.ProjectorGraphOn(c.Projector, flash, dev.Name)
	if !ok {
		return nil
	}
	// clip's scheduler: the GPU then the CPU, each with its default
	// buffer type, op offload on, no pipeline copies.
	o := ggml.Sched{CPU: cpu.Name, Mem: &ggml.Arena{}, Offload: true, OffloadTo: dev.Name, Copies: 1,
		MaxAlloc:     map[string]int64{dev.Name: dev.MaxAlloc},
		Optimize:     map[string]ggml.Optimizer{dev.Name: ggml.OptVulkan},
		NoBroadcast3: map[string]bool{dev.Name: true},
		Buffers: map[string]ggml.BufferType{cpu.Name: {Align: cpuAlign},
			dev.Name: {Align: dev.alignment(), MaxSize: dev.computeChunk()}},
		Rules: rules,
	}
	sizes := o.Measure(g)
	out := []Buffer{{Device: dev.Name, BufferType: dev.bufferType(), Kind: KindCompute, Model: ModelProjector, Bytes: sizes[dev.Name], Note: projectorVulkanNote}}
	if n := sizes[cpu.Name]; n > 0 {
		out = append(out, Buffer{Device: cpu.Name, BufferType: cpu.Name, Kind: KindCompute, Model: ModelProjector, Bytes: n, Note: projectorVulkanNote})
	}
	return out
}

// draftKey is what the draft's buffers depend on in the main profile.
type draftKey struct {
	ctx, batch, ubatch, slots int
	unified                   bool
	flash                     FlashAttn
	mmap, noKVOffload         bool
	cacheK, cacheV            string
}

// draftBuffers is the draft as llama-server runs it
// (common_speculative_init_result): its weights once, and one context
// beside the target's with the target's cells (n_ctx, all sequences),
// sequences, batches, flash attention and mmap settings, the draft's own
// cache types (-ctkd, -ctvd: f16 by default), one output row per
// sequence and no recurrent snapshots.
func (c *Companions) draftBuffers(ctx graph.Context, p Profile, cpu Device, gpus []Device) ([]Buffer, error) {
	slots := max(p.Parallel, 1)
	k, v := p.Spec.cacheTypes()
	key := draftKey{ctx.NCtx, p.Batch, p.UBatch, slots, p.KVUnified, p.FlashAttn, p.Mmap, p.NoKVOffload, k, v}
	c.mu.Lock()
	cached, ok := c.draft[key]
	c.mu.Unlock()
	if ok {
		return cached, nil
	}
	dp := Defaults()
	dp.Ctx, dp.Parallel, dp.KVUnified, dp.GPULayers = ctx.NCtx, slots, p.KVUnified, c.DraftGPULayers
	dp.Batch, dp.UBatch, dp.FlashAttn, dp.Mmap, dp.NoKVOffload = p.Batch, p.UBatch, p.FlashAttn, p.Mmap, p.NoKVOffload
	dp.CacheK, dp.CacheV, dp.OutputsMax, dp.Rules = k, v, slots, p.Rules
	r, err := Account(c.Draft, dp, cpu, gpus)
	if err != nil {
		return nil, err
	}
	var out []Buffer
	for _, b := range r.Buffers {
		b.Model = ModelDraft
		out = append(out, b)
	}
	c.mu.Lock()
	if c.draft == nil {
		c.draft = map[draftKey][]Buffer{}
	}
	c.draft[key] = out
	c.mu.Unlock()
	return out, nil
}
