package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// graphBuilder describes the graph llama.cpp records for one micro-batch
// of nTokens against a full cache, with b's placement of weights and
// caches, in the order ggml records it.
type graphBuilder func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph

// graphFamilies maps each architecture headroom replays to the builder of
// its family: the family checks the model's tensors and returns nil for a
// model whose graph it does not describe. It is the only place the graph
// replay tells architectures apart by name.
func graphFamilies(name string) func(m *arch.Model) graphBuilder {
	switch name {
	case "llama":
		return llamaLike(true)
	case "mistral3", "qwen2", "qwen3":
		return llamaLike(false)
	case "olmo2":
		return olmo2Builder
	case "granite":
		return graniteBuilder
	case "gptneox":
		return gptneoxBuilder
	case "gemma2":
		return gemmaFamily(gemmaOpts{softcap: true})
	case "gemma3":
		return gemmaFamily(gemmaOpts{qkNorm: true})
	case "cohere2":
		return swaFamily(false, cohere2Graph)
	case "phi3":
		return phi3Builder
	case "qwen2moe":
		return moeFamily(qwen2moeArch())
	case "qwen3moe":
		return moeFamily(qwen3moeArch())
	case "gpt-oss":
		return moeFamily(openaiMoEArch())
	case "llama4":
		return moeFamily(llama4Arch())
	case "deepseek2":
		return deepseek2Builder
	case "glm4moe":
		return glm4moeBuilder
	case "mamba2":
		return hybridFamily(hybridOpts{mixers: "M", graph: mamba2Graph})
	case "lfm2":
		return hybridFamily(hybridOpts{mixers: "CA", lfm2: true, ffnNorm: "ffn_norm.weight", graph: lfm2Graph})
	case "nemotron_h":
		return hybridFamily(hybridOpts{mixers: "MAF", graph: nemotronHGraph})
	case "granitehybrid":
		return hybridFamily(hybridOpts{mixers: "MA", ffnNorm: "ffn_norm.weight", graph: graniteHybridGraph})
	case "falcon-h1":
		return hybridFamily(hybridOpts{mixers: "P", ffnNorm: "ffn_norm", graph: falconH1Graph})
	case "qwen3next":
		return qwen3nextBuilder
	case "qwen35", "qwen35moe":
		return qwen35Builder
	case "gemma3n":
		return gemma3nBuilder
	case "gemma4":
		return gemma4Builder
	}
	return nil
}

// builderFor returns the graph builder of the model's architecture, or nil
// when headroom has none for it yet; its compute buffers are then a rough
// estimate and say so.
func builderFor(m *arch.Model) graphBuilder {
	family := graphFamilies(m.Arch)
	if family == nil {
		return nil
	}
	build := family(m)
	if build == nil {
		return nil
	}
	// The tensor index is the same for every graph of the model; a
	// search replays many.
	shapes := tensorShapes(m)
	return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
		if b.shapes == nil {
			b.shapes = shapes
		}
		return build(m, c, nTokens, b)
	}
}
