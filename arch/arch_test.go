package arch

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// build reads a header of arch with the keys kv, the tensors a header of
// those keys has in llama.cpp's shapes (consistentTensors), and the named
// tensors (one dimension of 32, unless a consistent one has the name).
func build(t *testing.T, arch string, kv map[string]gguf.Value, tensors ...string) (*Model, error) {
	t.Helper()
	m := header(t, arch, kv, nil, tensors)
	first, err := fromGGUF(m, false)
	if err != nil {
		return nil, err
	}
	shapes := consistentTensors(first)
	if slices.Contains(tensors, "output.weight") {
		shapes["output.weight"] = shapes["token_embd.weight"]
	}
	return FromGGUF(header(t, arch, kv, shapes, tensors))
}

// header writes and reads back a header.
func header(t *testing.T, arch string, kv map[string]gguf.Value, shapes map[string][]uint64, names []string) *gguf.Model {
	t.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue(arch))
	for k, v := range kv {
		b.Set(arch+"."+k, v)
	}
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		if err := b.AddTensor(name, gguf.TypeF32, shapes[name], nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		if _, ok := shapes[name]; ok {
			continue
		}
		if err := b.AddTensor(name, gguf.TypeF32, []uint64{32}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, size, err := b.ReaderAt()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(r, size)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gguf.NewModel(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// consistentTensors are the tensors llama.cpp's loader would want of a
// model read from keys alone, in the shapes checkTensors holds them to.
func consistentTensors(a *Model) map[string][]uint64 {
	e := uint64(max(a.NEmbd, 1))
	out := map[string][]uint64{"token_embd.weight": {e, uint64(max(a.NVocab, 8))}}
	for i, l := range a.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		out[p+"attn_norm.weight"] = []uint64{e}
		switch {
		case a.MLA && l.Attention != NoAttention:
			out[p+"attn_kv_a_mqa.weight"] = []uint64{e, uint64(max(l.KDim, 1))}
		case l.Attention != NoAttention || l.KVShared:
			out[p+"attn_k.weight"] = []uint64{e, uint64(max(l.KDim, 1))}
			out[p+"attn_v.weight"] = []uint64{e, uint64(max(l.VDim, 1))}
			out[p+"attn_output.weight"] = []uint64{e, e}
		}
		if l.FF > 0 {
			out[p+"ffn_down.weight"] = []uint64{uint64(l.FF), e}
		}
	}
	return out
}

func u32(x uint32) gguf.Value { return gguf.Uint32Value(x) }

func TestDenseGQA(t *testing.T) {
	m, err := build(t, "llama", map[string]gguf.Value{
		"block_count": u32(4), "embedding_length": u32(4096), "attention.head_count": u32(32),
		"attention.head_count_kv": u32(8), "feed_forward_length": u32(14336), "context_length": u32(8192),
		"expert_count": u32(8), "expert_used_count": u32(2),
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

// Per-layer KV head counts give each layer its cache width; a zero in an
// architecture whose every layer attends is refused (issue #30, item 8:
// it planned a layer with no cache).
func TestPerLayerHeads(t *testing.T) {
	heads, _ := gguf.ArrayOf(gguf.Int32, gguf.Int32Value(8), gguf.Int32Value(16), gguf.Int32Value(4))
	m, err := build(t, "llama", map[string]gguf.Value{
		"block_count": u32(3), "embedding_length": u32(1024), "attention.head_count": u32(16),
		"attention.head_count_kv": heads, "feed_forward_length": u32(4096),
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Layers[0].KDim != 8*64 || m.Layers[1].KDim != 16*64 || m.Layers[2].KDim != 4*64 {
		t.Errorf("layers %+v", m.Layers)
	}
	zero, _ := gguf.ArrayOf(gguf.Int32, gguf.Int32Value(8), gguf.Int32Value(0), gguf.Int32Value(4))
	_, err = build(t, "llama", map[string]gguf.Value{
		"block_count": u32(3), "embedding_length": u32(1024), "attention.head_count": u32(16),
		"attention.head_count_kv": zero, "feed_forward_length": u32(4096),
	})
	if !IsIncompatible(err) || !strings.Contains(err.Error(), "llama.attention.head_count_kv is 0 for layer 1") {
		t.Errorf("a zero KV head count: %v", err)
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

// An architecture headroom does not model, or a variant of one it models
// that it does not replay, is Unmodeled: llama.cpp's projection may answer
// for it. A wrong file is not.
func TestUnmodeled(t *testing.T) {
	gemma4 := func(extra map[string]gguf.Value) map[string]gguf.Value {
		kv := map[string]gguf.Value{"block_count": u32(2), "embedding_length": u32(64), "attention.head_count": u32(2),
			"attention.head_count_kv": u32(1), "feed_forward_length": u32(128), "attention.sliding_window": u32(16),
			"attention.sliding_window_pattern": bools(true, false)}
		for k, v := range extra {
			kv[k] = v
		}
		return kv
	}
	for _, tc := range []struct {
		name, arch string
		kv         map[string]gguf.Value
		unmodeled  bool
	}{
		{"unknown architecture", "futurenet", nil, true},
		{"Gemma 4 sharing KV past its second layer", "gemma4", gemma4(map[string]gguf.Value{"attention.shared_kv_layers": u32(1)}), false},
		{"Gemma 4 without its pattern", "gemma4", map[string]gguf.Value{"block_count": u32(2), "embedding_length": u32(64), "attention.sliding_window": u32(16)}, false},
		{"llama without block_count", "llama", map[string]gguf.Value{"embedding_length": u32(8)}, false},
	} {
		_, err := build(t, tc.arch, tc.kv)
		var inc *Incompatible
		if !errors.As(err, &inc) || inc.Unmodeled != tc.unmodeled {
			t.Errorf("%s: %v (want Unmodeled %v)", tc.name, err, tc.unmodeled)
		}
	}
	if m, err := build(t, "gemma4", gemma4(map[string]gguf.Value{"final_logit_softcapping": gguf.Float32Value(30)})); err != nil || !m.FinalSoftcap {
		t.Errorf("dense Gemma 4: %v, soft-cap %v", err, m != nil && m.FinalSoftcap)
	}
	// E2B's and E4B's last layers read an earlier layer's cache of their
	// kind: the last global one or the last sliding one.
	four := gemma4(map[string]gguf.Value{"block_count": u32(4), "attention.shared_kv_layers": u32(2),
		"attention.sliding_window_pattern": bools(true, false, true, false)})
	if m, err := build(t, "gemma4", four); err != nil {
		t.Errorf("Gemma 4 sharing KV: %v", err)
	} else if l2, l3 := m.Layers[2], m.Layers[3]; !l2.KVShared || l2.KVLayer != 0 || !l3.KVShared || l3.KVLayer != 1 || l2.Attention != NoAttention || !m.OutputFirst {
		t.Errorf("Gemma 4 sharing KV: layer 2 %+v, layer 3 %+v, output first %v; want layers 0 and 1's caches", l2, l3, m.OutputFirst)
	}
	// 26B-A4B's experts are read as any MoE's.
	m, err := build(t, "gemma4", gemma4(map[string]gguf.Value{"expert_count": u32(8), "expert_used_count": u32(2)}))
	if err != nil {
		t.Errorf("Gemma 4 with experts: %v", err)
	} else if m.NExpert != 8 || m.NExpertUsed != 2 {
		t.Errorf("Gemma 4 with experts: %d of %d experts, want 2 of 8", m.NExpertUsed, m.NExpert)
	}
}

func bools(xs ...bool) gguf.Value {
	vs := make([]gguf.Value, len(xs))
	for i, x := range xs {
		vs[i] = gguf.BoolValue(x)
	}
	v, _ := gguf.ArrayOf(gguf.Bool, vs...)
	return v
}

func i32s(xs ...int32) gguf.Value {
	vs := make([]gguf.Value, len(xs))
	for i, x := range xs {
		vs[i] = gguf.Int32Value(x)
	}
	v, _ := gguf.ArrayOf(gguf.Int32, vs...)
	return v
}

// Hybrid Mamba-2 models: which layers keep a KV cache, which a recurrent
// state, and which (Nemotron-H's MLP layers) neither.
func TestHybridLayers(t *testing.T) {
	ssm := map[string]gguf.Value{
		"embedding_length": u32(1024), "attention.head_count": u32(8), "attention.key_length": u32(64),
		"attention.value_length": u32(64), "ssm.conv_kernel": u32(4), "ssm.inner_size": u32(2048),
		"ssm.state_size": u32(128), "ssm.group_count": u32(2), "ssm.time_step_rank": u32(32),
	}
	with := func(extra map[string]gguf.Value) map[string]gguf.Value {
		out := map[string]gguf.Value{}
		for k, v := range ssm {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	const r, s = 3 * (2048 + 2*2*128), 128 * 2048
	kinds := func(m *Model) string {
		var b strings.Builder
		for _, l := range m.Layers {
			c := "-"
			switch {
			case l.Recurrent && l.Attention == Full:
				c = "B"
			case l.Recurrent:
				c = "M"
			case l.Attention == Full:
				c = "*"
			}
			if l.Recurrent && (l.RDim != r || l.SDim != s) {
				t.Errorf("%s layer %d: state %d/%d", m.Arch, l.Index, l.RDim, l.SDim)
			}
			b.WriteString(c)
		}
		return b.String()
	}
	for _, tc := range []struct {
		arch string
		kv   map[string]gguf.Value
		want string
	}{
		{"granitehybrid", with(map[string]gguf.Value{"block_count": u32(4), "attention.head_count_kv": i32s(0, 2, 0, 0), "feed_forward_length": u32(4096)}), "M*MM"},
		{"nemotron_h", with(map[string]gguf.Value{"block_count": u32(4), "attention.head_count_kv": i32s(0, 0, 2, 0), "feed_forward_length": i32s(0, 4096, 0, 4096)}), "M-*-"},
		{"falcon-h1", with(map[string]gguf.Value{"block_count": u32(3), "attention.head_count_kv": u32(2), "feed_forward_length": u32(4096)}), "BBB"},
		// Qwen3-Next gives every layer KV heads; its DeltaNet layers keep
		// none: every 4th layer is attention by default, or every
		// full_attention_interval-th, or as attention.recurrent_layers says.
		{"qwen3next", with(map[string]gguf.Value{"block_count": u32(8), "attention.head_count_kv": u32(2)}), "MMM*MMM*"},
		{"qwen3next", with(map[string]gguf.Value{"block_count": u32(4), "attention.head_count_kv": u32(2), "full_attention_interval": u32(2)}), "M*M*"},
		{"qwen3next", with(map[string]gguf.Value{"block_count": u32(4), "attention.head_count_kv": u32(2), "attention.recurrent_layers": bools(true, false, false, true)}), "M**M"},
	} {
		m, err := build(t, tc.arch, tc.kv)
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(m); got != tc.want {
			t.Errorf("%s: layers %s, want %s", tc.arch, got, tc.want)
		}
	}
}

// NextN blocks count in block_count; their weights are never loaded.
func TestNextNUnused(t *testing.T) {
	m, err := build(t, "glm4moe", map[string]gguf.Value{
		"block_count": u32(3), "embedding_length": u32(1024), "attention.head_count": u32(8),
		"attention.head_count_kv": u32(2), "nextn_predict_layers": u32(1),
	}, "blk.1.attn_q.weight", "blk.2.attn_q.weight", "blk.2.nextn.eh_proj.weight", "output.weight")
	if err != nil {
		t.Fatal(err)
	}
	unused := map[string]bool{}
	for _, tn := range m.Tensors {
		unused[tn.Name] = tn.Unused
	}
	if unused["blk.1.attn_q.weight"] || !unused["blk.2.attn_q.weight"] || !unused["blk.2.nextn.eh_proj.weight"] || unused["output.weight"] {
		t.Errorf("unused %v", unused)
	}
	if m.Layers[2].Attention != Full {
		t.Errorf("the NextN block keeps its KV cache in glm4moe")
	}
}

// Llama 4's chunked attention window is hard-coded (8192) unless the
// metadata sets it to 0.
func TestLlama4Chunked(t *testing.T) {
	kv := map[string]gguf.Value{
		"block_count": u32(8), "embedding_length": u32(5120), "attention.head_count": u32(40),
		"attention.head_count_kv": u32(8), "attention.key_length": u32(128), "attention.value_length": u32(128),
	}
	m, err := build(t, "llama4", kv)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, l := range m.Layers {
		kinds = append(kinds, l.Attention.String()[:1])
	}
	if got := strings.Join(kinds, ""); m.Window != 8192 || got != "sssfsssf" {
		t.Errorf("window %d, pattern %s", m.Window, got)
	}
	kv["attention.sliding_window"] = u32(0)
	if m, err = build(t, "llama4", kv); err != nil || m.Window != 0 || m.Layers[0].Attention != Full {
		t.Errorf("window 0 disables chunking: %v %+v", err, m)
	}
}

// A recurrent_layers array that does not describe every layer is refused
// with the key named, not guessed around.
func TestQwen3NextRecurrentLayersChecked(t *testing.T) {
	base := map[string]gguf.Value{
		"block_count": u32(4), "embedding_length": u32(1024), "attention.head_count": u32(8), "attention.head_count_kv": u32(2),
		"ssm.conv_kernel": u32(4), "ssm.inner_size": u32(2048), "ssm.state_size": u32(128), "ssm.group_count": u32(2), "ssm.time_step_rank": u32(32),
	}
	for name, v := range map[string]gguf.Value{
		"three bools for four layers": bools(true, true, false),
		"integers":                    i32s(1, 1, 1, 0),
		"a scalar":                    u32(1),
	} {
		kv := maps.Clone(base)
		kv["attention.recurrent_layers"] = v
		_, err := build(t, "qwen3next", kv)
		if !IsIncompatible(err) || !strings.Contains(fmt.Sprint(err), "recurrent_layers") {
			t.Errorf("%s: error %v, want an incompatibility naming attention.recurrent_layers", name, err)
		}
	}
}

// Gemma 3n: four sliding layers to one global, and only the first 20
// layers keep a KV cache; the rest read layer 18's (sliding) or 19's
// (global). The per-layer bools converters write are ignored, a scalar
// period is not.
func TestGemma3nSharedKV(t *testing.T) {
	base := func(extra map[string]gguf.Value) map[string]gguf.Value {
		kv := map[string]gguf.Value{
			"block_count": u32(30), "embedding_length": u32(2048), "attention.head_count": u32(8),
			"attention.head_count_kv": u32(2), "attention.key_length": u32(256), "attention.value_length": u32(256),
			"feed_forward_length": u32(8192), "attention.sliding_window": u32(512),
		}
		for k, v := range extra {
			kv[k] = v
		}
		return kv
	}
	// Every layer global: what a bool array would say if it were read.
	allFull := make([]bool, 30)
	kinds := func(m *Model) string {
		var b strings.Builder
		for _, l := range m.Layers {
			b.WriteString(l.Attention.String()[:1])
		}
		return b.String()
	}
	for _, tc := range []struct {
		name string
		kv   map[string]gguf.Value
		want string
		err  string
	}{
		{"default", base(nil), "ssssfssssfssssfssssf" + "nnnnnnnnnn", ""},
		{"bools ignored", base(map[string]gguf.Value{"attention.sliding_window_pattern": bools(allFull...)}), "ssssfssssfssssfssssf" + "nnnnnnnnnn", ""},
		{"scalar period", base(map[string]gguf.Value{"attention.sliding_window_pattern": u32(4)}), "sssfsssfsssfsssfsssf" + "nnnnnnnnnn", ""},
		{"unshareable", base(map[string]gguf.Value{"attention.sliding_window_pattern": u32(3)}), "", "layer 20 would share layer 19's KV cache, which is sliding"},
		{"zero window", base(map[string]gguf.Value{"attention.sliding_window": u32(0)}), "", "sliding_window is 0"},
		{"no window", map[string]gguf.Value{"block_count": u32(30), "embedding_length": u32(2048), "attention.head_count": u32(8)}, "", "missing gemma3n.attention.sliding_window"},
	} {
		m, err := build(t, "gemma3n", tc.kv, "per_layer_token_embd.weight", "per_layer_model_proj.weight",
			"per_layer_proj_norm.weight", "altup_proj.weight", "altup_unembd_proj.weight", "blk.29.laurel_l.weight")
		if tc.err != "" {
			if !IsIncompatible(err) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := kinds(m); got != tc.want {
			t.Errorf("%s: layers %s, want %s", tc.name, got, tc.want)
		}
		if l := m.Layers[25]; l.HeadsKV != 2 || l.KDim != 512 || l.VDim != 512 {
			t.Errorf("%s: a shared layer keeps its widths: %+v", tc.name, l)
		}
		// The shared layers read layer 18's cache when they slide, 19's
		// when they are global; the first 20 read their own.
		for il, l := range m.Layers {
			want := -1
			if il >= 20 {
				want = 19
				// the first global layer gives the period
				if period := strings.IndexByte(tc.want, 'f') + 1; il%period != period-1 {
					want = 18
				}
			}
			if got := map[bool]int{true: l.KVLayer, false: -1}[l.KVShared]; got != want {
				t.Errorf("%s: layer %d reads layer %d's cache, want %d", tc.name, il, got, want)
			}
		}
		layers := map[string]int{}
		for _, tn := range m.Tensors {
			layers[tn.Name] = tn.Layer
		}
		want := map[string]int{"per_layer_token_embd.weight": InputLayer, "per_layer_model_proj.weight": 0,
			"per_layer_proj_norm.weight": 0, "altup_proj.weight": 30, "altup_unembd_proj.weight": 30, "blk.29.laurel_l.weight": 29}
		for name, l := range want {
			if layers[name] != l {
				t.Errorf("%s: %s on layer %d, want %d", tc.name, name, layers[name], l)
			}
		}
	}
}

// Granite is llama's cache under four multipliers; a file llama.cpp
// refuses (no logit_scale) or whose graph graniteGraph does not replay
// (deepstack, RoPE off) is refused.
func TestGranite(t *testing.T) {
	kv := func(extra map[string]gguf.Value) map[string]gguf.Value {
		out := map[string]gguf.Value{
			"block_count": u32(2), "embedding_length": u32(2048), "attention.head_count": u32(32),
			"attention.head_count_kv": u32(8), "feed_forward_length": u32(8192),
			"logit_scale": gguf.Float32Value(8), "embedding_scale": gguf.Float32Value(12),
			"residual_scale": gguf.Float32Value(0.22), "attention.scale": gguf.Float32Value(0.015625),
		}
		maps.Copy(out, extra)
		return out
	}
	m, err := build(t, "granite", kv(map[string]gguf.Value{"rope.scaling.finetuned": gguf.BoolValue(true)}))
	if err != nil {
		t.Fatal(err)
	}
	if l := m.Layers[1]; l.Attention != Full || l.KDim != 8*64 || l.VDim != 8*64 {
		t.Errorf("layer %+v", l)
	}
	noLogit := kv(nil)
	delete(noLogit, "logit_scale")
	for _, tc := range []struct {
		kv   map[string]gguf.Value
		says string
	}{
		{noLogit, "missing granite.logit_scale"},
		{kv(map[string]gguf.Value{"deepstack_mapping": i32s(-1, 0)}), "deepstack"},
		{kv(map[string]gguf.Value{"rope.scaling.finetuned": gguf.BoolValue(false)}), "without RoPE"},
	} {
		if _, err := build(t, "granite", tc.kv); !IsIncompatible(err) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v", tc.says, err)
		}
	}
}

// GPT-NeoX keeps one KV cache over every layer, as many KV heads as heads
// (its converter writes no KV head count); use_parallel_residual picks the
// graph, and a file llama.cpp refuses (either required key missing) or
// whose graph cannot run is refused.
func TestGPTNeoX(t *testing.T) {
	kv := func(extra map[string]gguf.Value) map[string]gguf.Value {
		out := map[string]gguf.Value{
			"block_count": u32(2), "embedding_length": u32(2048), "attention.head_count": u32(16),
			"feed_forward_length": u32(8192), "rope.dimension_count": u32(32),
			"attention.layer_norm_epsilon": gguf.Float32Value(1e-5), "use_parallel_residual": gguf.BoolValue(true),
		}
		maps.Copy(out, extra)
		return out
	}
	m, err := build(t, "gptneox", kv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if l := m.Layers[1]; l.Attention != Full || l.HeadsKV != 16 || l.KDim != 16*128 || l.VDim != 16*128 {
		t.Errorf("layer %+v", l)
	}
	if !m.ParallelResidual {
		t.Error("use_parallel_residual true not kept")
	}
	m, err = build(t, "gptneox", kv(map[string]gguf.Value{"use_parallel_residual": gguf.BoolValue(false)}))
	if err != nil || m.ParallelResidual {
		t.Errorf("use_parallel_residual false: %v, parallel %v", err, m != nil && m.ParallelResidual)
	}
	noPar, noEps := kv(nil), kv(nil)
	delete(noPar, "use_parallel_residual")
	delete(noEps, "attention.layer_norm_epsilon")
	for _, tc := range []struct {
		kv   map[string]gguf.Value
		says string
	}{
		{noPar, "missing gptneox.use_parallel_residual"},
		{noEps, "missing gptneox.attention.layer_norm_epsilon"},
		{kv(map[string]gguf.Value{"use_parallel_residual": u32(1)}), "expected a bool"},
		{kv(map[string]gguf.Value{"attention.head_count_kv": i32s(16, 0)}), "head_count_kv is 0 for layer 1"},
		{kv(map[string]gguf.Value{"attention.value_length": u32(64)}), "equal head sizes"},
	} {
		if _, err := build(t, "gptneox", tc.kv); !IsIncompatible(err) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v", tc.says, err)
		}
	}
}

// mistral3's temperature scale is read where present and refused when it
// is not a number; granite's logit_scale likewise.
func TestNumberKeys(t *testing.T) {
	base := map[string]gguf.Value{
		"block_count": u32(2), "embedding_length": u32(2048), "attention.head_count": u32(32),
		"attention.head_count_kv": u32(8), "feed_forward_length": u32(8192),
	}
	m, err := build(t, "mistral3", base)
	if err != nil || m.AttnTempScale != 0 {
		t.Fatalf("no temperature key: %v, %v", err, m)
	}
	with := maps.Clone(base)
	with["attention.temperature_scale"] = gguf.Float32Value(0.125)
	if m, err = build(t, "mistral3", with); err != nil || m.AttnTempScale != 0.125 {
		t.Errorf("temperature 0.125: %v, %v", err, m)
	}
	with["attention.temperature_scale"] = gguf.BoolValue(true)
	if _, err := build(t, "mistral3", with); !IsIncompatible(err) || !strings.Contains(err.Error(), "mistral3.attention.temperature_scale is") {
		t.Errorf("a bool temperature: %v", err)
	}
	g := maps.Clone(base)
	g["logit_scale"] = gguf.BoolValue(true)
	if _, err := build(t, "granite", g); !IsIncompatible(err) || !strings.Contains(err.Error(), "granite.logit_scale is") {
		t.Errorf("a bool logit_scale: %v", err)
	}
}

// A BERT encoder keeps no memory (create_memory makes none): every layer
// keeps its heads for the graph but no cache; its embedding norm is layer
// 0's, a reranker's head the output layer's, and its pooling comes from
// the header.
func TestEncoder(t *testing.T) {
	m, err := build(t, "bert", map[string]gguf.Value{
		"block_count": u32(2), "embedding_length": u32(384), "attention.head_count": u32(12),
		"feed_forward_length": u32(1536), "context_length": u32(512), "attention.layer_norm_epsilon": gguf.Float32Value(1e-12),
		"pooling_type": u32(PoolingRank), "classifier.output_labels": gguf.StringsValue([]string{"a", "b"}),
	}, "token_embd.weight", "token_embd_norm.weight", "blk.0.attn_q.weight", "cls.weight", "cls.output.weight")
	if err != nil {
		t.Fatal(err)
	}
	if !m.Encoder || m.Pooling != PoolingRank || !m.EmbeddingModel() {
		t.Errorf("encoder %v, pooling %d", m.Encoder, m.Pooling)
	}
	for _, l := range m.Layers {
		if l.Attention != NoAttention || l.HeadsKV != 12 || l.KDim != 384 {
			t.Errorf("layer %+v: want no cache, 12 KV heads of 32", l)
		}
	}
	layers := map[string]int{}
	for _, tn := range m.Tensors {
		layers[tn.Name] = tn.Layer
	}
	if layers["token_embd_norm.weight"] != 0 || layers["cls.weight"] != 2 || layers["cls.output.weight"] != 2 {
		t.Errorf("layers %v", layers)
	}
	if _, err := build(t, "qwen3", map[string]gguf.Value{
		"block_count": u32(2), "embedding_length": u32(1024), "attention.head_count": u32(16), "feed_forward_length": u32(3072),
		"pooling_type": u32(9),
	}, "token_embd.weight"); !IsIncompatible(err) {
		t.Errorf("pooling_type 9: %v, want incompatible", err)
	}
}
