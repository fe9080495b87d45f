package arch

import (
	"bytes"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

func build(t *testing.T, arch string, kv map[string]gguf.Value, tensors ...string) (*Model, error) {
	t.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue(arch))
	for k, v := range kv {
		b.Set(arch+"."+k, v)
	}
	for _, name := range tensors {
		if err := b.AddTensor(name, gguf.TypeF32, []uint64{32}, nil); err != nil {
			t.Fatal(err)
		}
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := gguf.NewModel(f)
	if err != nil {
		t.Fatal(err)
	}
	return FromGGUF(m)
}

func u32(x uint32) gguf.Value { return gguf.Uint32Value(x) }

func TestDenseGQA(t *testing.T) {
	m, err := build(t, "llama", map[string]gguf.Value{
		"block_count": u32(4), "embedding_length": u32(4096), "attention.head_count": u32(32),
		"attention.head_count_kv": u32(8), "feed_forward_length": u32(14336), "context_length": u32(8192),
	}, "token_embd.weight", "blk.0.attn_q.weight", "blk.3.ffn_up_exps.weight", "output_norm.weight")
	if err != nil {
		t.Fatal(err)
	}
	l := m.Layers[2]
	if l.Attention != Full || l.KDim != 8*128 || l.VDim != 8*128 || l.FF != 14336 {
		t.Errorf("layer %+v", l)
	}
	if !m.TiedOutput {
		t.Errorf("no output.weight means the embedding is reused")
	}
	layers := map[string]int{}
	for _, tn := range m.Tensors {
		layers[tn.Name] = tn.Layer
		if tn.Name == "blk.3.ffn_up_exps.weight" && !tn.Expert {
			t.Errorf("expert tensor not marked")
		}
	}
	if layers["token_embd.weight"] != InputLayer || layers["blk.0.attn_q.weight"] != 0 || layers["output_norm.weight"] != 4 {
		t.Errorf("layers %v", layers)
	}
}

// Gemma 3 alternates five sliding-window layers with one global layer
// (set_swa_pattern(6) in llama.cpp).
func TestSlidingPattern(t *testing.T) {
	m, err := build(t, "gemma3", map[string]gguf.Value{
		"block_count": u32(12), "embedding_length": u32(2560), "attention.head_count": u32(8),
		"attention.head_count_kv": u32(4), "attention.key_length": u32(256), "attention.value_length": u32(256),
		"feed_forward_length": u32(10240), "attention.sliding_window": u32(1024),
	})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, l := range m.Layers {
		kinds = append(kinds, l.Attention.String()[:1])
	}
	if got := strings.Join(kinds, ""); got != "sssssfsssssf" {
		t.Errorf("pattern %s", got)
	}
	if m.Window != 1024 || m.Layers[0].KDim != 1024 {
		t.Errorf("window %d, kdim %d", m.Window, m.Layers[0].KDim)
	}
}

// Per-layer KV head counts: a zero means the layer keeps no KV cache.
func TestPerLayerHeads(t *testing.T) {
	heads, _ := gguf.ArrayOf(gguf.Int32, gguf.Int32Value(8), gguf.Int32Value(0), gguf.Int32Value(4))
	m, err := build(t, "llama", map[string]gguf.Value{
		"block_count": u32(3), "embedding_length": u32(1024), "attention.head_count": u32(16),
		"attention.head_count_kv": heads, "feed_forward_length": u32(4096),
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Layers[0].KDim != 8*64 || m.Layers[1].Attention != NoAttention || m.Layers[2].KDim != 4*64 {
		t.Errorf("layers %+v", m.Layers)
	}
	short, _ := gguf.ArrayOf(gguf.Int32, gguf.Int32Value(8))
	_, err = build(t, "llama", map[string]gguf.Value{
		"block_count": u32(3), "embedding_length": u32(1024), "attention.head_count": u32(16),
		"attention.head_count_kv": short,
	})
	if !IsIncompatible(err) || !strings.Contains(err.Error(), "expected 3 integers") {
		t.Errorf("short array: %v", err)
	}
}

// DeepSeek-style MLA caches only the compressed K (kv_lora_rank + rope
// dims) and no V.
func TestMLA(t *testing.T) {
	m, err := build(t, "qwen3moe", map[string]gguf.Value{
		"block_count": u32(2), "embedding_length": u32(2048), "attention.head_count": u32(16),
		"attention.head_count_kv": u32(1), "attention.key_length": u32(576), "attention.value_length": u32(512),
		"attention.key_length_mla": u32(192), "attention.value_length_mla": u32(128),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !m.MLA || m.Layers[0].KDim != 576 || m.Layers[0].VDim != 0 {
		t.Errorf("MLA layer %+v", m.Layers[0])
	}
}

func TestIncompatible(t *testing.T) {
	for _, tc := range []struct {
		arch string
		kv   map[string]gguf.Value
		says string
	}{
		{"futurenet", nil, `architecture "futurenet" is not one headroom models yet`},
		{"", nil, "no general.architecture"},
		{"llama", map[string]gguf.Value{"embedding_length": u32(8)}, "missing llama.block_count"},
		{"llama", map[string]gguf.Value{"block_count": gguf.StringValue("many"), "embedding_length": u32(8)}, "expected a non-negative integer"},
	} {
		_, err := build(t, tc.arch, tc.kv)
		if !IsIncompatible(err) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s %v: %v", tc.arch, tc.kv, err)
		}
	}
}
