package synth

// The tensor layouts below follow each architecture's load_arch_tensors in
// llama.cpp (src/models/<arch>.cpp): names from src/llama-arch.cpp, shapes
// in ggml order (ne0 first). A tensor llama.cpp requires and the file lacks
// makes the load fail, so a successful load checks these layouts.

// archBlocks maps general.architecture to the function that writes its
// tensors; architectures not listed use the dense llama layout.
var archBlocks = map[string]func(*tensors, Shape){
	"qwen3moe":      denseBlocks,
	"smollm3":       denseBlocks,
	"phi3":          phi3Blocks,
	"gemma3":        gemma3Blocks,
	"gpt-oss":       gptOSSBlocks,
	"lfm2":          lfm2Blocks,
	"mamba2":        mamba2Blocks,
	"deepseek2":     deepseek2Blocks,
	"deepseek32":    deepseek32Blocks,
	"gemma2":        gemma3Blocks,
	"olmo2":         olmo2Blocks,
	"cohere2":       cohere2Blocks,
	"qwen2moe":      qwen2moeBlocks,
	"granitehybrid": hybridBlocks,
	"nemotron_h":    hybridBlocks,
	"falcon-h1":     falconH1Blocks,
	"glm4moe":       glm4moeBlocks,
	"llama4":        llama4Blocks,
	"qwen3next":     qwen3nextBlocks,
	"qwen35":        qwen35Blocks,
	"qwen35moe":     qwen35Blocks,
	"gemma3n":       gemma3nBlocks,
	"gemma4":        gemma4Blocks,
	"gptneox":       gptneoxBlocks,
	"minimax-m2":    minimaxM2Blocks,
	"bert":          bertBlocks,
	"nomic-bert":    nomicBertBlocks,
}

// output writes the final norm and, unless the embedding is tied, the
// output projection.
func output(t *tensors, s Shape, normName string) {
	t.f32(normName, s.Embd)
	if !s.TiedOutput {
		t.add("output.weight", s.Embd, s.Vocab)
	}
}

// experts writes a routed-expert FFN: the F32 router and the three 3-D
// expert tensors.
func experts(t *tensors, s Shape, i int) {
	p, m := blk(i), s.MoE
	t.f32(p+"ffn_gate_inp.weight", s.Embd, m.Experts)
	t.add(p+"ffn_gate_exps.weight", s.Embd, m.FF, m.Experts)
	t.add(p+"ffn_up_exps.weight", s.Embd, m.FF, m.Experts)
	t.add(p+"ffn_down_exps.weight", m.FF, s.Embd, m.Experts)
}

// ffn writes a dense SwiGLU FFN of width ff.
func ffn(t *tensors, s Shape, i, ff int, suffix string) {
	p := blk(i)
	t.add(p+"ffn_gate"+suffix+".weight", s.Embd, ff)
	t.add(p+"ffn_up"+suffix+".weight", s.Embd, ff)
	t.add(p+"ffn_down"+suffix+".weight", ff, s.Embd)
}

// denseBlocks is the llama layout (llama, qwen2, qwen3, mistral3) and, with
// MoE set, qwen3moe's.
func denseBlocks(t *tensors, s Shape) {
	headDim := s.headDim()
	if s.Tokenizer == "gpt2" && s.Arch == "llama" {
		// Llama 3's rope scaling factors.
		t.f32("rope_freqs.weight", headDim/2)
	}
	t.add("token_embd.weight", s.Embd, s.Vocab)
	qDim, kvDim := s.Heads*headDim, s.HeadsKV*headDim
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		t.add(p+"attn_q.weight", s.Embd, qDim)
		t.add(p+"attn_k.weight", s.Embd, kvDim)
		t.add(p+"attn_v.weight", s.Embd, kvDim)
		if s.QKVBias {
			t.f32(p+"attn_q.bias", qDim)
			t.f32(p+"attn_k.bias", kvDim)
			t.f32(p+"attn_v.bias", kvDim)
		}
		if s.QKNorm {
			t.f32(p+"attn_q_norm.weight", headDim)
			t.f32(p+"attn_k_norm.weight", headDim)
		}
		t.add(p+"attn_output.weight", qDim, s.Embd)
		t.f32(p+"ffn_norm.weight", s.Embd)
		if s.MoE != nil {
			experts(t, s, i)
		} else {
			ffn(t, s, i, s.FF, "")
		}
	}
	output(t, s, "output_norm.weight")
	clsHead(t, s) // a reranker's classifier (Qwen3-Reranker)
}

