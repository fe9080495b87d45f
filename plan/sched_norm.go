package plan

import (
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
)

// fullOffload is llama_context's full_offload: -ngl above the layer count,
// so the output layer is offloaded too.
func fullOffload(m *arch.Model, p Profile) bool {
	return p.GPULayers == GPULayersAuto || p.GPULayers > m.NLayer
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
