package arch

import "fmt"

// pending are the architectures whose weights, caches and output arch
// reads, held to llama-server's goldens by tests, but whose compute graph
// is not replayed: FromGGUF refuses them as unmodeled (the accountant's
// rough compute came 26-37% under llama-server's for deepseek32) until
// they move to families.
var pending = map[string]family{"deepseek32": {adjust: deepseek32}}

// Indexer is DeepSeek Sparse Attention's lightning indexer: Heads query
// heads of HeadDim against one cached key head of HeadDim a token, of which
// it keeps the TopK best-scoring tokens for MLA to attend to.
type Indexer struct {
	Heads, HeadDim, TopK int
}

// deepseek32 reads the indexer (llama_model_deepseek32::load_arch_hparams,
// where all three keys are required) and gives its keys their cache
// (llama_kv_cache_dsa): a second llama_kv_cache over the same layers, made
// from the model's hparams with one KV head of the indexer's width and MLA
// kept, so K only, in the cache's K type, whatever -ctv says. The trunk's
// filters leave the NextN blocks out of both caches: their draft head
// runs in a context of its own.
func deepseek32(h hparams, m *Model) error {
	if !m.MLA {
		// load_arch_tensors: "DEEPSEEK32 architecture requires MLA"
		return &Incompatible{Reason: "deepseek32 without attention.key_length_mla and value_length_mla: llama.cpp requires MLA"}
	}
	ix := &Indexer{}
	for _, k := range []struct {
		key string
		v   *int
	}{{"attention.indexer.head_count", &ix.Heads}, {"attention.indexer.key_length", &ix.HeadDim}, {"attention.indexer.top_k", &ix.TopK}} {
		n, err := h.need(k.key)
		if err != nil {
			return err
		}
		*k.v = n
	}
	if ix.Heads <= 0 || ix.HeadDim <= 0 || ix.TopK <= 0 {
		return &Incompatible{Reason: fmt.Sprintf("%sattention.indexer: %d heads of %d keeping %d tokens", h.prefix, ix.Heads, ix.HeadDim, ix.TopK)}
	}
	m.Indexer = ix
	nextn, err := h.opt("nextn_predict_layers", 0)
	if err != nil {
		return err
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		if i >= m.NLayer-nextn {
			l.Attention = NoAttention
			continue
		}
		if l.Attention != NoAttention {
			l.IndexKDim = ix.HeadDim
		}
	}
	return nil
}
