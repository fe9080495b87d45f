package synth

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// Model builds the header of shape s under recipe q and reads it back as
// llama.cpp's loader would see it, as a sparse file (header bytes, then
// zeros), so even a 70B shape costs only its header's memory.
func Model(s Shape, q Quant) (*arch.Model, error) {
	b, err := Build(s, q)
	if err != nil {
		return nil, err
	}
	return ModelOf(b)
}

// ModelOf reads a built header back as llama.cpp's loader would see it
// and models it, as Model does for a shape.
func ModelOf(b *gguf.Builder) (*arch.Model, error) {
	m, err := b.Model()
	if err != nil {
		return nil, err
	}
	return arch.FromGGUF(m)
}
