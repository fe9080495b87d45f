package plan

import (
	"strconv"
	"sync"

	"github.com/headroom-llm/headroom/arch"
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
	// projCPU is the replayed CPU compute buffer of the projector, by
	// whether clip runs it with flash attention (-1: not replayed).
	projCPU map[bool]int64
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
		out = append(out, c.projectorBuffers(ctx, p.FlashAttn, cpu, gpus)...)
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
// pixels in f32 are nearly all. On the CPU the encoder's graph is
// replayed where headroom has it (Gemma 3's, Pixtral's, Qwen2-VL's and
// Qwen2.5-VL's); elsewhere, and on a GPU, its compute buffer is
// estimated.
func (c *Companions) projectorBuffers(ctx graph.Context, fa FlashAttn, cpu Device, gpus []Device) []Buffer {
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
		replayed := false
		if dev.Name == cpu.Name {
			var n int64
			if n, replayed = c.projectorCPUCompute(fa != FlashOff); replayed {
				out = append(out, Buffer{Device: dev.Name, BufferType: buft, Kind: KindCompute, Model: ModelProjector, Bytes: n, Note: projectorReplayNote})
			}
		}
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

// projectorCPUCompute is the CPU compute buffer clip reserves for the
// projector's encoder, from a replay of its graph, and whether headroom
// replays this projector. A search asks for it with every candidate,
// so each replay is kept.
func (c *Companions) projectorCPUCompute(flash bool) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.projCPU[flash]; ok {
		return n, n >= 0
	}
	n := int64(-1)
	if g, ok := graph.ProjectorGraph(c.Projector, flash); ok {
		n = ggml.Reserve(g, cpuAlign)
	}
	if c.projCPU == nil {
		c.projCPU = map[bool]int64{}
	}
	c.projCPU[flash] = n
	return n, n >= 0
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
