package synth

// deepseek32Blocks: deepseek2's MLA and experts (deepseek2Blocks) with the
// lightning indexer of DeepSeek Sparse Attention in every layer
// (llama_model_deepseek32::load_arch_tensors): its query projection from
// the q LoRA, its one key head from the layer input with a layer norm
// (weight and bias), and the per-head weights of its scores. The
// converter writes indexer.proj in F32 (DSA indexer weights should be
// F32); llama-quantize quantizes it like any matrix, so the F16 recipe is
// the only one that types it otherwise than a real file.
func deepseek32Blocks(t *tensors, s Shape) {
	deepseek2Blocks(t, s)
	d, qLora := s.DSA, s.MLA.QLoraRank
	for i := range s.Layers {
		p := blk(i) + "indexer."
		t.f32(p+"k_norm.weight", d.HeadDim)
		t.f32(p+"k_norm.bias", d.HeadDim)
		t.add(p+"proj.weight", s.Embd, d.Heads)
		t.add(p+"attn_k.weight", s.Embd, d.HeadDim)
		t.add(p+"attn_q_b.weight", qLora, d.Heads*d.HeadDim)
	}
}
