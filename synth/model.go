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
	m, err := readBack(b)
	if err != nil {
		return nil, err
	}
	return arch.FromGGUF(m)
}

// readBack reads a built header as a file of its full size would be read.
func readBack(b *gguf.Builder) (*gguf.Model, error) {
	r, size, err := b.ReaderAt()
	if err != nil {
		return nil, err
	}
	f, err := gguf.Read(r, size)
	if err != nil {
		return nil, err
	}
	return gguf.NewModel(f)
}
