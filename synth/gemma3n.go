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

// gemma3nBlocks follows load_arch_tensors in src/models/gemma3n.cpp: the
// Gemma 3 block plus, per layer, the per-layer input gate and projection,
// the AltUp router, prediction and correction coefficients, and the Laurel
// pair; and, outside the blocks, the per-layer token embedding (one row of
// PerLayerEmbd values per layer and token), its projection from the hidden
// state, and the AltUp projections in and out of the extra copies.
func gemma3nBlocks(t *tensors, s Shape) {
	a, headDim := s.AltUp, s.headDim()
	pl := a.PerLayerEmbd * s.Layers
	t.add("token_embd.weight", s.Embd, s.Vocab)
	t.add("altup_proj.weight", s.Embd, s.Embd, a.Inputs-1)
	t.add("altup_unembd_proj.weight", s.Embd, s.Embd, a.Inputs-1)
	t.add("per_layer_token_embd.weight", pl, s.Vocab)
	t.add("per_layer_model_proj.weight", s.Embd, pl)
	t.f32("per_layer_proj_norm.weight", a.PerLayerEmbd)
	for i := range s.Layers {
		p := blk(i)
		t.f32(p+"attn_norm.weight", s.Embd)
		attention(t, s, i)
		t.f32(p+"attn_q_norm.weight", headDim)
		t.f32(p+"attn_k_norm.weight", headDim)
		t.f32(p+"post_attention_norm.weight", s.Embd)
		t.f32(p+"ffn_norm.weight", s.Embd)
		ffn(t, s, i, s.FF, "")
		t.f32(p+"post_ffw_norm.weight", s.Embd)
		t.add(p+"inp_gate.weight", s.Embd, a.PerLayerEmbd)
		t.add(p+"proj.weight", a.PerLayerEmbd, s.Embd)
		t.f32(p+"post_norm.weight", s.Embd)
		t.add(p+"altup_correct_coef.weight", a.Inputs, a.Inputs)
		t.f32(p+"altup_correct_scale.weight", s.Embd)
		t.add(p+"altup_predict_coef.weight", a.Inputs, a.Inputs*a.Inputs)
		t.add(p+"altup_router.weight", s.Embd, a.Inputs)
		t.f32(p+"altup_router_norm.weight", s.Embd)
		t.add(p+"laurel_l.weight", s.Embd, a.LaurelRank)
		t.add(p+"laurel_r.weight", a.LaurelRank, s.Embd)
		t.f32(p+"laurel_post_norm.weight", s.Embd)
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
