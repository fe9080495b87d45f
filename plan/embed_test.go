package plan

import (
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/synth"
)

// withEmbedding is p, from llama-server's defaults, asking for e.
func withEmbedding(p Profile, e *Embedding) Profile {
	p.Embedding = e
	return p
}

// The rules llama-server applies to an embedding server, each from its
// source (docs/embeddings.md), on the shapes the goldens measure.
func TestEmbeddingProfile(t *testing.T) {
	bge := model(t, "bge-small-en-v1.5", synth.Q8_0)
	rerank := model(t, "qwen3-reranker-0.6b", synth.Q8_0)
	chat := model(t, "qwen3-0.6b", synth.Q8_0)
	if !bge.Encoder || !bge.EmbeddingModel() || chat.EmbeddingModel() {
		t.Fatalf("encoder %v, embedding models %v %v", bge.Encoder, bge.EmbeddingModel(), chat.EmbeddingModel())
	}
	if e := EmbeddingFor(rerank); e == nil || !e.On || e.Pooling != "rank" || !slices.Equal(e.flags(), []string{"--rerank"}) {
		t.Errorf("a reranker is served with %+v", e)
	}
	if e := EmbeddingFor(bge); e == nil || !slices.Equal(e.flags(), []string{"--embedding"}) {
		t.Errorf("an encoder is served with %+v", e)
	}
	if EmbeddingFor(chat) != nil {
		t.Error("a chat model is served as an embedding model")
	}
	for _, tc := range []struct {
		name                string
		m                   string
		p                   Profile
		batch, ubatch, outs int
		pooling             int
		growth              bool
	}{
		// --embedding lowers -b to -ub, every token an output
		{"decoder embedding", "rerank", withEmbedding(Profile{Ctx: 4096, Parallel: 1}, &Embedding{On: true, Pooling: "rank"}), 512, 512, 512, 4, true},
		// an encoder's batch is not capped by its context
		{"encoder", "bge", withEmbedding(Profile{Ctx: 256, Parallel: 1, Batch: 1024, UBatch: 1024}, &Embedding{On: true}), 1024, 1024, 1024, 2, true},
		// without --embedding: one output a slot, the model's pooling unused
		{"decoder without", "rerank", Profile{Ctx: 4096, Parallel: 2}, 2048, 512, 2, 4, false},
		// --pooling alone: n_outputs_max is n_batch, but no embeddings
		{"pooling alone", "chat", withEmbedding(Profile{Ctx: 4096, Parallel: 1}, &Embedding{Pooling: "mean"}), 2048, 512, 2048, 1, false},
	} {
		m := map[string]*arch.Model{"bge": bge, "rerank": rerank, "chat": chat}[tc.m]
		r, err := Account(m, tc.p, Device{Name: "CPU", Backend: "CPU"}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c := r.Context
		if c.NBatch != tc.batch || c.NUBatch != tc.ubatch || c.NOutputsMax != tc.outs || c.Pooling != tc.pooling || c.Embeddings != (tc.p.Embeds()) {
			t.Errorf("%s: batch %d/%d, outputs %d, pooling %d, embeddings %v; want %d/%d, %d, %d", tc.name, c.NBatch, c.NUBatch, c.NOutputsMax, c.Pooling, c.Embeddings, tc.batch, tc.ubatch, tc.outs, tc.pooling)
		}
		grows := slices.ContainsFunc(r.Serving, func(b Buffer) bool { return b.Kind == KindOutputGrowth })
		if grows != tc.growth {
			t.Errorf("%s: output growth counted %v, want %v", tc.name, grows, tc.growth)
		}
	}
}
