package gguf

import (
	"bytes"
	"testing"
)

func TestRenameArchitecture(t *testing.T) {
	b := NewBuilder()
	b.Set("general.architecture", StringValue("llama"))
	b.Set("general.name", StringValue("llama-ish"))
	b.Set("llama.block_count", Uint32Value(2))
	b.Set("llama.attention.head_count", Uint32Value(4))
	b.Set("tokenizer.ggml.model", StringValue("llama"))
	if err := b.RenameArchitecture("ernie4_5"); err != nil {
		t.Fatal(err)
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range f.Metadata {
		keys = append(keys, kv.Key)
	}
	want := []string{"general.architecture", "general.name", "ernie4_5.block_count", "ernie4_5.attention.head_count", "tokenizer.ggml.model"}
	if len(keys) != len(want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("keys %v, want %v", keys, want)
		}
	}
	if got := f.Architecture(); got != "ernie4_5" {
		t.Errorf("architecture %q, want ernie4_5", got)
	}
	if n, ok := f.Uint("ernie4_5.block_count"); !ok || n != 2 {
		t.Errorf("ernie4_5.block_count = %d, %v; want 2", n, ok)
	}
	if v, _ := f.Str("tokenizer.ggml.model"); v != "llama" {
		t.Errorf("a value that names the old architecture changed: %q", v)
	}
	// Setting a renamed key replaces it in place, as for any key.
	b.Set("ernie4_5.block_count", Uint32Value(3))
	if lay, _ := b.Layout(); len(lay.Metadata) != 5 {
		t.Errorf("Set after the rename added a key: %d keys", len(lay.Metadata))
	}
}

func TestRenameArchitectureRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func() *Builder
		to    string
	}{
		{"no architecture", NewBuilder, "x"},
		{"same name", func() *Builder { return NewBuilder().Set("general.architecture", StringValue("llama")) }, "llama"},
		{"empty name", func() *Builder { return NewBuilder().Set("general.architecture", StringValue("llama")) }, ""},
		{"clash", func() *Builder {
			return NewBuilder().Set("general.architecture", StringValue("llama")).Set("llama.block_count", Uint32Value(1)).Set("x.block_count", Uint32Value(1))
		}, "x"},
	} {
		if err := tc.build().RenameArchitecture(tc.to); err == nil {
			t.Errorf("%s: renamed without an error", tc.name)
		}
	}
}
