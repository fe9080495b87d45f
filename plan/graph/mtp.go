package graph

import (
	"slices"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file describes the graph of llama-server's MTP draft context
// (--spec-type draft-mtp) for Qwen3.5 and 3.6: qwen35.cpp's and
// qwen35moe.cpp's graph_mtp, the LLM_GRAPH_TYPE_DECODER_MTP graph. The
// MTP block takes the token's embedding and the target's hidden state,
// RMS-normed each and concatenated, through eh_proj, then runs one
// gated-attention layer over the draft context's own cache, its FFN,
// the head's norm (t_h_nextn, a graph output) and the LM head.

// ForMTP returns the builder of the model's MTP draft graph, or nil
// where the replay has none (a model other than Qwen3.5's, or without
// the tensors the graph reads).
func ForMTP(m *arch.Model) Builder {
	if (m.Arch != "qwen35" && m.Arch != "qwen35moe") || len(m.MTPHead) != 1 || m.NextN != 1 || m.PosPerEmbd != 4 {
		return nil
	}
	il := m.NLayer - 1
	head := m.MTPHead[0]
	if head.HeadsKV <= 0 || head.KDim != head.VDim || head.KDim%head.HeadsKV != 0 {
		return nil
	}
	moe := m.Arch == "qwen35moe"
	need := []string{"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight", "attn_norm.weight",
		"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight",
		"post_attention_norm.weight"}
	if moe {
		need = append(need, qwenMoETensors()...)
	} else {
		need = append(need, "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight")
	}
	shapes := tensorShapes(m)
	blk := blkName(il)
	for _, n := range need {
		if _, ok := shapes[blk+n]; !ok {
			return nil
		}
	}
	// The draft context's cache holds the MTP layer alone: a model whose
	// other layers have no attention, for the cache inputs and shapes.
	dm := *m
	dm.Layers = slices.Clone(m.Layers)
	for i := range dm.Layers {
		dm.Layers[i].Attention = arch.NoAttention
	}
	dm.Layers[il] = head
	return func(c Context, nTokens int, p Placement) *ggml.Graph {
		b := newGB(p, shapes)
		g := mtpGraph(&dm, c, nTokens, b, il, moe)
		b.Done()
		return g
	}
}

// mtpGraph records graph_mtp for a micro-batch of nTokens.
func mtpGraph(m *arch.Model, c Context, nTokens int, b *gb, il int, moe bool) *ggml.Graph {
	blk := blkName(il)
	T, nOut := reserveTokens(c, nTokens)
	embd := int64(m.NEmbd)
	tokens := b.Input("inp_tokens", gguf.TypeI32, T)
	tokEmbd := b.GetRows(b.weight(tokEmbdOf(b, blk), embd, int64(m.NVocab)), tokens)
	h := b.Input("mtp_h_input", gguf.TypeF32, embd, T)
	pos := b.Input("inp_pos", gguf.TypeI32, T*posPerToken(m))
	outIDs := b.Input("inp_out_ids", gguf.TypeI32, nOut)
	kv := b.kvCacheInputs(m, c, T, int64(c.NCtxSeq), "", attnLayers, true)

	hNorm := b.norm(h, blk+"nextn.hnorm.weight")
	eNorm := b.norm(tokEmbd, blk+"nextn.enorm.weight")
	cur := b.MulMat(b.weight(blk+"nextn.eh_proj.weight"), b.Concat(eNorm, hNorm, 0))
	inpSA := cur
	cur = b.norm(cur, blk+"attn_norm.weight")

	s := layerShape(m, m.Layers[il], c, kv, T)
	head := s.headK
	qFull := b.MulMat(b.weight(blk+"attn_q.weight"), cur)
	row := 2 * head * 4
	q := b.norm(b.View(qFull, head, s.heads, T).Strided(row, row*s.heads), blk+"attn_q_norm.weight")
	gate := b.Cont(b.View(qFull, head, s.heads, T).Strided(row, row*s.heads), head*s.heads, T)
	k := b.norm(b.Reshape(b.MulMat(b.weight(blk+"attn_k.weight"), cur), head, s.headsKV, T), blk+"attn_k_norm.weight")
	v := b.Reshape(b.MulMat(b.weight(blk+"attn_v.weight"), cur), head, s.headsKV, T)
	q, k = b.Rope(q, pos, nil), b.Rope(k, pos, nil)
	att := b.attn(il, c, kv, s, q, k, v, attnOpts{})
	att = b.Mul(att, b.UnaryOf(ggml.UnarySigmoid, gate))
	cur = b.Add(b.MulMat(b.weight(blk+"attn_output.weight"), att), inpSA)

	resid := cur
	cur = b.norm(cur, blk+"post_attention_norm.weight")
	if moe {
		cur = b.qwenMoE(m, blk, cur)
	} else {
		cur = b.ffn(blk, "", cur, ffnSwiGLU)
	}
	cur = b.Add(cur, resid)

	headNorm := blk + "nextn.shared_head_norm.weight"
	if !b.has(headNorm) {
		headNorm = "output_norm.weight"
	}
	cur = b.norm(cur, headNorm).SetOutput()
	cur = b.GetRows(cur, outIDs)
	headW := blk + "nextn.shared_head_head.weight"
	if !b.has(headW) {
		headW = "output.weight"
	}
	return b.finish(b.MulMat(b.weight(headW, embd, int64(m.NVocab)), cur))
}

// tokEmbdOf is the MTP block's own token embedding where it has one,
// else the model's.
func tokEmbdOf(b *gb, blk string) string {
	if n := blk + "nextn.embed_tokens.weight"; b.has(n) {
		return n
	}
	return "token_embd.weight"
}
