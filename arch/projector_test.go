package arch

import (
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

func projector(t *testing.T, arch string, kv map[string]gguf.Value) (*Projector, error) {
	t.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue(arch))
	for k, v := range kv {
		b.Set(k, v)
	}
	if err := b.AddTensor("v.patch_embd.weight", gguf.TypeF16, []uint64{14, 14, 3, 64}, nil); err != nil {
		t.Fatal(err)
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
	return ProjectorFromGGUF(m)
}

func TestProjectorFromGGUF(t *testing.T) {
	u := func(n uint32) gguf.Value { return gguf.Uint32Value(n) }
	vision := map[string]gguf.Value{
		"clip.has_vision_encoder": gguf.BoolValue(true), "clip.vision.image_size": u(896), "clip.vision.patch_size": u(14),
		"clip.vision.embedding_length": u(1152), "clip.vision.feed_forward_length": u(4304),
		"clip.vision.attention.head_count": u(16), "clip.vision.block_count": u(27),
	}
	with := func(k string, v gguf.Value) map[string]gguf.Value {
		out := map[string]gguf.Value{}
		for a, b := range vision {
			out[a] = b
		}
		if v == (gguf.Value{}) {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name, arch string
		kv         map[string]gguf.Value
		want       string // an error's words, "" for success
	}{
		{"vision", "clip", vision, ""},
		{"audio only", "clip", map[string]gguf.Value{"clip.has_audio_encoder": gguf.BoolValue(true)}, ""},
		{"a language model", "llama", vision, `expected "clip"`},
		{"no encoder", "clip", map[string]gguf.Value{}, "neither"},
		{"no patch size", "clip", with("clip.vision.patch_size", gguf.Value{}), "missing clip.vision.patch_size"},
		{"patch larger than the image", "clip", with("clip.vision.patch_size", u(1000)), "do not make patches"},
		{"a string for a size", "clip", with("clip.vision.image_size", gguf.StringValue("896")), "expected a non-negative integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := projector(t, c.arch, c.kv)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) || !IsIncompatible(err) {
					t.Fatalf("err %v, want an incompatible error saying %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Tensors) != 1 {
				t.Errorf("%d tensors, want 1", len(p.Tensors))
			}
			if c.name == "vision" {
				if p.Vision == nil || p.Vision.Patches() != 64*64 || p.Vision.Embd != 1152 || p.Audio {
					t.Errorf("vision %+v audio %v, want 64x64 patches of 1152 and no audio", p.Vision, p.Audio)
				}
			} else if p.Vision != nil || !p.Audio {
				t.Errorf("vision %+v audio %v, want an audio encoder only", p.Vision, p.Audio)
			}
		})
	}
}

// TestProjectorQwenWarmup checks that a Qwen projector is warmed up at
// clip's fixed 46×46 merged tokens, not at clip.vision.image_size, and
// that its merge and window pattern are read.
func TestProjectorQwenWarmup(t *testing.T) {
	u := func(n uint32) gguf.Value { return gguf.Uint32Value(n) }
	kv := map[string]gguf.Value{
		"clip.has_vision_encoder": gguf.BoolValue(true), "clip.vision.image_size": u(560), "clip.vision.patch_size": u(14),
		"clip.vision.embedding_length": u(1280), "clip.vision.feed_forward_length": u(3420),
		"clip.vision.attention.head_count": u(16), "clip.vision.block_count": u(32),
		"clip.projector_type": gguf.StringValue("qwen2.5vl_merger"), "clip.vision.n_wa_pattern": u(8),
	}
	p, err := projector(t, "clip", kv)
	if err != nil {
		t.Fatal(err)
	}
	if v := p.Vision; v.Warmup() != 1288 || v.Patches() != 92*92 || v.WindowPattern != 8 || v.SpatialMerge != 0 {
		t.Errorf("vision %+v: want a 1288-pixel warm-up (8464 patches), window pattern 8, default merge", v)
	}
	kv["clip.vision.spatial_merge_size"] = u(1)
	if p, err = projector(t, "clip", kv); err != nil || p.Vision.Warmup() != 46*14 {
		t.Errorf("merge 1: %v, %+v, want a 644-pixel warm-up", err, p.Vision)
	}
	kv["clip.vision.spatial_merge_size"] = u(1 << 20)
	if _, err := projector(t, "clip", kv); err == nil || !IsIncompatible(err) {
		t.Errorf("an absurd merge: %v, want an incompatible error", err)
	}
}
