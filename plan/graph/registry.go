package graph

import (
	"maps"
	"slices"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// graphFunc records one model's graph for one micro-batch of nTokens
// against a full cache, with b's placement of weights and caches, in the
// order ggml records it.
type graphFunc func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph

// family is one family of llama.cpp's graphs, after one of its
// src/models/*.cpp or a few built alike; its value holds what sets the
// architectures of the family apart.
type family interface {
	// graphOf checks the model's tensors and returns its graph, or nil
	// for a model whose graph the family does not describe.
	graphOf(m *arch.Model) graphFunc
}

// families maps each architecture headroom replays to its family. It is
// the only place the graph replay tells architectures apart by name.
func families() map[string]family {
	return map[string]family{
		"llama":     llama{ropeFreqs: true},
		"mistral3":  llama{},
		"qwen2":     llama{},
		"qwen3":     llama{},
		"olmo2":     olmo2{},
		"smollm3":   llama{noRopeStep: 4},
		"granite":   granite{},
		"gptneox":   gptneox{},
		"gemma2":    gemma{softcap: true},
		"gemma3":    gemma{qkNorm: true},
		"cohere2":   cohere2{},
		"phi3":      phi3{},
		"qwen2moe":  qwen2moeArch(),
		"qwen3moe":  qwen3moeArch(),
		"gpt-oss":   openaiMoEArch(),
		"llama4":    llama4Arch(),
		"deepseek2": deepseek2{},
		"glm4moe":   glm4moe{},
		"mamba2":    hybrid{mixers: mixers(mixMamba2), graph: mamba2Graph},
		"lfm2": hybrid{mixers: mixers(mixShortConv, mixAttention), qkNorm: true, ffnNorm: "ffn_norm.weight",
			graph: lfm2Graph},
		"nemotron_h":    hybrid{mixers: mixers(mixMamba2, mixAttention, mixMLP), graph: nemotronHGraph},
		"granitehybrid": hybrid{mixers: mixers(mixMamba2, mixAttention), ffnNorm: "ffn_norm.weight", graph: graniteHybridGraph},
		"falcon-h1":     hybrid{mixers: mixers(mixParallel), ffnNorm: "ffn_norm", graph: falconH1Graph},
		"qwen3next":     qwen3next{},
		"qwen35":        qwen35{},
		"qwen35moe":     qwen35{moe: true},
		"gemma3n":       gemma3n{},
		"gemma4":        gemma4{},
		"minimax-m2":    minimaxM2Arch(),
		"bert":          bert{},
		"nomic-bert":    bert{rope: true},
	}
}

// Architectures lists the architectures whose graphs the replay
// describes, sorted.
func Architectures() []string {
	return slices.Sorted(maps.Keys(families()))
}

// For returns the builder of the model's graph, or nil when the replay
// has none for its architecture or does not describe this model of it
// (a tensor layout its family's file leaves out): its compute buffers
// are then a rough estimate and say so.
func For(m *arch.Model) Builder {
	f, ok := families()[m.Arch]
	if !ok {
		return nil
	}
	build := f.graphOf(m)
	if build == nil {
		return nil
	}
	// The tensor index is the same for every graph of the model; a
	// search replays many.
	shapes := tensorShapes(m)
	return func(c Context, nTokens int, p Placement) *ggml.Graph {
		b := newGB(p, shapes)
		g := build(m, c, nTokens, b)
		if c.Embeddings {
			T, _ := reserveTokens(c, nTokens)
			b.pool(m, c, T)
		}
		b.Done()
		return g
	}
}
