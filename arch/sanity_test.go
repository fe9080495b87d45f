package arch_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// edit is one change to a real model's header.
type edit struct {
	set     map[string]gguf.Value // metadata to replace
	drop    func(name string) bool
	reshape map[string]func([]uint64) []uint64
}

// edited builds shape's header with e applied and reads it as FromGGUF.
func edited(t *testing.T, shape string, e edit) (*arch.Model, error) {
	t.Helper()
	s, ok := synth.Lookup(shape)
	if !ok {
		t.Fatalf("no synth shape %s", shape)
	}
	orig, err := synth.Build(s, synth.Q4_K_M)
	if err != nil {
		t.Fatal(err)
	}
	f := readBuilder(t, orig)
	b := gguf.NewBuilder()
	for _, kv := range f.Metadata {
		b.Set(kv.Key, kv.Value)
	}
	for k, v := range e.set {
		b.Set(k, v)
	}
	for _, tn := range f.Tensors {
		if e.drop != nil && e.drop(tn.Name) {
			continue
		}
		shape := tn.Shape
		if r := e.reshape[tn.Name]; r != nil {
			shape = r(append([]uint64(nil), shape...))
		}
		if err := b.AddTensor(tn.Name, tn.Type, shape, nil); err != nil {
			t.Fatal(err)
		}
	}
	m, err := gguf.NewModel(readBuilder(t, b))
	if err != nil {
		t.Fatal(err)
	}
	return arch.FromGGUF(m)
}

func readBuilder(t *testing.T, b *gguf.Builder) *gguf.File {
	t.Helper()
	r, size, err := b.ReaderAt()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(r, size)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func f32(x float64) gguf.Value { return gguf.Float32Value(float32(x)) }

// TestImpossibleHeadersAreRefused: head_count or head_count_kv 0 planned
// as fitting with a 0 MiB KV cache; NaN or negative RoPE bases and
// epsilons, expert counts of 0 with expert tensors or of 2^32-1, missing
// layer tensors and wrong tensor shapes passed without complaint (issue
// #30, item 8). llama.cpp's loader refuses each; so does FromGGUF, naming
// the key or tensor, as an incompatible (not unmodeled) file.
func TestImpossibleHeadersAreRefused(t *testing.T) {
	const dense, moe = "tinyllama-1.1b", "qwen3-30b-a3b"
	for _, shape := range []string{dense, moe} {
		if _, err := edited(t, shape, edit{}); err != nil {
			t.Fatalf("%s unedited: %v", shape, err)
		}
	}
	double := func(s []uint64) []uint64 { s[1] *= 2; return s }
	for _, tc := range []struct {
		name, shape string
		e           edit
		says        string
	}{
		{"head_count 0", dense, edit{set: map[string]gguf.Value{"llama.attention.head_count": gguf.Uint32Value(0)}}, "llama.attention.head_count is 0 for layer 0"},
		{"head_count_kv 0", dense, edit{set: map[string]gguf.Value{"llama.attention.head_count_kv": gguf.Uint32Value(0)}}, "llama.attention.head_count_kv is 0 for layer 0"},
		{"KV heads not dividing", dense, edit{set: map[string]gguf.Value{"llama.attention.head_count_kv": gguf.Uint32Value(5)}}, "head_count 32 is not a multiple of head_count_kv 5"},
		{"epsilon NaN", dense, edit{set: map[string]gguf.Value{"llama.attention.layer_norm_rms_epsilon": f32(math.NaN())}}, "llama.attention.layer_norm_rms_epsilon is NaN"},
		{"epsilon negative", dense, edit{set: map[string]gguf.Value{"llama.attention.layer_norm_rms_epsilon": f32(-1e-5)}}, "layer_norm_rms_epsilon is -1e-05"},
		{"RoPE base NaN", dense, edit{set: map[string]gguf.Value{"llama.rope.freq_base": f32(math.NaN())}}, "llama.rope.freq_base is NaN"},
		{"RoPE base negative", dense, edit{set: map[string]gguf.Value{"llama.rope.freq_base": f32(-10000)}}, "llama.rope.freq_base is -10000"},
		{"RoPE base infinite", dense, edit{set: map[string]gguf.Value{"llama.rope.freq_base": gguf.Float64Value(math.Inf(1))}}, "llama.rope.freq_base is +Inf"},
		{"expert_count 0 with experts", moe, edit{set: map[string]gguf.Value{"qwen3moe.expert_count": gguf.Uint32Value(0), "qwen3moe.expert_used_count": gguf.Uint32Value(0)}}, "holds routed experts, but qwen3moe.expert_count is 0"},
		{"expert_count 2^32-1", moe, edit{set: map[string]gguf.Value{"qwen3moe.expert_count": gguf.Uint32Value(math.MaxUint32)}}, "qwen3moe.expert_count is uint32 4294967295, expected a non-negative integer"},
		{"expert_count 2000", moe, edit{set: map[string]gguf.Value{"qwen3moe.expert_count": gguf.Uint32Value(2000)}}, "qwen3moe.expert_count is 2000, more than llama.cpp's 1024"},
		{"expert_count off by one", moe, edit{set: map[string]gguf.Value{"qwen3moe.expert_count": gguf.Uint32Value(127)}}, "blk.0.ffn_gate_exps.weight has shape [2048 768 128], expected [2048 768 127]"},
		{"experts used over experts", moe, edit{set: map[string]gguf.Value{"qwen3moe.expert_used_count": gguf.Uint32Value(200)}}, "expert_used_count 200 is more than expert_count 128"},
		{"a layer missing", dense, edit{drop: func(n string) bool { return strings.HasPrefix(n, "blk.5.") }}, "layer 5 has no tensors"},
		{"attn_k missing", dense, edit{drop: func(n string) bool { return n == "blk.3.attn_k.weight" }}, "missing tensor blk.3.attn_k.weight"},
		{"attn_output missing", dense, edit{drop: func(n string) bool { return n == "blk.3.attn_output.weight" }}, "missing tensor blk.3.attn_output.weight"},
		{"ffn_down missing", dense, edit{drop: func(n string) bool { return n == "blk.7.ffn_down.weight" }}, "missing tensor blk.7.ffn_down.weight"},
		{"token_embd missing", dense, edit{drop: func(n string) bool { return n == "token_embd.weight" }}, "missing tensor token_embd.weight"},
		{"attn_k too wide", dense, edit{reshape: map[string]func([]uint64) []uint64{"blk.0.attn_k.weight": double}}, "blk.0.attn_k.weight has shape [2048 512], expected [2048 256]"},
		{"attn_v too wide", dense, edit{reshape: map[string]func([]uint64) []uint64{"blk.2.attn_v.weight": double}}, "blk.2.attn_v.weight has shape"},
		{"token_embd too long", dense, edit{reshape: map[string]func([]uint64) []uint64{"token_embd.weight": double}}, "token_embd.weight has shape [2048 64000], expected [2048 32000]"},
		{"output too long", dense, edit{reshape: map[string]func([]uint64) []uint64{"output.weight": double}}, "output.weight has shape"},
		{"experts of another count", moe, edit{reshape: map[string]func([]uint64) []uint64{"blk.1.ffn_up_exps.weight": func(s []uint64) []uint64 { s[2]--; return s }}}, "blk.1.ffn_up_exps.weight has shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := edited(t, tc.shape, tc.e)
			var inc *arch.Incompatible
			if !errors.As(err, &inc) || inc.Unmodeled || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("FromGGUF: %v; want an incompatible file, saying %q", err, tc.says)
			}
		})
	}
}

