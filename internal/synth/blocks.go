package synth

// The tensor layouts below follow each architecture's load_arch_tensors in
// llama.cpp (src/models/<arch>.cpp): names from src/llama-arch.cpp, shapes
// in ggml order (ne0 first). A tensor llama.cpp requires and the file lacks
// makes the load fail, so a successful load checks these layouts.

// archBlocks maps general.architecture to the function that writes its
// tensors; architectures not listed use the dense llama layout.
var archBlocks = map[string]func(*tensors, Shape){
	"qwen3moe":  denseBlocks,
	"phi3":      phi3Blocks,
	"gemma3":    gemma3Blocks,
	"gpt-oss":   gptOSSBlocks,
	"lfm2":      lfm2Blocks,
	"mamba2":    mamba2Blocks,
	"deepseek2": deepseek2Blocks,
}

// output writes the final norm and, unless the embedding is tied, the
// output projection.
func output(t *tensors, s Shape, normName string) {
	t.add(normName, roleF32, -1, s.Embd)
	if !s.TiedOutput {
		t.add("output.weight", "output", -1, s.Embd, s.Vocab)
	}
}

// experts writes a routed-expert FFN: the F32 router and the three 3-D
// expert tensors.
func experts(t *tensors, s Shape, i int) {
	p, m := blk(i), s.MoE
	t.add(p+"ffn_gate_inp.weight", roleF32, i, s.Embd, m.Experts)
	t.add(p+"ffn_gate_exps.weight", "ffn_exps", i, s.Embd, m.FF, m.Experts)
	t.add(p+"ffn_up_exps.weight", "ffn_exps", i, s.Embd, m.FF, m.Experts)
	t.add(p+"ffn_down_exps.weight", "ffn_down_exps", i, m.FF, s.Embd, m.Experts)
}

// ffn writes a dense SwiGLU FFN of width ff.
func ffn(t *tensors, s Shape, i, ff int, suffix string) {
	p := blk(i)
	t.add(p+"ffn_gate"+suffix+".weight", "ffn_gate", i, s.Embd, ff)
	t.add(p+"ffn_up"+suffix+".weight", "ffn_up", i, s.Embd, ff)
	t.add(p+"ffn_down"+suffix+".weight", "ffn_down", i, ff, s.Embd)
}

// denseBlocks is the llama layout (llama, qwen2, qwen3, mistral3) and, with
// MoE set, qwen3moe's.
func denseBlocks(t *tensors, s Shape) {
	headDim := s.headDim()
	if s.Tokenizer == "gpt2" && s.Arch == "llama" {
		// Llama 3's rope scaling factors.
		t.add("rope_freqs.weight", roleF32, -1, headDim/2)
	}
	t.add("token_embd.weight", "token_embd", -1, s.Embd, s.Vocab)
	qDim, kvDim := s.Heads*headDim, s.HeadsKV*headDim
	for i := range s.Layers {
		p := blk(i)
		t.add(p+"attn_norm.weight", roleF32, i, s.Embd)
		t.add(p+"attn_q.weight", "attn_q", i, s.Embd, qDim)
		t.add(p+"attn_k.weight", "attn_k", i, s.Embd, kvDim)
		t.add(p+"attn_v.weight", "attn_v", i, s.Embd, kvDim)
		if s.QKVBias {
			t.add(p+"attn_q.bias", roleF32, i, qDim)
			t.add(p+"attn_k.bias", roleF32, i, kvDim)
			t.add(p+"attn_v.bias", roleF32, i, kvDim)
		}
		if s.QKNorm {
			t.add(p+"attn_q_norm.weight", roleF32, i, headDim)
			t.add(p+"attn_k_norm.weight", roleF32, i, headDim)
		}
		t.add(p+"attn_output.weight", "attn_output", i, qDim, s.Embd)
		t.add(p+"ffn_norm.weight", roleF32, i, s.Embd)
		if s.MoE != nil {
			experts(t, s, i)
		} else {
			ffn(t, s, i, s.FF, "")
		}
	}
	output(t, s, "output_norm.weight")
}

