package arch_test

import (
	"errors"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// TestDeepSeek32Pending: DeepSeek V3.2's header is refused as unmodeled,
// and read, where a test asks, with its indexer and each trunk layer's
// indexer key row (the cache llama_kv_cache_dsa adds); a header without
// MLA is refused as llama.cpp refuses it.
func TestDeepSeek32Pending(t *testing.T) {
	s, ok := synth.Lookup("deepseek-v3.2-5l")
	if !ok {
		t.Fatal("no deepseek-v3.2-5l shape")
	}
	read := func(b *gguf.Builder) *gguf.Model {
		t.Helper()
		m, err := b.Model()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	b, err := synth.Build(s, synth.Q5_K_M)
	if err != nil {
		t.Fatal(err)
	}
	h := read(b)
	var inc *arch.Incompatible
	if _, err := arch.FromGGUF(h); !errors.As(err, &inc) || !inc.Unmodeled {
		t.Errorf("FromGGUF: %v, want the architecture refused as unmodeled", err)
	}
	m, err := arch.FromGGUFPending(h)
	if err != nil {
		t.Fatal(err)
	}
	if ix := m.Indexer; ix == nil || *ix != (arch.Indexer{Heads: 64, HeadDim: 128, TopK: 2048}) || !m.MLA {
		t.Errorf("indexer %+v, MLA %v: want 64 heads of 128 keeping 2048 tokens, over MLA", m.Indexer, m.MLA)
	}
	for i, l := range m.Layers {
		if l.IndexKDim != 128 {
			t.Errorf("layer %d: indexer key row %d, want 128", i, l.IndexKDim)
		}
	}
	b.Set("deepseek32.attention.key_length_mla", gguf.Uint32Value(0))
	b.Set("deepseek32.attention.value_length_mla", gguf.Uint32Value(0))
	if _, err := arch.FromGGUFPending(read(b)); err == nil {
		t.Error("a deepseek32 header without MLA was read")
	}
}
