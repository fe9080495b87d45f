package arch_test

import (
	"bytes"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// FuzzFromGGUF feeds headers the GGUF reader accepts to the model and
// projector readers: whatever the metadata says, they return a model or an
// Incompatible error, never panic.
func FuzzFromGGUF(f *testing.F) {
	for _, name := range []string{"qwen3-0.6b", "gemma-3-1b", "mamba2-130m", "gpt-oss-20b"} {
		s, ok := synth.Lookup(name)
		if !ok {
			f.Fatalf("no shape %s", name)
		}
		// A small vocabulary and few layers keep the seeds a few KiB:
		// the fuzzer mutates whole inputs.
		s.Vocab, s.Layers = 512, min(s.Layers, 4)
		if s.SSM != nil && s.SSM.Layers != "" {
			ssm := *s.SSM
			ssm.Layers = ssm.Layers[:s.Layers]
			s.SSM = &ssm
		}
		addHeader(f)(synth.Build(s, synth.Q8_0))
	}
	small := synth.SigLIP896
	small.Blocks = 2
	addHeader(f)(synth.Projector(small, gguf.TypeF16))
	qwen := synth.Qwen25VL7B
	qwen.Blocks = 2
	addHeader(f)(synth.Projector(qwen, gguf.TypeF16))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The header, then a hole as large as any tensor data, as the
		// headers read over the network are seen.
		file, err := gguf.ReadWith(holed(data), int64(len(data))+256<<20, gguf.Options{MaxAlloc: 1 << 20})
		if err != nil {
			return
		}
		m, err := gguf.NewModel(file)
		if err != nil {
			return
		}
		if _, err := arch.FromGGUF(m); err != nil && !arch.IsIncompatible(err) {
			t.Fatalf("FromGGUF: an error that is not Incompatible: %v", err)
		}
		if _, err := arch.ProjectorFromGGUF(m); err != nil && !arch.IsIncompatible(err) {
			t.Fatalf("ProjectorFromGGUF: an error that is not Incompatible: %v", err)
		}
	})
}

// holed reads data, then zeros.
type holed []byte

func (h holed) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	if off < int64(len(h)) {
		n = copy(p, h[off:])
	}
	clear(p[n:])
	return len(p), nil
}

// addHeader returns a function that adds a built header to the corpus.
func addHeader(f *testing.F) func(*gguf.Builder, error) {
	return func(b *gguf.Builder, err error) {
		if err != nil {
			f.Fatal(err)
		}
		var buf bytes.Buffer
		if err := b.WriteHeader(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
}
