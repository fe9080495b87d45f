package plan

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/gemma2-iswa.cpp, gemma3.cpp and cohere2-iswa.cpp:
// sliding-window and full attention layers interleaved over
// llama_kv_cache_iswa, two caches, each with its own index inputs and its
// own mask whose n_kv is that cache's size.

// swaOpts is what sets the three architectures' graphs apart.
type swaOpts struct {
	gemma   bool // gemma2, gemma3: scaled input, post-norms, GeGLU
	softcap bool // gemma2: attention and final logit soft-capping
	qkNorm  bool // gemma3: per-head norms of Q and K
	// cohere: layer norms, no RoPE on the global layers, the FFN beside
	// the attention on the same normed input, scaled logits.
	cohere bool
}

// swaLayersOK checks what every sliding-window graph needs of the model:
// attention in every layer, with whole heads.
func swaLayersOK(m *arch.Model) (sliding int, ok bool) {
	if m.NExpert > 0 || m.MLA || m.NHead <= 0 || len(m.Layers) == 0 {
		return 0, false
	}
	for _, l := range m.Layers {
		if l.Recurrent || l.Attention == arch.NoAttention || l.HeadsKV <= 0 || l.FF <= 0 ||
			l.KDim%l.HeadsKV != 0 || l.VDim%l.HeadsKV != 0 {
			return 0, false
		}
		if l.Attention == arch.Sliding {
			sliding++
		}
	}
	return sliding, true
}

// swaFamily returns the builder of a model of the family, nil for one it
// does not describe: without sliding layers gemma3 and cohere2 build other
// graphs (one cache; gemma3<false> even adds a final soft-cap).
func swaFamily(o swaOpts) func(m *arch.Model) graphBuilder {
	return func(m *arch.Model) graphBuilder {
		sliding, ok := swaLayersOK(m)
		if !ok || sliding == 0 || !hasTensor(m, "blk.0.attn_q.weight") || o.qkNorm && !hasTensor(m, "blk.0.attn_q_norm.weight") {
			return nil
		}
		return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph { return swaGraph(m, c, nTokens, b, o) }
	}
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

// ropeFactorsAny is the first RoPE factor table the model has (phi3's
// short and long ones), shared by every layer, or nil.
func (b *gb) ropeFactorsAny() *tensor {
	for _, n := range []string{"rope_factors_short.weight", "rope_factors_long.weight", "rope_freqs.weight"} {
		if b.has(n) {
			return b.weight(n, 1)
		}
	}
	return nil
}

func swaGraph(m *arch.Model, c Context, nTokens int, b *gb, o swaOpts) *ggml.Graph {
	in := b.newBatch(m, c, nTokens)
	T, inpL, pos, outIDs := in.T, in.inpL, in.pos, in.outIDs
	if o.gemma {
		// inp_scaled: times sqrt(n_embd) (gemma3 only for token input,
		// which the reserved batch is)
		inpL = b.Scale(inpL)
	}
	full, swa := b.iswaInputs(m, c, T, swaCells(m, c))
	freqs := b.ropeFactorsAny()
	norm := b.norm
	if o.cohere {
		norm = b.layerNorm
	}
	for il, l := range m.Layers {
		blk := "blk." + strconv.Itoa(il) + "."
		sliding := l.Attention == arch.Sliding
		kv := full
		if sliding {
			kv = swa
		}
		s := layerShape(m, l, c, kv, T)
		resid := inpL
		cur := norm(inpL, blk+"attn_norm.weight")
		ffnInp := cur // cohere2 runs the FFN on the same normed input
		q, k, v := b.qkv(blk, cur, s)
		if o.qkNorm {
			// on a reshaped projection, so the norm cannot run in place
			q, k = b.norm(q, blk+"attn_q_norm.weight"), b.norm(k, blk+"attn_k_norm.weight")
		}
		if !o.cohere || sliding { // cohere2's global layers take no positional encoding
			q, k = b.Rope(q, pos, freqs), b.Rope(k, pos, freqs)
		}
		if !o.cohere {
			q = b.Scale(q) // f_attention_scale
		}
		cur = b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, attnOpts{softcap: o.softcap}))
		if il == len(m.Layers)-1 { // only the output rows go on
			cur, resid = b.GetRows(cur, outIDs), b.GetRows(resid, outIDs)
			if o.cohere {
				ffnInp = b.GetRows(ffnInp, outIDs)
			}
		}
		if o.cohere {
			inpL = b.Add(b.Add(b.ffn(blk, "", ffnInp, ffnSwiGLU), resid), cur)
			continue
		}
		sa := b.Add(b.norm(cur, blk+"post_attention_norm.weight"), resid)
		cur = b.ffn(blk, "", b.norm(sa, blk+"ffn_norm.weight"), ffnSwiGLU)
		inpL = b.Add(b.norm(cur, blk+"post_ffw_norm.weight"), sa)
	}
	logits := b.output(m, inpL, norm)
	switch {
	case o.softcap:
		logits = b.Scale(b.Unary(b.Scale(logits)))
	case o.cohere:
		// logit_scale (every Command-R model sets one; without it the
		// logits are the product itself, of the same size)
		logits = b.Scale(logits)
	}
	return b.finish(logits)
}
