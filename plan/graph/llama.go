package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/llama.cpp, and the dense transformers built
// like it (qwen2.cpp, qwen3.cpp, mistral3.cpp): full attention over one
// KV cache and a SwiGLU FFN.

// denseFullAttention says whether the model is a dense transformer with
// full attention in every layer.
func denseFullAttention(m *arch.Model) bool {
	if m.NExpert > 0 || m.MLA {
		return false
	}
	for _, l := range m.Layers {
		if l.Attention != arch.Full || l.Recurrent {
			return false
		}
	}
	return true
}

// llama is the family of llama-like models.
type llama struct {
	// ropeFreqs says whether RoPE takes the rope_freqs factors (llama's
	// graph does, the others' do not).
	ropeFreqs bool
	// noRopeStep n > 0 leaves RoPE out of every n-th layer (smollm3.cpp's
	// n_no_rope_layer_step): q and k go to attention as views of their
	// projections.
	noRopeStep int
}

func (o llama) graphOf(m *arch.Model) graphFunc {
	if !denseFullAttention(m) {
		return nil
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
		return llamaGraph(m, c, nTokens, b, o)
	}
}

// llamaGraph is the graph of one micro-batch of nTokens against a full
// cache, in the order ggml records it.
func llamaGraph(m *arch.Model, c Context, nTokens int, b *gb, o llama) *ggml.Graph {
	in, kv := b.newKVBatch(m, c, nTokens)
	inpL := in.inpL
	var attnScale *tensor
	if m.AttnTempScale != 0 {
		// mistral3's temperature tuning: Q times one factor per token
		// (build_inp_attn_scale)
		attnScale = b.Input("attn_scale", gguf.TypeF32, 1, 1, in.T)
	}
	for il, l := range m.Layers {
		blk := blkName(il)
		s := layerShape(m, l, c, kv, in.T)
		q, k, v := b.qkv(blk, b.norm(inpL, blk+"attn_norm.weight"), s)
		if b.has(blk + "attn_q_norm.weight") { // qwen3: per-head norms
			q, k = b.norm(q, blk+"attn_q_norm.weight"), b.norm(k, blk+"attn_k_norm.weight")
		}
		var freqs *tensor
		if o.ropeFreqs {
			// The frequency factors are RoPE's third source: no node
			// allocates for them, but the scheduler copies them like any
			// weight, and a weight from another backend ends a split.
			freqs = b.ropeFactors(il)
		}
		if o.noRopeStep == 0 || (il+1)%o.noRopeStep != 0 {
			q, k = b.Rope(q, in.pos, freqs), b.Rope(k, in.pos, freqs)
		}
		if attnScale != nil {
			q = b.Mul(q, attnScale)
		}
		cur := b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, attnOpts{}))
		cur, inpSA := in.lastRows(b, il == len(m.Layers)-1, cur, inpL)
		ffnInp := b.Add(cur, inpSA)
		inpL = b.Add(b.ffn(blk, "", b.norm(ffnInp, blk+"ffn_norm.weight"), ffnSwiGLU), ffnInp)
	}
	return b.finish(b.output(m, inpL, b.norm))
}
