package synth

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// The parameter counts are the ones Hugging Face reports for each model's
// safetensors; a GGUF of Llama 3.1 also holds the 64-element rope_freqs.
func TestShapesMatchPublishedParameterCounts(t *testing.T) {
	tests := []struct {
		name   string
		params uint64
	}{
		{"llama-3.1-8b", 8030261248 + 64},
		{"llama-3.1-70b", 70553706496 + 64},
		{"llama-3.2-1b", 1235814400 + 32},
		{"qwen2.5-7b", 7615616512},
		{"qwen3-8b", 8190735360},
		{"tinyllama-1.1b", 1100048384},
	}
	for _, tc := range tests {
		s, ok := Lookup(tc.name)
		if !ok {
			t.Fatalf("no shape %q", tc.name)
		}
		b, err := Build(s, Q4_K_M)
		if err != nil {
			t.Fatal(err)
		}
		f, err := b.Layout()
		if err != nil {
			t.Fatal(err)
		}
		m, err := gguf.NewModel(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != tc.params {
			t.Errorf("%s: %d parameters, want %d", tc.name, got, tc.params)
		}
	}
}

func TestBuildReadsBack(t *testing.T) {
	s, _ := Lookup("tinyllama-1.1b")
	b, err := Build(s, Q8_0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Architecture() != "llama" || len(f.Tensors) != 3+22*9 {
		t.Errorf("arch %q, %d tensors", f.Architecture(), len(f.Tensors))
	}
	v, _ := f.Lookup("tokenizer.ggml.tokens")
	arr, _ := v.AsArray()
	if arr.Len() != 32000 || arr.Index(3).String() != `"<0x00>"` {
		t.Errorf("vocabulary: %d tokens, token 3 = %v", arr.Len(), arr.Index(3))
	}
	if _, err := ParseQuant("q9_9"); err == nil {
		t.Errorf("unknown quant accepted")
	}
}