// phi3Blocks: one attn_qkv, and ffn_up holding gate and up side by side.
func phi3Blocks(t *tensors, s Shape) {
	kvDim := s.HeadsKV * s.headDim()
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		t.add(p+"attn_qkv.weight", s.Embd, s.Embd+2*kvDim)
		t.add(p+"attn_output.weight", s.Embd, s.Embd)
		t.f32(p+"ffn_norm.weight", s.Embd)
		t.add(p+"ffn_up.weight", s.Embd, 2*s.FF)
		t.add(p+"ffn_down.weight", s.FF, s.Embd)
	}
	output(t, s, "output_norm.weight")
}

// gemma3Blocks: post-attention and post-FFN norms around every sublayer, and
// q/k norms (gemma3; gemma2 has none); the output is tied to the embedding.
func gemma3Blocks(t *tensors, s Shape) {
	headDim := s.headDim()
	qDim, kvDim := s.Heads*headDim, s.HeadsKV*headDim
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		t.add(p+"attn_q.weight", s.Embd, qDim)
		t.add(p+"attn_k.weight", s.Embd, kvDim)
		t.add(p+"attn_v.weight", s.Embd, kvDim)
		t.add(p+"attn_output.weight", qDim, s.Embd)
		t.f32(p+"post_attention_norm.weight", s.Embd)
		if s.QKNorm {
			t.f32(p+"attn_k_norm.weight", headDim)
			t.f32(p+"attn_q_norm.weight", headDim)
		}
		t.f32(p+"ffn_norm.weight", s.Embd)
		ffn(t, s, i, s.FF, "")
		t.f32(p+"post_ffw_norm.weight", s.Embd)
	}
	output(t, s, "output_norm.weight")
}

// gptOSSBlocks: biases on every projection, per-head attention sinks, a
// biased router and biased experts; post_attention_norm is the FFN norm.
func gptOSSBlocks(t *tensors, s Shape) {
	headDim := s.headDim()
	qDim, kvDim := s.Heads*headDim, s.HeadsKV*headDim
	m := s.MoE
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		t.add(p+"attn_q.weight", s.Embd, qDim)
		t.f32(p+"attn_q.bias", qDim)
		t.add(p+"attn_k.weight", s.Embd, kvDim)
		t.f32(p+"attn_k.bias", kvDim)
		t.add(p+"attn_v.weight", s.Embd, kvDim)
		t.f32(p+"attn_v.bias", kvDim)
		t.add(p+"attn_output.weight", qDim, s.Embd)
		t.f32(p+"attn_output.bias", s.Embd)
		t.f32(p+"attn_sinks.weight", s.Heads)
		t.f32(p+"post_attention_norm.weight", s.Embd)
		experts(t, s, i)
		t.f32(p+"ffn_gate_inp.bias", m.Experts)
		t.f32(p+"ffn_gate_exps.bias", m.FF, m.Experts)
		t.f32(p+"ffn_up_exps.bias", m.FF, m.Experts)
		t.f32(p+"ffn_down_exps.bias", s.Embd, m.Experts)
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
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"ffn_norm.weight", s.Embd)
		ffn(t, s, i, s.FF, "")
		t.f32(p+"attn_norm.weight", s.Embd)
		if attn[i] {
			kvDim := s.HeadsKV * headDim
			t.f32(p+"attn_q_norm.weight", headDim)
			t.f32(p+"attn_k_norm.weight", headDim)
			t.add(p+"attn_q.weight", s.Embd, s.Embd)
			t.add(p+"attn_k.weight", s.Embd, kvDim)
			t.add(p+"attn_v.weight", s.Embd, kvDim)
			t.add(p+"attn_output.weight", s.Embd, s.Embd)
		} else {
			t.f32(p+"shortconv.conv.weight", s.Conv.LCache, s.Embd)
			t.add(p+"shortconv.in_proj.weight", s.Embd, 3*s.Embd)
			t.add(p+"shortconv.out_proj.weight", s.Embd, s.Embd)
		}
	}
	output(t, s, "token_embd_norm.weight")
}