// phi3Blocks: one attn_qkv, and ffn_up holding gate and up side by side.
func phi3Blocks(t *tensors, s Shape) {
	kvDim := s.HeadsKV * s.headDim()
	t.add("token_embd.weight", "token_embd", -1, s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.add(p+"attn_norm.weight", roleF32, i, s.Embd)
		t.add(p+"attn_qkv.weight", "attn_qkv", i, s.Embd, s.Embd+2*kvDim)
		t.add(p+"attn_output.weight", "attn_output", i, s.Embd, s.Embd)
		t.add(p+"ffn_norm.weight", roleF32, i, s.Embd)
		t.add(p+"ffn_up.weight", "ffn_up", i, s.Embd, 2*s.FF)
		t.add(p+"ffn_down.weight", "ffn_down", i, s.FF, s.Embd)
	}
	output(t, s, "output_norm.weight")
}

// gemma3Blocks: post-attention and post-FFN norms around every sublayer, and
// q/k norms; the output is tied to the embedding.
func gemma3Blocks(t *tensors, s Shape) {
	headDim := s.headDim()
	qDim, kvDim := s.Heads*headDim, s.HeadsKV*headDim
	t.add("token_embd.weight", "token_embd", -1, s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.add(p+"attn_norm.weight", roleF32, i, s.Embd)
		t.add(p+"attn_q.weight", "attn_q", i, s.Embd, qDim)
		t.add(p+"attn_k.weight", "attn_k", i, s.Embd, kvDim)
		t.add(p+"attn_v.weight", "attn_v", i, s.Embd, kvDim)
		t.add(p+"attn_output.weight", "attn_output", i, qDim, s.Embd)
		t.add(p+"post_attention_norm.weight", roleF32, i, s.Embd)
		t.add(p+"attn_k_norm.weight", roleF32, i, headDim)
		t.add(p+"attn_q_norm.weight", roleF32, i, headDim)
		t.add(p+"ffn_norm.weight", roleF32, i, s.Embd)
		ffn(t, s, i, s.FF, "")
		t.add(p+"post_ffw_norm.weight", roleF32, i, s.Embd)
	}
	output(t, s, "output_norm.weight")
}

// gptOSSBlocks: biases on every projection, per-head attention sinks, a
// biased router and biased experts; post_attention_norm is the FFN norm.
func gptOSSBlocks(t *tensors, s Shape) {
	headDim := s.headDim()
	qDim, kvDim := s.Heads*headDim, s.HeadsKV*headDim
	m := s.MoE
	t.add("token_embd.weight", "token_embd", -1, s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.add(p+"attn_norm.weight", roleF32, i, s.Embd)
		t.add(p+"attn_q.weight", "attn_q", i, s.Embd, qDim)
		t.add(p+"attn_q.bias", roleF32, i, qDim)
		t.add(p+"attn_k.weight", "attn_k", i, s.Embd, kvDim)
		t.add(p+"attn_k.bias", roleF32, i, kvDim)
		t.add(p+"attn_v.weight", "attn_v", i, s.Embd, kvDim)
		t.add(p+"attn_v.bias", roleF32, i, kvDim)
		t.add(p+"attn_output.weight", "attn_output", i, qDim, s.Embd)
		t.add(p+"attn_output.bias", roleF32, i, s.Embd)
		t.add(p+"attn_sinks.weight", roleF32, i, s.Heads)
		t.add(p+"post_attention_norm.weight", roleF32, i, s.Embd)
		experts(t, s, i)
		t.add(p+"ffn_gate_inp.bias", roleF32, i, m.Experts)
		t.add(p+"ffn_gate_exps.bias", roleF32, i, m.FF, m.Experts)
		t.add(p+"ffn_up_exps.bias", roleF32, i, m.FF, m.Experts)
		t.add(p+"ffn_down_exps.bias", roleF32, i, s.Embd, m.Experts)
	}
	output(t, s, "output_norm.weight")
}

