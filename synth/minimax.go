package synth

// minimaxM2Blocks: llama's attention with RMS norms over the whole Q and K
// projections (attn_q_norm of every head's width at once, attn_k_norm of
// the KV width), and sigmoid-routed experts with a selection bias
// (exp_probs_b) and no shared expert; the output is its own matrix.
func minimaxM2Blocks(t *tensors, s Shape) {
	headDim := s.headDim()
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		attention(t, s, i)
		t.f32(p+"attn_q_norm.weight", s.Heads*headDim)
		t.f32(p+"attn_k_norm.weight", s.HeadsKV*headDim)
		t.f32(p+"ffn_norm.weight", s.Embd)
		experts(t, s, i)
		t.f32(p+"exp_probs_b.bias", s.MoE.Experts)
	}
	output(t, s, "output_norm.weight")
}
