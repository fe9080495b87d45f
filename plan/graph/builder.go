package graph

import (
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// tensor is a tensor of a graph description.
type tensor = ggml.Tensor

// gb records the graph of one model for one placement: ggml's context,
// and where the model's weights and caches live.
type gb struct {
	ggml.Ctx
	cpu   string
	homes map[string]Home // weights by GGUF name
	kvDev []string        // each layer's KV cache device
	// layerDev is where each layer runs, and ropeFreqs the RoPE factor
	// copies made so far (ropeFactors).
	layerDev  []string
	ropeFreqs []*tensor
	// pinNorms: the graph callback pins each layer's norms to the
	// layer's device (cbNorm).
	pinNorms bool
	// rules are the llama.cpp build's, where its graphs differ.
	rules   builds.Rules
	weights map[string]*tensor // by name, see weight
	// shapes are the model's tensor shapes by name, for has and weight;
	// For indexes them once for every graph of the model.
	shapes map[string][]uint64
	// embd is the graph's embedding (t_embd: the final norm, or an
	// encoder's last layer), which an embedding context pools.
	embd *tensor
}

// newGB is the recorder of one graph with p's placement, over the
// model's tensor shapes.
func newGB(p Placement, shapes map[string][]uint64) *gb {
	b := &gb{cpu: p.CPU, homes: p.Homes, kvDev: p.KVDevices, layerDev: p.LayerDevices, pinNorms: p.PinNorms,
		rules: p.Rules, shapes: shapes}
	if p.Arena != nil {
		b.Ctx = ggml.NewCtx(p.Arena)
	}
	return b
}

// tensorShapes maps the model's tensor names to their shapes.
func tensorShapes(m *arch.Model) map[string][]uint64 {
	out := make(map[string][]uint64, len(m.Tensors))
	for _, t := range m.Tensors {
		out[t.Name] = t.Shape
	}
	return out
}

// blkName is the prefix of layer il's tensor names.
func blkName(il int) string { return "blk." + strconv.Itoa(il) + "." }

// has reports whether the model has a tensor of that name.
func (b *gb) has(name string) bool {
	_, ok := b.shapes[name]
	return ok
}

// weight is a model weight, with its shape in the file (ne where the file
// has no such tensor: an output tied to the token embedding). Its home is
// where the accountant placed it, when the graph is replayed for a device
// split.
func (b *gb) weight(name string, ne ...int64) *tensor {
	// One tensor per weight, however many ops read it (Falcon-H1 norms
	// its input twice with attn_norm): the scheduler copies a tensor to a
	// backend once, and a second copy would be a split input of its own.
	if w := b.weights[name]; w != nil {
		return w
	}
	if b.weights == nil {
		b.weights = make(map[string]*tensor, len(b.shapes))
	}
	if s, ok := b.shapes[name]; ok {
		ne = ne[:0:0]
		for _, d := range s {
			ne = append(ne, int64(d))
		}
	}
	w := b.newWeight(name, ne)
	b.weights[name] = w
	return w
}

// newWeight is weight without the sharing: a tensor of its own.
func (b *gb) newWeight(name string, ne []int64) *tensor {
	if h, ok := b.homes[name]; ok {
		return b.External(name, gguf.TypeF32, h.Device, ne...).SetWeight(h.Bytes)
	}
	return b.External(name, gguf.TypeF32, b.cpu, ne...)
}

// ropeFactors is layer il's RoPE frequency factors (rope_freqs) for a
// model whose graph passes them to RoPE, or nil when it has none.
// llama.cpp creates the tensor for every layer but keeps one copy per
// buffer type (TENSOR_DUPLICATED): the layers in host memory share one,
// the layers on a GPU another.
func (b *gb) ropeFactors(il int) *tensor {
	const name = "rope_freqs.weight"
	shape, ok := b.shapes[name]
	if !ok || len(shape) != 1 {
		return nil
	}
	dev := b.cpu
	if il < len(b.layerDev) {
		dev = b.layerDev[il]
	}
	for _, t := range b.ropeFreqs {
		if t.Home() == dev {
			return t
		}
	}
	ne := []int64{int64(shape[0])}
	var t *tensor
	if h, ok := b.homes[name]; ok {
		t = b.External(name, gguf.TypeF32, dev, ne...).SetWeight(h.Bytes)
	} else {
		t = b.External(name, gguf.TypeF32, dev, ne...)
	}
	b.ropeFreqs = append(b.ropeFreqs, t)
	return t
}

// ropeFactorsAny is the first RoPE factor table the model has (phi3's
// short and long ones), shared by every layer, or nil.
func (b *gb) ropeFactorsAny() *tensor {
	for _, n := range []string{"rope_factors_short.weight", "rope_factors_long.weight", "rope_freqs.weight"} {
		if b.has(n) {
			return b.weight(n, 1)
		}
	}
	return nil
}

// cache is a layer's cache tensor (K, V or recurrent state), on the
// layer's KV device.
func (b *gb) cache(il int, name string, t gguf.GGMLType, ne ...int64) *tensor {
	dev := b.cpu
	if il < len(b.kvDev) {
		dev = b.kvDev[il]
	}
	return b.External(name, t, dev, ne...)
}

// reserveTokens is the reserve graph's token count, which
// llama_context::graph_reserve rounds up to a multiple of the sequences
// (each gets as many tokens), and its output rows, which it does not:
// min(n_tokens, n_outputs_max).
func reserveTokens(c Context, nTokens int) (T, nOut int64) {
	nSeq := int64(max(c.NSeq, 1))
	return (int64(nTokens) + nSeq - 1) / nSeq * nSeq, c.outputRows(int64(nTokens))
}

// maxVDim is the widest layer's V row.
func maxVDim(m *arch.Model) int {
	n := 0
	for _, l := range m.Layers {
		n = max(n, l.VDim)
	}
	return n
}

// uniformHeads is the K and V head size of the layers keep selects when
// they all share them, else 0: llama.cpp rotates a quantized cache only
// then.
func uniformHeads(m *arch.Model, keep func(arch.Layer) bool) (k, v int64) {
	k, v = -1, -1
	for _, l := range m.Layers {
		if !keep(l) {
			continue
		}
		hk, hv := int64(l.KDim/max(l.HeadsKV, 1)), int64(l.VDim/max(l.HeadsKV, 1))
		if k == -1 {
			k, v = hk, hv
		}
		if hk != k {
			k = 0
		}
		if hv != v {
			v = 0
		}
	}
	return max(k, 0), max(v, 0)
}

// cbNorm is what llama.cpp's graph callback (llama_context's
// graph_get_cb) does to the "norm" tensor build_norm names (the norm of a
// build_norm with a weight, before the weight's mul) of layer il when the
// whole model is offloaded or the batch has fewer than 32 tokens
// (b.pinNorms): it sets the norm's backend to the layer's device
// (ggml_backend_sched_set_tensor_backend) before the scheduler runs, so a
// layer's first norm is not left on the previous layer's device by the
// scheduler's expansion. Across two devices that decides what crosses the
// boundary: the layer's input alone (l_out of the last layer before it),
// not the input and its norm. The layer of a norm is that of its weight
// (blk.N.*_norm.weight); the output norm, read with output_norm.weight,
// belongs to no layer and is left alone, as llama.cpp names it with
// il = -1.
func (b *gb) cbNorm(norm *tensor, weight string) {
	if !b.pinNorms {
		return
	}
	if il, ok := layerOf(weight); ok && il < len(b.layerDev) {
		norm.SetBackend(b.layerDev[il])
	}
}

// layerOf reads N from a weight named blk.N.*.
func layerOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	i := strings.IndexByte(rest, '.')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(rest[:i])
	return n, err == nil
}
