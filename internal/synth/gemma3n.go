package synth

import (
	"math"

	"github.com/headroom-llm/headroom/gguf"
)

// AltUp describes what Gemma 3n adds to a Gemma 3 block: per-layer input
// embeddings, alternating updates over several copies of the hidden state
// (AltUp), Laurel low-rank residuals, and the sharing of earlier layers' KV
// caches by the last layers.
type AltUp struct {
	Inputs       int // altup_num_inputs: copies of the hidden state
	ActiveIdx    int // altup_active_idx
	PerLayerEmbd int // hidden_size_per_layer_input
	LaurelRank   int // laurel_rank
	SharedKV     int // num_kv_shared_layers
	// SparseLayers is how many leading layers have an activation sparsity
	// of 0.95 (activation_sparsity_pattern); the others have none.
	SparseLayers int
	// Period marks every Period-th layer global, the others sliding
	// (layer_types), which the converter writes as one bool per layer.
	Period int
}

// roleSource marks tensors llama.cpp's quantizer leaves in the type the
// converter wrote (F16 here): Gemma 3n's AltUp and Laurel weights and its
// per-layer model projection (tensor_allows_quantization in
// llama-quant.cpp).
const roleSource = "source"

// gemma3nBlocks follows load_arch_tensors in src/models/gemma3n.cpp: the
// Gemma 3 block plus, per layer, the per-layer input gate and projection,
// the AltUp router, prediction and correction coefficients, and the Laurel
// pair; and, outside the blocks, the per-layer token embedding (one row of
// PerLayerEmbd values per layer and token), its projection from the hidden
// state, and the AltUp projections in and out of the extra copies.
func gemma3nBlocks(t *tensors, s Shape) {
	a, headDim := s.AltUp, s.headDim()
	pl := a.PerLayerEmbd * s.Layers
	t.add("token_embd.weight", "token_embd", -1, s.Embd, s.Vocab)
	t.add("altup_proj.weight", roleSource, -1, s.Embd, s.Embd, a.Inputs-1)
	t.add("altup_unembd_proj.weight", roleSource, -1, s.Embd, s.Embd, a.Inputs-1)
	t.add("per_layer_token_embd.weight", "token_embd", -1, pl, s.Vocab)
	t.add("per_layer_model_proj.weight", roleSource, 0, s.Embd, pl)
	t.add("per_layer_proj_norm.weight", roleF32, 0, a.PerLayerEmbd)
	for i := range s.Layers {
		p := blk(i)
		t.add(p+"attn_norm.weight", roleF32, i, s.Embd)
		attention(t, s, i)
		t.add(p+"attn_q_norm.weight", roleF32, i, headDim)
		t.add(p+"attn_k_norm.weight", roleF32, i, headDim)
		t.add(p+"post_attention_norm.weight", roleF32, i, s.Embd)
		t.add(p+"ffn_norm.weight", roleF32, i, s.Embd)
		ffn(t, s, i, s.FF, "")
		t.add(p+"post_ffw_norm.weight", roleF32, i, s.Embd)
		t.add(p+"inp_gate.weight", "attn_q", i, s.Embd, a.PerLayerEmbd)
		t.add(p+"proj.weight", "attn_output", i, a.PerLayerEmbd, s.Embd)
		t.add(p+"post_norm.weight", roleF32, i, s.Embd)
		t.add(p+"altup_correct_coef.weight", roleSource, i, a.Inputs, a.Inputs)
		t.add(p+"altup_correct_scale.weight", roleF32, i, s.Embd)
		t.add(p+"altup_predict_coef.weight", roleSource, i, a.Inputs, a.Inputs*a.Inputs)
		t.add(p+"altup_router.weight", roleSource, i, s.Embd, a.Inputs)
		t.add(p+"altup_router_norm.weight", roleF32, i, s.Embd)
		t.add(p+"laurel_l.weight", roleSource, i, s.Embd, a.LaurelRank)
		t.add(p+"laurel_r.weight", roleSource, i, a.LaurelRank, s.Embd)
		t.add(p+"laurel_post_norm.weight", roleF32, i, s.Embd)
	}
	output(t, s, "output_norm.weight")
}

// altUpMetadata writes the keys Gemma 3n's converter adds (Gemma3NModel in
// llama.cpp's conversion/gemma.py). llama.cpp itself reads none of them but
// the window: it hard-codes four AltUp inputs, a Laurel rank of 64, 256
// per-layer values, KV in the first 20 layers and a sliding-window period
// of 5, which the tensor shapes then have to agree with.
func altUpMetadata(b *gguf.Builder, s Shape) {
	a, arch := s.AltUp, s.Arch
	u32 := func(key string, v int) { b.Set(arch+"."+key, gguf.Uint32Value(uint32(v))) }
	u32("altup.active_idx", a.ActiveIdx)
	u32("altup.num_inputs", a.Inputs)
	u32("embedding_length_per_layer_input", a.PerLayerEmbd)
	u32("attention.shared_kv_layers", a.SharedKV)
	// intermediate_size is a list in the config, so the converter writes
	// one width per layer.
	ff := make([]int32, s.Layers)
	scale := make([]float32, s.Layers)
	swa := make([]gguf.Value, s.Layers)
	for i := range s.Layers {
		ff[i] = int32(s.FF)
		// normal_dist.icdf(p): 0.95 gives 1.6448534, 0 gives -inf.
		scale[i] = float32(math.Inf(-1))
		if i < a.SparseLayers {
			scale[i] = 1.6448533535003662
		}
		swa[i] = gguf.BoolValue(a.Period == 0 || i%a.Period != a.Period-1)
	}
	b.Set(arch+".feed_forward_length", gguf.Int32sValue(ff))
	b.Set(arch+".activation_sparsity_scale", gguf.Float32sValue(scale))
	pattern, _ := gguf.ArrayOf(gguf.Bool, swa...)
	b.Set(arch+".attention.sliding_window_pattern", pattern)
}
