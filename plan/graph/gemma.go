package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/gemma2-iswa.cpp and gemma3.cpp: sliding-window
// and full attention layers interleaved over llama_kv_cache_iswa, two
// caches, each with its own index inputs and its own mask whose n_kv is
// that cache's size; the input scaled, norms after attention and after
// the FFN as well as before, a GeGLU FFN.

// gemma is the family of gemma2 and gemma3, and what sets their graphs
// apart.
type gemma struct {
	softcap bool // gemma2: attention and final logit soft-capping
	qkNorm  bool // gemma3: per-head norms of Q and K
}

func (o gemma) graphOf(m *arch.Model) graphFunc {
	if !swaDescribes(m, o.qkNorm) {
		return nil
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph { return gemmaGraph(m, c, nTokens, b, o) }
}

// swaLayersOK checks what every sliding-window graph needs of the model:
// attention in every layer, with whole heads.
func swaLayersOK(m *arch.Model) (sliding int, ok bool) {
	if m.NExpert > 0 {
		return 0, false
	}
	return swaLayersOf(m)
}

// swaLayersOf is swaLayersOK for a family that may have experts beside
// its layers' own FFN (Gemma 4 26B-A4B).
func swaLayersOf(m *arch.Model) (sliding int, ok bool) {
	if m.MLA || m.NHead <= 0 || len(m.Layers) == 0 {
		return 0, false
	}
	for _, l := range m.Layers {
		// A layer reading another's cache (Gemma 4 E2B, E4B) counts as
		// attending.
		if l.Recurrent || l.Attention == arch.NoAttention && !l.KVShared || l.HeadsKV <= 0 || l.FF <= 0 ||
			l.KDim%l.HeadsKV != 0 || l.VDim%l.HeadsKV != 0 {
			return 0, false
		}
		if l.Attention == arch.Sliding {
			sliding++
		}
	}
	return sliding, true
}

// swaDescribes says whether a sliding-window family (gemma2, gemma3,
// cohere2) describes the model: without sliding layers gemma3 and cohere2
// build other graphs (one cache; gemma3<false> even adds a final
// soft-cap). qkNorm says the model must have Q norms.
func swaDescribes(m *arch.Model, qkNorm bool) bool {
	sliding, ok := swaLayersOK(m)
	return ok && sliding > 0 && hasTensor(m, "blk.0.attn_q.weight") && (!qkNorm || hasTensor(m, "blk.0.attn_q_norm.weight"))
}

// hasTensor reports whether the model has a tensor of that name.
func hasTensor(m *arch.Model, name string) bool {
	for _, t := range m.Tensors {
		if t.Name == name {
			return true
		}
	}
	return false
}

func gemmaGraph(m *arch.Model, c Context, nTokens int, b *gb, o gemma) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	// inp_scaled: times sqrt(n_embd) (gemma3 only for token input, which
	// the reserved batch is)
	inpL := b.Scale(in.inpL)
	full, swa := b.iswaInputs(m, c, in.T, swaCells(m, c))
	freqs := b.ropeFactorsAny()
	for il, l := range m.Layers {
		blk := blkName(il)
		kv := full
		if l.Attention == arch.Sliding {
			kv = swa
		}
		s := layerShape(m, l, c, kv, in.T)
		q, k, v := b.qkv(blk, b.norm(inpL, blk+"attn_norm.weight"), s)
		if o.qkNorm {
			// on a reshaped projection, so the norm cannot run in place
			q, k = b.norm(q, blk+"attn_q_norm.weight"), b.norm(k, blk+"attn_k_norm.weight")
		}
		// Q scaled by f_attention_scale after RoPE
		q, k = b.Scale(b.Rope(q, in.pos, freqs)), b.Rope(k, in.pos, freqs)
		cur := b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, attnOpts{softcap: o.softcap}))
		cur, resid := in.lastRows(b, il == len(m.Layers)-1, cur, inpL)
		sa := b.Add(b.norm(cur, blk+"post_attention_norm.weight"), resid)
		cur = b.ffn(blk, "", b.norm(sa, blk+"ffn_norm.weight"), ffnSwiGLU)
		inpL = b.Add(b.norm(cur, blk+"post_ffw_norm.weight"), sa)
	}
	logits := b.output(m, inpL, b.norm)
	if o.softcap {
		logits = b.Scale(b.Unary(b.Scale(logits)))
	}
	return b.finish(logits)
}