// mamba2Blocks: one fused input projection (z, x, B, C, dt), a depthwise
// convolution over x, B and C, per-head A, D and dt bias, a grouped norm.
func mamba2Blocks(t *tensors, s Shape) {
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		t.f32(blk(i)+"attn_norm.weight", s.Embd)
		mamba2Mixer(t, s, i)
	}
	output(t, s, "output_norm.weight")
}

// deepseek2Blocks: MLA attention in the split form current converters write
// (attn_k_b and attn_v_b, per head, instead of one attn_kv_b), a dense FFN
// on the leading layers and routed plus shared experts on the rest.
func deepseek2Blocks(t *tensors, s Shape) {
	a, m := s.MLA, s.MoE
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		if a.QLoraRank > 0 {
			t.f32(p+"attn_q_a_norm.weight", a.QLoraRank)
			t.add(p+"attn_q_a.weight", s.Embd, a.QLoraRank)
			t.add(p+"attn_q_b.weight", a.QLoraRank, s.Heads*(a.NopeDim+a.RopeDim))
		} else {
			t.add(p+"attn_q.weight", s.Embd, s.Heads*(a.NopeDim+a.RopeDim))
		}
		t.f32(p+"attn_kv_a_norm.weight", a.KVLoraRank)
		t.add(p+"attn_kv_a_mqa.weight", s.Embd, a.KVLoraRank+a.RopeDim)
		t.add(p+"attn_k_b.weight", a.NopeDim, a.KVLoraRank, s.Heads)
		t.add(p+"attn_v_b.weight", a.KVLoraRank, a.VDim, s.Heads)
		t.add(p+"attn_output.weight", s.Heads*a.VDim, s.Embd)
		t.f32(p+"ffn_norm.weight", s.Embd)
		if i < m.LeadingDense {
			ffn(t, s, i, s.FF, "")
			continue
		}
		experts(t, s, i)
		if m.GatingFunc == 2 {
			// V3's sigmoid router selects with a bias
			// (e_score_correction_bias); V2's softmax has none.
			t.f32(p+"exp_probs_b.bias", m.Experts)
		}
		ffn(t, s, i, m.FF*m.Shared, "_shexp")
	}
	output(t, s, "output_norm.weight")
}

// attention writes q, k, v (and their biases when s.QKVBias) and the
// output projection of layer i.
func attention(t *tensors, s Shape, i int) {
	p, headDim := blk(i), s.headDim()
	qDim, kvDim := s.Heads*headDim, s.HeadsKV*headDim
	t.add(p+"attn_q.weight", s.Embd, qDim)
	t.add(p+"attn_k.weight", s.Embd, kvDim)
	t.add(p+"attn_v.weight", s.Embd, kvDim)
	if s.QKVBias {
		t.f32(p+"attn_q.bias", qDim)
		t.f32(p+"attn_k.bias", kvDim)
		t.f32(p+"attn_v.bias", kvDim)
	}
	t.add(p+"attn_output.weight", qDim, s.Embd)
}

// olmo2Blocks: no pre-norms; q and k are normalized over all heads at once
// (q_norm of n_embd, k_norm of the KV width), and post-attention and
// post-FFN norms close each sublayer.
func olmo2Blocks(t *tensors, s Shape) {
	kvDim := s.HeadsKV * s.headDim()
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		attention(t, s, i)
		t.f32(p+"attn_q_norm.weight", s.Embd)
		t.f32(p+"attn_k_norm.weight", kvDim)
		t.f32(p+"post_attention_norm.weight", s.Embd)
		ffn(t, s, i, s.FF, "")
		t.f32(p+"post_ffw_norm.weight", s.Embd)
	}
	output(t, s, "output_norm.weight")
}

