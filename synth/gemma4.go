package synth

// gemma4Blocks: Gemma 3's layers with the global layers' own head width
// and KV heads (and, with KEqV, no attn_v: K doubles as V), a layer output
// scale, and one rope_freqs table (written first, as the converter's
// generated tensors are) that the global layers' proportional RoPE reads.
func gemma4Blocks(t *tensors, s Shape) {
	g := s.Global
	t.f32("rope_freqs.weight", g.HeadDim/2)
	t.add("token_embd.weight", s.Embd, s.Vocab)
	if ple := s.PLE; ple != nil {
		pl := ple.Embd * s.Layers
		t.add("per_layer_token_embd.weight", pl, s.Vocab)
		t.add("per_layer_model_proj.weight", s.Embd, pl)
		t.f32("per_layer_proj_norm.weight", ple.Embd)
	}
	for i := range s.Layers {
		p := blk(i)
		headDim, kv, keqv := s.headDim(), s.HeadsKV, false
		if !s.SWA.sliding(i) {
			headDim, kv, keqv = g.HeadDim, g.HeadsKV, g.KEqV
		}
		qDim, kvDim := s.Heads*headDim, kv*headDim
		// A shared-KV layer has no K or V projection of its own.
		shared := s.sharedKV(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		t.add(p+"attn_q.weight", s.Embd, qDim)
		if !shared {
			t.add(p+"attn_k.weight", s.Embd, kvDim)
		}
		if !keqv && !shared {
			t.add(p+"attn_v.weight", s.Embd, kvDim)
		}
		t.add(p+"attn_output.weight", qDim, s.Embd)
		t.f32(p+"post_attention_norm.weight", s.Embd)
		if !shared {
			t.f32(p+"attn_k_norm.weight", headDim)
		}
		t.f32(p+"attn_q_norm.weight", headDim)
		t.f32(p+"ffn_norm.weight", s.Embd)
		ffn(t, s, i, s.layerFF(i), "")
		t.f32(p+"post_ffw_norm.weight", s.Embd)
		if ple := s.PLE; ple != nil {
			t.add(p+"inp_gate.weight", s.Embd, ple.Embd)
			t.add(p+"proj.weight", ple.Embd, s.Embd)
			t.f32(p+"post_norm.weight", s.Embd)
		}
		if m := s.MoE; m != nil {
			// 26B-A4B: the router (its proj and scale), the experts'
			// merged gate and up, their down and per-expert scale, and
			// the norms around the two branches.
			t.f32(p+"ffn_gate_inp.weight", s.Embd, m.Experts)
			t.f32(p+"ffn_gate_inp.scale", s.Embd)
			t.add(p+"ffn_gate_up_exps.weight", s.Embd, 2*m.FF, m.Experts)
			t.add(p+"ffn_down_exps.weight", m.FF, s.Embd, m.Experts)
			t.f32(p+"ffn_down_exps.scale", m.Experts)
			t.f32(p+"pre_ffw_norm_2.weight", s.Embd)
			t.f32(p+"post_ffw_norm_1.weight", s.Embd)
			t.f32(p+"post_ffw_norm_2.weight", s.Embd)
		}
		t.f32(p+"layer_output_scale.weight", 1)
	}
	output(t, s, "output_norm.weight")
}
