package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file is src/models/gptneox.cpp: layer norms with biases, one fused
// QKV projection with its bias (build_qkv's views into it), NEOX RoPE on
// the first rope.dimension_count elements of each head (the op's shape is
// the head's whatever it rotates), biased output projection and a GELU
// FFN with biases. With use_parallel_residual (every Pythia) the FFN reads
// the layer's input beside the attention and both are added to it;
// without, the FFN reads the attention's residual sum, as llama's does.

// gptneox is GPT-NeoX's family. It describes the layout gptneox.cpp
// loads: every weight with its bias (the loader requires them all).
type gptneox struct{}

func (gptneox) graphOf(m *arch.Model) graphFunc {
	if !denseFullAttention(m) {
		return nil
	}
	for _, n := range []string{"attn_norm", "attn_qkv", "attn_output", "ffn_norm", "ffn_up", "ffn_down"} {
		if !hasTensor(m, "blk.0."+n+".weight") || !hasTensor(m, "blk.0."+n+".bias") {
			return nil
		}
	}
	if !hasTensor(m, "output_norm.bias") {
		return nil
	}
	return gptneoxGraph
}

func gptneoxGraph(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
	in, kv := b.newKVBatch(m, c, nTokens)
	T, inpL := in.T, in.inpL
	for il, l := range m.Layers {
		blk := blkName(il)
		s := layerShape(m, l, c, kv, T)
		cur := b.layerNormBias(inpL, blk+"attn_norm")
		qkv := b.Add(b.MulMat(b.weight(blk+"attn_qkv.weight"), cur), b.weight(blk+"attn_qkv.bias"))
		var q, k, v *tensor
		if !b.rules.QKVViews {
			// early 2025's build_gptneox: each of Q, K and V copied out
			// of a 2-D view of the fused result, Q and K roped from
			// reshapes of the copies
			qc := b.Cont(b.View(qkv, s.headK*s.heads, T))
			kc := b.Cont(b.View(qkv, s.headK*s.headsKV, T))
			vc := b.Cont(b.View(qkv, s.headV*s.headsKV, T))
			q = b.Rope(b.Reshape(qc, s.headK, s.heads, T), in.pos, nil)
			k = b.Rope(b.Reshape(kc, s.headK, s.headsKV, T), in.pos, nil)
			v = b.Reshape(vc, s.headV, s.headsKV, T)
		} else {
			// views into the fused result, with its row as their token
			// stride (a copy to another backend holds that span); RoPE
			// makes Q and K contiguous, V stays strided
			head, row := s.headK*4, qkv.Ne()[0]*4
			q = b.Rope(b.View(qkv, s.headK, s.heads, T).Strided(head, row), in.pos, nil)
			k = b.Rope(b.View(qkv, s.headK, s.headsKV, T).Strided(head, row), in.pos, nil)
			v = b.View(qkv, s.headV, s.headsKV, T).Strided(s.headV*4, row)
		}
		cur = b.attnOut(blk, b.attn(il, c, kv, s, q, k, v, attnOpts{vStrided: b.rules.QKVViews}))
		cur, inpL = in.lastRows(b, il == len(m.Layers)-1, cur, inpL)
		if m.ParallelResidual {
			attnOut := cur
			cur = b.ffnGELU(blk, b.layerNormBias(inpL, blk+"ffn_norm"))
			inpL = b.Add(b.Add(cur, inpL), attnOut)
		} else {
			ffnInp := b.Add(cur, inpL)
			cur = b.ffnGELU(blk, b.layerNormBias(ffnInp, blk+"ffn_norm"))
			inpL = b.Add(cur, ffnInp)
		}
	}
	cur := b.layerNormBias(inpL, "output_norm").SetOutput()
	b.embd = cur
	return b.finish(b.MulMat(b.weight("output.weight", int64(m.NEmbd), int64(m.NVocab)), cur))
}

// layerNormBias is build_norm with LLM_NORM, the weight <prefix>.weight
// and the bias <prefix>.bias.
func (b *gb) layerNormBias(x *tensor, prefix string) *tensor {
	return b.Add(b.layerNorm(x, prefix+".weight"), b.weight(prefix+".bias", x.Ne()[0]))
}

// ffnGELU is build_ffn with LLM_FFN_GELU and no gate: the biased up
// projection, GELU, the biased down projection.
func (b *gb) ffnGELU(blk string, cur *tensor) *tensor {
	up := b.Add(b.MulMat(b.weight(blk+"ffn_up.weight"), cur), b.weight(blk+"ffn_up.bias"))
	x := b.UnaryOf(ggml.UnaryGELU, up)
	return b.Add(b.MulMat(b.weight(blk+"ffn_down.weight"), x), b.weight(blk+"ffn_down.bias"))
}