// DeepSeek V3's routing keys are read as llama.cpp's load_hparams reads
// them (the graph adds nodes for each), and groups that do not divide the
// experts, or keep none of them, are refused.
func TestExpertRouting(t *testing.T) {
	m, err := edited(t, "deepseek-v3.1", edit{})
	if err != nil {
		t.Fatal(err)
	}
	if m.ExpertGroups != 8 || m.ExpertGroupsUsed != 4 || !m.ExpertWeightsNorm || math.Abs(m.ExpertWeightsScale-2.5) > 1e-6 {
		t.Errorf("groups %d/%d, norm %v, scale %v; want 8/4, true, 2.5", m.ExpertGroups, m.ExpertGroupsUsed, m.ExpertWeightsNorm, m.ExpertWeightsScale)
	}
	for _, tc := range []struct {
		set  map[string]gguf.Value
		want string
	}{
		{map[string]gguf.Value{"deepseek2.expert_group_count": gguf.Uint32Value(7)}, "expert_group_count 7"},
		{map[string]gguf.Value{"deepseek2.expert_group_used_count": gguf.Uint32Value(0)}, "expert_group_used_count 0"},
		{map[string]gguf.Value{"deepseek2.expert_group_used_count": gguf.Uint32Value(9)}, "expert_group_used_count 9"},
		{map[string]gguf.Value{"deepseek2.expert_weights_norm": gguf.Uint32Value(1)}, "expert_weights_norm is"},
		{map[string]gguf.Value{"deepseek2.expert_weights_scale": f32(math.NaN())}, "expert_weights_scale is NaN"},
	} {
		_, err := edited(t, "deepseek-v3.1", edit{set: tc.set})
		if !arch.IsIncompatible(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an incompatible file saying %q", tc.set, err, tc.want)
		}
	}
}

// TestGemma4LazyTable: a per-layer embedding table over 4 GiB (E2B's at
// F16) is one llama.cpp reads lazily, which headroom does not model; a
// quantized one is loaded like any weight.
func TestGemma4LazyTable(t *testing.T) {
	s, ok := synth.Lookup("gemma-4-e2b")
	if !ok {
		t.Fatal("no gemma-4-e2b shape")
	}
	for _, tc := range []struct {
		q    synth.Quant
		lazy bool
	}{{synth.F16, true}, {synth.Q8_0, false}} {
		_, err := synth.Model(s, tc.q)
		var inc *arch.Incompatible
		switch {
		case tc.lazy && (!errors.As(err, &inc) || !inc.Unmodeled || !strings.Contains(inc.Reason, "lazily")):
			t.Errorf("%s: %v, want it left to llama.cpp's projection for its lazy table", tc.q, err)
		case !tc.lazy && err != nil:
			t.Errorf("%s: %v", tc.q, err)
		}
	}
}
