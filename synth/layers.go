package synth

import (
	"fmt"
	"slices"
)

// FirstLayers returns the shape cut to its first n layers: the same
// tensors, keys and quantization per layer at a fraction of the size, for
// timing a model too big to load whole. What is given per layer (LFM2's
// attention layers, a hybrid's layer kinds, leading dense layers) is cut
// with it; multi-token-prediction blocks stay the last of the layers, as
// the converter writes them. Choosing an n that keeps a shape's layer
// pattern whole (Gemma's sliding and global period, Qwen3.5's three
// DeltaNet layers to one attention layer) is the caller's part.
func (s Shape) FirstLayers(n int) (Shape, error) {
	if n < 1 || n > s.Layers {
		return Shape{}, fmt.Errorf("synth: %s has %d layers, cannot keep %d", s.Name, s.Layers, n)
	}
	if n == s.Layers {
		return s, nil
	}
	s.Name = fmt.Sprintf("%s (first %d of %d layers)", s.Name, n, s.Layers)
	s.Layers = n
	if s.Conv != nil {
		c := *s.Conv
		c.AttnLayers = slices.DeleteFunc(slices.Clone(c.AttnLayers), func(il int) bool { return il >= n })
		s.Conv = &c
	}
	if s.SSM != nil && s.SSM.Layers != "" {
		m := *s.SSM
		m.Layers = m.Layers[:n]
		s.SSM = &m
	}
	if s.MoE != nil {
		m := *s.MoE
		m.LeadingDense = min(m.LeadingDense, n)
		s.MoE = &m
	}
	return s, s.validate()
}