// cohere2Blocks: one layer norm (weight only) feeds attention and the FFN in
// parallel; the output is tied to the embedding.
func cohere2Blocks(t *tensors, s Shape) {
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		attention(t, s, i)
		t.add(p+"ffn_gate.weight", s.Embd, s.FF)
		t.add(p+"ffn_down.weight", s.FF, s.Embd)
		t.add(p+"ffn_up.weight", s.Embd, s.FF)
	}
	output(t, s, "output_norm.weight")
}

// qwen2moeBlocks: routed experts plus one shared expert of MoE.SharedFF
// columns behind a one-row sigmoid gate (ffn_gate_inp_shexp).
func qwen2moeBlocks(t *tensors, s Shape) {
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		attention(t, s, i)
		t.f32(p+"ffn_norm.weight", s.Embd)
		experts(t, s, i)
		t.f32(p+"ffn_gate_inp_shexp.weight", s.Embd)
		ffn(t, s, i, s.MoE.SharedFF, "_shexp")
	}
	output(t, s, "output_norm.weight")
}

// mamba2Mixer writes one Mamba-2 mixer without its norm: the layer of
// mamba2Blocks, and the Mamba layers of the hybrids.
func mamba2Mixer(t *tensors, s Shape, i int) {
	p, m := blk(i), s.SSM
	convDim := m.Inner + 2*m.Groups*m.State
	t.add(p+"ssm_in.weight", s.Embd, m.Inner+convDim+m.Heads)
	t.f32(p+"ssm_conv1d.weight", m.ConvKernel, convDim)
	t.f32(p+"ssm_conv1d.bias", convDim)
	t.f32(p+"ssm_dt.bias", m.Heads)
	t.f32(p+"ssm_a", 1, m.Heads)
	t.f32(p+"ssm_d", 1, m.Heads)
	t.f32(p+"ssm_norm.weight", m.Inner/m.Groups, m.Groups)
	t.add(p+"ssm_out.weight", m.Inner, s.Embd)
}

// hybridBlocks: granitehybrid and nemotron_h, whose layers are Mamba-2 or
// attention as SSM.Layers says. Granite follows every mixer with a SwiGLU
// FFN; Nemotron-H has MLP-only layers ('-') of up and down projections
// (squared ReLU, no gate) and no FFN elsewhere.
func hybridBlocks(t *tensors, s Shape) {
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i, kind := range s.SSM.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		switch kind {
		case 'M':
			mamba2Mixer(t, s, i)
		case '*':
			attention(t, s, i)
		case '-':
			t.add(p+"ffn_down.weight", s.FF, s.Embd)
			t.add(p+"ffn_up.weight", s.Embd, s.FF)
		}
		if s.Arch == "granitehybrid" {
			t.f32(p+"ffn_norm.weight", s.Embd)
			t.add(p+"ffn_gate.weight", s.Embd, s.FF)
			t.add(p+"ffn_down.weight", s.FF, s.Embd)
			t.add(p+"ffn_up.weight", s.Embd, s.FF)
		}
	}
	output(t, s, "output_norm.weight")
}

// falconH1Blocks: every layer runs a Mamba-2 mixer and attention in
// parallel, then a SwiGLU FFN. llama.cpp names the FFN norm without a
// ".weight" suffix (tn(LLM_TENSOR_FFN_NORM, i) in src/models/falcon-h1.cpp).
func falconH1Blocks(t *tensors, s Shape) {
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		mamba2Mixer(t, s, i)
		attention(t, s, i)
		t.f32(p+"attn_norm.weight", s.Embd)
		t.f32(p+"ffn_norm", s.Embd)
		t.add(p+"ffn_gate.weight", s.Embd, s.FF)
		t.add(p+"ffn_down.weight", s.FF, s.Embd)
		t.add(p+"ffn_up.weight", s.Embd, s.FF)
	}
	output(t, s, "output_norm.weight")
}

