package arch

import "fmt"

// encoderFirstLayer are the encoders' tensors outside blk.N that llama.cpp
// places with layer 0.
var encoderFirstLayer = []string{"token_embd_norm.weight", "token_embd_norm.bias"}

// Pooling types, as llama.cpp numbers them (enum llama_pooling_type).
const (
	PoolingNone = 0
	PoolingMean = 1
	PoolingCLS  = 2
	PoolingLast = 3
	PoolingRank = 4
)

// PoolingNames are the --pooling words of llama.cpp, by type.
var PoolingNames = []string{"none", "mean", "cls", "last", "rank"}

// embedding reads what an embedding or reranking model adds: the pooling
// the file asks for, and for an encoder family the absence of any memory.
func embedding(h hparams, fam family, a *Model) error {
	pooling, err := h.opt("pooling_type", PoolingNone)
	if err != nil {
		return err
	}
	if pooling < 0 || pooling > PoolingRank {
		return &Incompatible{Reason: fmt.Sprintf("pooling_type %d is not one llama.cpp knows (0 to %d)", pooling, PoolingRank)}
	}
	a.Pooling = pooling
	if !fam.encoder {
		return nil
	}
	a.Encoder = true
	for i := range a.Layers {
		a.Layers[i].Attention = NoAttention
	}
	return nil
}

// EmbeddingModel reports whether the model is made to embed or rerank
// rather than to generate: an encoder, or a file whose converter wrote a
// pooling type.
func (m *Model) EmbeddingModel() bool { return m.Encoder || m.Pooling != PoolingNone }
