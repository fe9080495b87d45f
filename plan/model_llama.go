package plan

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/llama.cpp, and the dense transformers built
// like it (qwen2.cpp, qwen3.cpp, mistral3.cpp, olmo2.cpp): full attention
// over one KV cache and a SwiGLU FFN.

// llamaOpts is what sets a llama-like model's graph apart.
type llamaOpts struct {
	ropeFreqs bool // llama: RoPE takes the rope_freqs factors
	// postNorms: OLMo 2 norms after attention and after the FFN instead
	// of before, and Q and K whole, before the heads are split.
	postNorms bool
}

// llamaLike returns the builder of a dense llama-like model with full
// attention everywhere, nil for a model it does not describe.
func llamaLike(o llamaOpts) func(m *arch.Model) graphBuilder {
	return func(m *arch.Model) graphBuilder {
		if m.NExpert > 0 || m.MLA {
			return nil
		}
		for _, l := range m.Layers {
			if l.Attention != arch.Full || l.Recurrent {
				return nil
			}
		}
		return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph { return llamaGraph(m, c, nTokens, b, o) }
	}
}

// llamaGraph is the graph of one micro-batch of nTokens against a full
// cache, in the order ggml records it.
func llamaGraph(m *arch.Model, c Context, nTokens int, b *gb, o llamaOpts) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	T, inpL, pos, outIDs := in.T, in.inpL, in.pos, in.outIDs
	kv := b.kvCacheInputs(m, c, T, int64(c.NCtxSeq), "", attnLayers, true)
	for il, l := range m.Layers {
		blk := "blk." + strconv.Itoa(il) + "."
		s := layerShape(m, l, c, kv, T)
		inpSA := inpL
		cur := inpL
		if !o.postNorms {
			cur = b.norm(inpL, blk+"attn_norm.weight")
		}
		q, k, v := b.llamaQKV(blk, cur, s, o)
		var freqs *tensor
		if o.ropeFreqs {
			// The frequency factors are RoPE's third source: no node
			// allocates for them, but the scheduler copies them like any
			// weight, and a weight from another backend ends a split.
			freqs = b.ropeFactors(il)
		}
		q, k = b.Rope(q, pos, freqs), b.Rope(k, pos, freqs)
		cur = b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, attnOpts{}))
		if il == len(m.Layers)-1 {
			cur, inpSA = b.GetRows(cur, outIDs), b.GetRows(inpSA, outIDs)
		}
		if o.postNorms {
			cur = b.norm(cur, blk+"post_attention_norm.weight")
		}
		ffnInp := b.Add(cur, inpSA)
		cur = ffnInp
		if !o.postNorms {
			cur = b.norm(ffnInp, blk+"ffn_norm.weight")
		}
		cur = b.ffn(blk, "", cur, ffnSwiGLU)
		if o.postNorms {
			cur = b.norm(cur, blk+"post_ffw_norm.weight")
		}
		inpL = b.Add(cur, ffnInp)
	}
	return b.finish(b.output(m, inpL, b.norm))
}

// llamaQKV is the Q, K and V of a llama-like layer: with OLMo 2 the whole
// Q and K are normed before the heads are split, with Qwen 3 each head.
func (b *gb) llamaQKV(blk string, cur *tensor, s attnShape, o llamaOpts) (q, k, v *tensor) {
	if !o.postNorms {
		q, k, v = b.qkv(blk, cur, s)
		if b.has(blk + "attn_q_norm.weight") {
			q, k = b.norm(q, blk+"attn_q_norm.weight"), b.norm(k, blk+"attn_k_norm.weight")
		}
		return q, k, v
	}
	q = b.norm(b.MulMat(b.weight(blk+"attn_q.weight"), cur), blk+"attn_q_norm.weight")
	k = b.norm(b.MulMat(b.weight(blk+"attn_k.weight"), cur), blk+"attn_k_norm.weight")
	v = b.MulMat(b.weight(blk+"attn_v.weight"), cur)
	return b.Reshape(q, s.headK, s.heads, s.T), b.Reshape(k, s.headK, s.headsKV, s.T), b.Reshape(v, s.headV, s.headsKV, s.T)
}
