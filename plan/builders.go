package plan

import "github.com/headroom-llm/headroom/arch"

// graphBuilder describes the graph llama.cpp records for one micro-batch
// of nTokens against a full cache, with b's placement of weights and
// caches, in the order ggml records it.
type graphBuilder func(m *arch.Model, c Context, nTokens int, b *gb) *graph

// builderFor returns the graph builder of the model's architecture, or nil
// when headroom has none for it yet; its compute buffers are then a rough
// estimate and say so. Each family's builder decides which of its models
// it describes.
func builderFor(m *arch.Model) graphBuilder {
	build := familyBuilder(m)
	if build == nil {
		return nil
	}
	// The tensor index is the same for every graph of the model; a
	// search replays many.
	shapes := tensorShapes(m)
	return func(m *arch.Model, c Context, nTokens int, b *gb) *graph {
		if b.shapes == nil {
			b.shapes = shapes
		}
		return build(m, c, nTokens, b)
	}
}

// familyBuilder is builderFor without the shared tensor index.
func familyBuilder(m *arch.Model) graphBuilder {
	switch m.Arch {
	case "llama", "mistral3", "qwen2", "qwen3", "olmo2":
		if replayable(m) {
			return llamaGraphOn
		}
	case "gemma2", "gemma3", "cohere2", "phi3":
		return swaBuilder(m)
	case "qwen2moe", "qwen3moe", "gpt-oss", "llama4":
		return moeBuilder(m)
	case "deepseek2", "glm4moe":
		return mlaBuilder(m)
	case "mamba2", "lfm2", "nemotron_h", "granitehybrid", "falcon-h1":
		return recurrentBuilder(m)
	case "qwen3next":
		return qwen3nextBuilder(m)
	case "gemma3n":
		return gemma3nBuilder(m)
	}
	return nil
}
