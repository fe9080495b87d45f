package graph

import "github.com/headroom-llm/headroom/plan/ggml"

// This file is src/models/granite-hybrid.cpp: Mamba-2 or attention
// layers, each followed by a SwiGLU FFN. Granite ropes Q and K when
// rope_finetuned, which llama.cpp defaults to true for it
// (rope.scaling.finetuned absent).

func graniteHybridGraph(r *rsGraph, mix []mixer) *ggml.Graph {
	b := r.b
	r.attnInputs()
	r.rope = true
	inpL := r.layers(mix, true, func(_ int, blk string, cur, resid *tensor) *tensor {
		ffnInp := b.Add(cur, resid)
		return b.Add(b.ffn(blk, "", b.norm(ffnInp, blk+"ffn_norm.weight"), ffnSwiGLU), ffnInp)
	})
	return r.output(inpL, "output_norm.weight", false)
}
