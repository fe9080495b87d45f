package plan

import (
	"fmt"
	"slices"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/graph"
)

// Embedding is how llama-server is asked to embed or rerank
// (--embedding, --pooling, --rerank).
type Embedding struct {
	// On is --embedding (cparams.embeddings): the server answers
	// /v1/embeddings (and with rank pooling /v1/rerank) and nothing
	// else, every prompt token is an output, and n_batch is lowered to
	// n_ubatch.
	On bool `json:"embedding"`
	// Pooling is --pooling (none, mean, cls, last, rank); "" is the
	// model's own. --rerank is On with rank pooling.
	Pooling string `json:"pooling,omitempty"`
}

// embeddingCtx is the most cells per slot a search gives an embedding
// server unless --min-ctx, -c or --goal context asks for more: the
// longest input a slot embeds.
const embeddingCtx = 8192

// KindOutputGrowth is the output buffer grown to a full batch of
// outputs: an embedding server makes every prompt token an output
// (server-context.cpp adds them with output = need_embd()), and
// llama_context::output_reserve reallocates the buffer for them.
const KindOutputGrowth BufferKind = "output_growth"

// ParsePooling checks a --pooling word.
func ParsePooling(s string) error {
	if !slices.Contains(arch.PoolingNames, s) {
		return fmt.Errorf("--pooling %q: want one of none, mean, cls, last, rank", s)
	}
	return nil
}

// EmbeddingFor is how the model is served when nothing says otherwise:
// an embedding or reranking model (an encoder, or a file with a pooling
// type) with --embedding, a reranker (rank pooling) with --rerank; nil
// for a generating model.
func EmbeddingFor(m *arch.Model) *Embedding {
	if !m.EmbeddingModel() {
		return nil
	}
	e := &Embedding{On: true}
	if m.Pooling == arch.PoolingRank {
		e.Pooling = "rank"
	}
	return e
}

// flags writes --embedding, --rerank or --pooling.
func (e *Embedding) flags() []string {
	switch {
	case e == nil:
		return nil
	case e.On && e.Pooling == "rank":
		return []string{"--rerank"}
	case e.On && e.Pooling != "":
		return []string{"--embedding", "--pooling", e.Pooling}
	case e.On:
		return []string{"--embedding"}
	case e.Pooling != "":
		return []string{"--pooling", e.Pooling}
	}
	return nil
}

// Embeds reports whether the profile is an embedding server
// (--embedding, or --rerank).
func (p Profile) Embeds() bool { return p.Embedding != nil && p.Embedding.On }

// pooled reports whether --pooling asks for a pooling other than none.
func (p Profile) pooled() bool {
	return p.Embedding != nil && p.Embedding.Pooling != "" && p.Embedding.Pooling != "none"
}

// pooling is the context's pooling type: --pooling, else the model's.
func (p Profile) pooling(m *arch.Model) int {
	if p.Embedding != nil && p.Embedding.Pooling != "" {
		return slices.Index(arch.PoolingNames, p.Embedding.Pooling)
	}
	return m.Pooling
}

// embeddingWarning says what a profile without --embedding (or
// --rerank) does with a model made to embed or rerank, or what one with it
// does with a generating model; "" when they match.
func embeddingWarning(m *arch.Model, p Profile) string {
	if p.Program.OrServer() != ProgramServer && p.Program.OrServer() != ProgramCLI {
		return ""
	}
	want := EmbeddingFor(m)
	switch {
	case want != nil && !p.Embeds():
		flag := "--embedding"
		if want.Pooling == "rank" {
			flag = "--rerank"
		}
		return fmt.Sprintf("this is an embedding model (%s): llama-server answers /v1/embeddings and /v1/rerank only when started with --embedding or --rerank, which change its memory; the figures are for a server without it (plan and serve give it %s)",
			embeddingKind(m), flag)
	case want == nil && p.Embeds():
		return "--embedding on a generating model: llama-server then makes every prompt token an output, with logits, and serves no completion; the figures are for that"
	}
	return ""
}

// embeddingKind names what the model is for, for a sentence.
func embeddingKind(m *arch.Model) string {
	if m.Pooling == arch.PoolingRank {
		return "a reranker"
	}
	if m.Encoder {
		return "an encoder, with " + arch.PoolingNames[m.Pooling] + " pooling"
	}
	return arch.PoolingNames[m.Pooling] + " pooling"
}

// outputGrowthOf is the output buffer's growth an assessment counts
// while serving.
func outputGrowthOf(a *Assessment) int64 {
	var grow int64
	for _, b := range a.Serving {
		if b.Kind == KindOutputGrowth {
			grow += b.Bytes
		}
	}
	return grow
}

// outputGrowth is what the output buffer grows to while an embedding
// server serves: a full batch of outputs, logits and embeddings, beyond
// the one row per slot reserved at load. It is host memory, counted in
// the CPU's buffer type (llama.cpp takes it from a GPU's host buffer type
// where the output layer is on that GPU: host memory too).
func outputGrowth(m *arch.Model, c graph.Context, p Profile, cpu Device) []Buffer {
	if !p.Embeds() || p.loadOnly {
		return nil
	}
	row := 4 * int64(m.NVocab+m.NEmbd)
	grow := row * int64(c.NBatch-max(c.NSeq, 1))
	if grow <= 0 {
		return nil
	}
	return []Buffer{{Device: cpu.Name, BufferType: cpu.Name, Kind: KindOutputGrowth, Bytes: grow,
		Note: fmt.Sprintf("the output buffer at a full batch of %d outputs (every prompt token of an embedding task), %d floats each", c.NBatch, m.NVocab+m.NEmbd)}}
}
