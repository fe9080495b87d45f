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

// pinLayerNorms does what llama.cpp's graph callback (llama_context's
// graph_get_cb) does to every "norm" tensor of layer il when the whole
// model is offloaded or the batch has fewer than 32 tokens: it sets the
// norm's backend to the layer's device before the scheduler runs, so a
// layer's first norm is not left on the previous layer's device by the
// scheduler's expansion. Across two devices that decides what crosses the
// boundary: the layer's input alone (l_out of the last layer before it),
// not the input and its norm. The layer of a norm is that of the weight its
// reader multiplies it by (blk.N.*_norm.weight); the output norm, read
// with output_norm.weight, belongs to no layer and is left alone, as
// llama.cpp names it with il = -1.
func pinLayerNorms(g *graph, layerDev []string, apply bool) {
	if !apply {
		return
	}
	for _, n := range g.nodes {
		var norm, weight *gtensor
		for _, s := range n.src {
			switch {
			case s.name == "norm" && s.op != opView:
				norm = s
			case s.isWeight:
				weight = s
			}
		}
		if norm == nil || weight == nil || norm.dev != "" {
			continue
		}
		if il, ok := layerOf(weight.name); ok && il < len(layerDev) {
			norm.dev = layerDev[il]
		}
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