// glm4moeBlocks: biased q/k/v, a post-attention norm before the FFN, a
// dense FFN on the leading layers and sigmoid-routed experts (with a
// selection bias exp_probs_b) plus shared experts on the others; the last
// MoE.NextN blocks are MTP heads with their own input fusion.
func glm4moeBlocks(t *tensors, s Shape) {
	m := s.MoE
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		attention(t, s, i)
		if s.QKNorm { // GLM-4.5, 4.6 and 4.7 (use_qk_norm); not the Air
			t.f32(p+"attn_q_norm.weight", s.headDim())
			t.f32(p+"attn_k_norm.weight", s.headDim())
		}
		t.f32(p+"post_attention_norm.weight", s.Embd)
		if i < m.LeadingDense {
			ffn(t, s, i, s.FF, "")
		} else {
			experts(t, s, i)
			t.f32(p+"exp_probs_b.bias", m.Experts)
			ffn(t, s, i, m.FF*m.Shared, "_shexp")
		}
		if i >= s.Layers-m.NextN {
			t.add(p+"nextn.eh_proj.weight", 2*s.Embd, s.Embd)
			t.f32(p+"nextn.enorm.weight", s.Embd)
			t.f32(p+"nextn.hnorm.weight", s.Embd)
			t.f32(p+"nextn.shared_head_norm.weight", s.Embd)
		}
	}
	output(t, s, "output_norm.weight")
}

// llama4Blocks: every MoE.Step-th layer has routed experts and one shared
// expert of the expert width, the others a dense FFN of Shape.FF.
func llama4Blocks(t *tensors, s Shape) {
	m := s.MoE
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		attention(t, s, i)
		t.f32(p+"ffn_norm.weight", s.Embd)
		if m.Step > 0 && (i+1)%m.Step == 0 {
			experts(t, s, i)
			ffn(t, s, i, m.FF, "_shexp")
		} else {
			ffn(t, s, i, s.FF, "")
		}
	}
	output(t, s, "output_norm.weight")
}

// qwen3nextBlocks: every layer has a post-attention norm and routed plus
// one shared expert behind a sigmoid gate; attention layers (every
// SSM.AttnInterval-th) project Q together with its output gate (twice the
// query width) and norm q and k per head; the other layers are gated
// DeltaNet in the split form current converters write (attn_qkv and
// attn_gate rather than the legacy ssm_in), with a depthwise convolution
// over Q, K and V, per-head A and dt bias, beta/alpha projections and a
// per-head norm.
func qwen3nextBlocks(t *tensors, s Shape) {
	m := s.MoE
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		gatedMixer(t, s, i, false)
		experts(t, s, i)
		t.f32(p+"ffn_gate_inp_shexp.weight", s.Embd)
		ffn(t, s, i, m.SharedFF, "_shexp")
	}
	output(t, s, "output_norm.weight")
}

// gatedMixer writes a Qwen3-Next or Qwen3.5 layer's norms and mixer: gated
// attention on every SSM.AttnInterval-th layer, gated DeltaNet on the
// others, whose beta and alpha projections are one ssm_ba (Qwen3-Next) or
// apart (splitBA: Qwen3.5's ssm_beta and ssm_alpha).
func gatedMixer(t *tensors, s Shape, i int, splitBA bool) {
	d, p := s.SSM, blk(i)
	keyDim, valueDim := d.Groups*d.State, d.Heads*d.State
	if (i+1)%d.AttnInterval == 0 {
		gatedAttention(t, s, i)
		return
	}
	t.f32(p+"attn_norm.weight", s.Embd)
	t.f32(p+"post_attention_norm.weight", s.Embd)
	t.add(p+"attn_qkv.weight", s.Embd, 2*keyDim+valueDim)
	t.add(p+"attn_gate.weight", s.Embd, valueDim)
	t.f32(p+"ssm_conv1d.weight", d.ConvKernel, 2*keyDim+valueDim)
	t.f32(p+"ssm_dt.bias", d.Heads)
	t.f32(p+"ssm_a", d.Heads)
	if splitBA {
		t.add(p+"ssm_beta.weight", s.Embd, d.Heads)
		t.add(p+"ssm_alpha.weight", s.Embd, d.Heads)
	} else {
		t.add(p+"ssm_ba.weight", s.Embd, 2*d.Heads)
	}
	t.f32(p+"ssm_norm.weight", d.State)
	t.add(p+"ssm_out.weight", valueDim, s.Embd)
}