// lfm2Blocks: every layer has an FFN; attention layers have q/k norms, the
// others a gated short convolution. The final norm is named token_embd_norm
// (a naming accident llama.cpp keeps for compatibility).
func lfm2Blocks(t *tensors, s Shape) {
	headDim := s.headDim()
	attn := map[int]bool{}
	for _, il := range s.Conv.AttnLayers {
		attn[il] = true
	}
	t.add("token_embd.weight", "token_embd", -1, s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.add(p+"ffn_norm.weight", roleF32, i, s.Embd)
		ffn(t, s, i, s.FF, "")
		t.add(p+"attn_norm.weight", roleF32, i, s.Embd)
		if attn[i] {
			kvDim := s.HeadsKV * headDim
			t.add(p+"attn_q_norm.weight", roleF32, i, headDim)
			t.add(p+"attn_k_norm.weight", roleF32, i, headDim)
			t.add(p+"attn_q.weight", "attn_q", i, s.Embd, s.Embd)
			t.add(p+"attn_k.weight", "attn_k", i, s.Embd, kvDim)
			t.add(p+"attn_v.weight", "attn_v", i, s.Embd, kvDim)
			t.add(p+"attn_output.weight", "attn_output", i, s.Embd, s.Embd)
		} else {
			t.add(p+"shortconv.conv.weight", roleF32, i, s.Conv.LCache, s.Embd)
			t.add(p+"shortconv.in_proj.weight", "attn_q", i, s.Embd, 3*s.Embd)
			t.add(p+"shortconv.out_proj.weight", "attn_output", i, s.Embd, s.Embd)
		}
	}
	output(t, s, "token_embd_norm.weight")
}

// mamba2Blocks: one fused input projection (z, x, B, C, dt), a depthwise
// convolution over x, B and C, per-head A, D and dt bias, a grouped norm.
func mamba2Blocks(t *tensors, s Shape) {
	m := s.SSM
	convDim := m.Inner + 2*m.Groups*m.State
	inProj := m.Inner + convDim + m.Heads
	t.add("token_embd.weight", "token_embd", -1, s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.add(p+"attn_norm.weight", roleF32, i, s.Embd)
		t.add(p+"ssm_in.weight", "attn_q", i, s.Embd, inProj)
		t.add(p+"ssm_conv1d.weight", roleF32, i, m.ConvKernel, convDim)
		t.add(p+"ssm_conv1d.bias", roleF32, i, convDim)
		t.add(p+"ssm_dt.bias", roleF32, i, m.Heads)
		t.add(p+"ssm_a", roleF32, i, 1, m.Heads)
		t.add(p+"ssm_d", roleF32, i, 1, m.Heads)
		t.add(p+"ssm_norm.weight", roleF32, i, m.Inner/m.Groups, m.Groups)
		t.add(p+"ssm_out.weight", "attn_output", i, m.Inner, s.Embd)
	}
	output(t, s, "output_norm.weight")
}

// deepseek2Blocks: MLA attention in the split form current converters write
// (attn_k_b and attn_v_b, per head, instead of one attn_kv_b), a dense FFN
// on the leading layers and routed plus shared experts on the rest.
func deepseek2Blocks(t *tensors, s Shape) {
	a, m := s.MLA, s.MoE
	t.add("token_embd.weight", "token_embd", -1, s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.add(p+"attn_norm.weight", roleF32, i, s.Embd)
		if a.QLoraRank > 0 {
			t.add(p+"attn_q_a_norm.weight", roleF32, i, a.QLoraRank)
			t.add(p+"attn_q_a.weight", "attn_q", i, s.Embd, a.QLoraRank)
			t.add(p+"attn_q_b.weight", "attn_q", i, a.QLoraRank, s.Heads*(a.NopeDim+a.RopeDim))
		} else {
			t.add(p+"attn_q.weight", "attn_q", i, s.Embd, s.Heads*(a.NopeDim+a.RopeDim))
		}
		t.add(p+"attn_kv_a_norm.weight", roleF32, i, a.KVLoraRank)
		t.add(p+"attn_kv_a_mqa.weight", "attn_k", i, s.Embd, a.KVLoraRank+a.RopeDim)
		t.add(p+"attn_k_b.weight", "attn_k", i, a.NopeDim, a.KVLoraRank, s.Heads)
		t.add(p+"attn_v_b.weight", "attn_v", i, a.KVLoraRank, a.VDim, s.Heads)
		t.add(p+"attn_output.weight", "attn_output", i, s.Heads*a.VDim, s.Embd)
		t.add(p+"ffn_norm.weight", roleF32, i, s.Embd)
		if i < m.LeadingDense {
			ffn(t, s, i, s.FF, "")
			continue
		}
		experts(t, s, i)
		ffn(t, s, i, m.FF*m.Shared, "_shexp")
	}
	output(t, s, "output_norm.weight")
}
