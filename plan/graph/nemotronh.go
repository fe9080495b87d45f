package graph

import "github.com/headroom-llm/headroom/plan/ggml"

// This file is src/models/nemotron-h.cpp: each layer one block (Mamba-2,
// attention without RoPE, or a squared-ReLU MLP) and a residual; every
// row goes to the final norm (embeddings_nextn_masked is false), and the
// outputs are selected after it.

func nemotronHGraph(r *rsGraph, mix []mixer) *ggml.Graph {
	r.attnInputs()
	inpL := r.layers(mix, false, func(_ int, _ string, cur, resid *tensor) *tensor { return r.b.Add(cur, resid) })
	return r.output(inpL, "output_norm.weight", true)
}
