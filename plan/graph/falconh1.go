package graph

import "github.com/headroom-llm/headroom/plan/ggml"

// This file is src/models/falcon-h1.cpp: attention and a Mamba-2 mixer
// side by side in every layer, then a SwiGLU FFN. The last layer's output
// rows are taken after the residual.

func falconH1Graph(r *rsGraph, mix []mixer) *ggml.Graph {
	b := r.b
	r.attnInputs()
	r.rope = true
	inpL := r.layers(mix, false, func(il int, blk string, cur, resid *tensor) *tensor {
		resid = b.Add(cur, resid)
		if il == len(mix)-1 {
			resid = b.GetRows(resid, r.outIDs)
		}
		return b.Add(b.ffn(blk, "", b.norm(resid, blk+"ffn_norm"), ffnSwiGLU), resid)
	})
	return r.output(inpL, "output_norm.weight", false)
}
