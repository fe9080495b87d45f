package gguf_test

import (
	"io"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

func headerOf(tb testing.TB, shape string) (io.ReaderAt, int64) {
	s, ok := synth.Lookup(shape)
	if !ok {
		tb.Fatalf("no shape %s", shape)
	}
	b, err := synth.Build(s, synth.Q4_K_M)
	if err != nil {
		tb.Fatal(err)
	}
	r, size, err := b.ReaderAt()
	if err != nil {
		tb.Fatal(err)
	}
	return r, size
}

// BenchmarkRead70B parses the header of a Llama-3.1-70B Q4_K_M file: 724
// tensors and a 128k-token vocabulary with its merges.
func BenchmarkRead70B(b *testing.B) {
	file, size := headerOf(b, "llama-3.1-70b")
	b.ReportAllocs()
	for b.Loop() {
		f, err := gguf.Read(file, size)
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Tensors) != 724 {
			b.Fatalf("%d tensors", len(f.Tensors))
		}
	}
}
