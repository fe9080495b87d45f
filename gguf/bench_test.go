package gguf_test

import (
	"bytes"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/synth"
)

// sparse is a file whose bytes after the header are zeros, like a sparse GGUF
// on disk, without touching the disk.
type sparse struct {
	header []byte
	size   int64
}

func (s sparse) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	if off < int64(len(s.header)) {
		n = copy(p, s.header[off:])
	}
	clear(p[n:])
	return len(p), nil
}

func headerOf(tb testing.TB, shape string) sparse {
	s, ok := synth.Lookup(shape)
	if !ok {
		tb.Fatalf("no shape %s", shape)
	}
	b, err := synth.Build(s, synth.Q4_K_M)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if err := b.WriteHeader(&buf); err != nil {
		tb.Fatal(err)
	}
	f, err := b.Layout()
	if err != nil {
		tb.Fatal(err)
	}
	return sparse{header: buf.Bytes(), size: f.Size}
}

// BenchmarkRead70B parses the header of a Llama-3.1-70B Q4_K_M file: 724
// tensors and a 128k-token vocabulary with its merges.
func BenchmarkRead70B(b *testing.B) {
	file := headerOf(b, "llama-3.1-70b")
	b.SetBytes(int64(len(file.header)))
	b.ReportAllocs()
	for b.Loop() {
		f, err := gguf.Read(file, file.size)
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Tensors) != 724 {
			b.Fatalf("%d tensors", len(f.Tensors))
		}
	}
}
