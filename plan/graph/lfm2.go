package graph

import "github.com/headroom-llm/headroom/plan/ggml"

// This file is src/models/lfm2.cpp: short gated convolutions and
// attention with per-head Q and K norms, each layer ending in a SwiGLU
// FFN; the final norm is token_embd_norm.

func lfm2Graph(r *rsGraph, mix []mixer) *ggml.Graph {
	b := r.b
	r.attnInputs()
	r.rope = true
	inpL := r.layers(mix, true, func(_ int, blk string, cur, resid *tensor) *tensor {
		cur = b.Add(resid, cur)
		return b.Add(cur, b.ffn(blk, "", b.norm(cur, blk+"ffn_norm.weight"), ffnSwiGLU))
	})
	return r.output(inpL, "token_embd_norm.weight", false)
}
