package graph

import "github.com/headroom-llm/headroom/plan/ggml"

// This file is src/models/mamba.cpp for Mamba-2: every layer a Mamba-2
// mixer (build_mamba2_layer) on its normed input, and a residual.

func mamba2Graph(r *rsGraph, mix []mixer) *ggml.Graph {
	inpL := r.layers(mix, true, func(_ int, _ string, cur, resid *tensor) *tensor { return r.b.Add(cur, resid) })
	return r.output(inpL, "output_norm.weight", false)
}