// gatedAttention writes a gated-attention layer's norms and projections
// (Q with its output gate, per-head q and k norms).
func gatedAttention(t *tensors, s Shape, i int) {
	p, headDim := blk(i), s.headDim()
	qDim, kvDim := s.Heads*headDim, s.HeadsKV*headDim
	t.f32(p+"attn_norm.weight", s.Embd)
	t.f32(p+"post_attention_norm.weight", s.Embd)
	t.add(p+"attn_q.weight", s.Embd, 2*qDim)
	t.add(p+"attn_k.weight", s.Embd, kvDim)
	t.add(p+"attn_v.weight", s.Embd, kvDim)
	t.add(p+"attn_output.weight", qDim, s.Embd)
	t.f32(p+"attn_q_norm.weight", headDim)
	t.f32(p+"attn_k_norm.weight", headDim)
}

// qwen35Blocks: Qwen3-Next's layers with a dense FFN (or, for qwen35moe,
// Qwen3-Next's experts), and the DeltaNet's
// beta and alpha projections apart (ssm_beta, ssm_alpha: in_proj_b and
// in_proj_a) where Qwen3-Next fuses them (ssm_ba), as llama.cpp's
// Qwen3_5TextModel converter names them.
func qwen35Blocks(t *tensors, s Shape) {
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers + s.mtp() {
		p := blk(i)
		if i < s.Layers {
			gatedMixer(t, s, i, true)
		} else {
			// An MTP block: a gated-attention layer whatever the
			// interval says, and the NextN projections.
			gatedAttention(t, s, i)
			t.add(p+"nextn.eh_proj.weight", 2*s.Embd, s.Embd)
			t.f32(p+"nextn.enorm.weight", s.Embd)
			t.f32(p+"nextn.hnorm.weight", s.Embd)
			t.f32(p+"nextn.shared_head_norm.weight", s.Embd)
		}
		if m := s.MoE; m != nil {
			// qwen35moe: Qwen3-Next's routed experts and gated shared
			// expert.
			experts(t, s, i)
			t.f32(p+"ffn_gate_inp_shexp.weight", s.Embd)
			ffn(t, s, i, m.SharedFF, "_shexp")
		} else {
			ffn(t, s, i, s.FF, "")
		}
	}
	output(t, s, "output_norm.weight")
}

// gptneoxBlocks: layer norms with biases, one fused attn_qkv, and every
// projection with its bias (all required by gptneox.cpp's loader); the
// output is its own matrix.
func gptneoxBlocks(t *tensors, s Shape) {
	qkv := s.Embd + 2*s.HeadsKV*s.headDim()
	t.add("token_embd.weight", s.Embd, s.Vocab)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		t.f32(p+"attn_norm.bias", s.Embd)
		t.add(p+"attn_qkv.weight", s.Embd, qkv)
		t.f32(p+"attn_qkv.bias", qkv)
		t.add(p+"attn_output.weight", s.Embd, s.Embd)
		t.f32(p+"attn_output.bias", s.Embd)
		t.f32(p+"ffn_norm.weight", s.Embd)
		t.f32(p+"ffn_norm.bias", s.Embd)
		t.add(p+"ffn_up.weight", s.Embd, s.FF)
		t.f32(p+"ffn_up.bias", s.FF)
		t.add(p+"ffn_down.weight", s.FF, s.Embd)
		t.f32(p+"ffn_down.bias", s.Embd)
	}
	t.f32("output_norm.weight", s.Embd)
	t.f32("output_norm.bias", s.Embd)
	t.add("output.weight", s.Embd, s.Vocab)
}
