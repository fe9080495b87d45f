package synth

import (
	"fmt"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// Vision is the shape of a ViT-style image encoder in an mmproj file:
// llama.cpp's clip loader reads these keys, and the tensors follow its
// names (v.blk.N.*, mm.*).
type Vision struct {
	ImageSize, PatchSize, Embd, FF, Heads, Blocks int
	// TextEmbd is the width of the language model the projector feeds.
	TextEmbd int
	// Type is clip.projector_type: "" or "gemma3" for Gemma 3's layout,
	// "pixtral" for Pixtral's and Mistral 3's (projector_pixtral.go),
	// "qwen2.5vl_merger" or "qwen2vl_merger" for Qwen's
	// (projector_qwen.go).
	Type string `json:",omitempty"`
	// Merge is clip.vision.spatial_merge_size for "pixtral": 0 or 1 for
	// Pixtral 12B's encoder, which merges nothing, 2 for Mistral 3's
	// patch merger.
	Merge int `json:",omitempty"`
	// WindowPattern is clip.vision.n_wa_pattern for Qwen2.5-VL: every
	// WindowPattern-th layer attends to the whole image, the others
	// within windows; 0 for none.
	WindowPattern int `json:",omitempty"`
}

// SigLIP896 is Gemma 3's vision tower: SigLIP-So400m at 896 pixels in
// 14-pixel patches, projected to a 2560-wide text model.
var SigLIP896 = Vision{ImageSize: 896, PatchSize: 14, Embd: 1152, FF: 4304, Heads: 16, Blocks: 27, TextEmbd: 2560}

// Projector assembles the header of an mmproj file with vision encoder v,
// its matrices in typ (mmproj files are mostly F16 or BF16) and the rest
// in F32, every tensor a hole, in the layout of v.Type.
func Projector(v Vision, typ gguf.GGMLType) (*gguf.Builder, error) {
	if v.PatchSize <= 0 || v.ImageSize < v.PatchSize || v.Embd <= 0 || v.FF <= 0 || v.Heads <= 0 || v.Blocks <= 0 || v.TextEmbd <= 0 {
		return nil, fmt.Errorf("synth: vision shape %+v has a zero dimension", v)
	}
	switch v.Type {
	case "", arch.ProjectorGemma3:
		return gemma3Projector(v, typ)
	case arch.ProjectorPixtral:
		return pixtralProjector(v, typ)
	case arch.ProjectorQwen25VL, arch.ProjectorQwen2VL:
		return qwenProjector(v, typ)
	}
	return nil, fmt.Errorf("synth: no mmproj layout for projector type %q (%s, %s, %s, %s)", v.Type,
		arch.ProjectorGemma3, arch.ProjectorPixtral, arch.ProjectorQwen25VL, arch.ProjectorQwen2VL)
}

// visionHeader starts an mmproj header: clip's keys for an image
// encoder of shape v, of projector type ptype. clip's loader refuses
// a vision encoder without the norm's epsilon, the mean and the spread.
func visionHeader(v Vision, ptype string, eps float32, mean, std []float32) *gguf.Builder {
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue("clip"))
	b.Set("general.type", gguf.StringValue("mmproj"))
	b.Set("clip.has_vision_encoder", gguf.BoolValue(true))
	b.Set("clip.projector_type", gguf.StringValue(ptype))
	b.Set("clip.vision.attention.layer_norm_epsilon", gguf.Float32Value(eps))
	b.Set("clip.vision.image_mean", gguf.Float32sValue(mean))
	b.Set("clip.vision.image_std", gguf.Float32sValue(std))
	for key, n := range map[string]int{
		"image_size": v.ImageSize, "patch_size": v.PatchSize, "embedding_length": v.Embd,
		"feed_forward_length": v.FF, "attention.head_count": v.Heads, "block_count": v.Blocks,
		"projection_dim": v.TextEmbd,
	} {
		b.Set("clip.vision."+key, gguf.Uint32Value(uint32(n)))
	}
	return b
}

// tensorAdder adds hole tensors to b, keeping the first error.
type tensorAdder struct {
	b   *gguf.Builder
	err error
}

func (a *tensorAdder) add(name string, t gguf.GGMLType, dims ...int) {
	if a.err != nil {
		return
	}
	shape := make([]uint64, len(dims))
	for i, d := range dims {
		shape[i] = uint64(d)
	}
	a.err = a.b.AddTensor(name, t, shape, nil)
}

// gemma3Projector is Gemma 3's SigLIP encoder with its pooled projection.
func gemma3Projector(v Vision, typ gguf.GGMLType) (*gguf.Builder, error) {
	// SigLIP's values, as Gemma 3's converted mmproj files carry them.
	b := visionHeader(v, arch.ProjectorGemma3, 1e-6, []float32{0.5, 0.5, 0.5}, []float32{0.5, 0.5, 0.5})
	b.Set("clip.use_gelu", gguf.BoolValue(true))
	ta := &tensorAdder{b: b}
	add := ta.add
	side := v.ImageSize / v.PatchSize
	add("v.patch_embd.weight", typ, v.PatchSize, v.PatchSize, 3, v.Embd)
	add("v.patch_embd.bias", gguf.TypeF32, v.Embd)
	add("v.position_embd.weight", typ, v.Embd, side*side)
	for i := range v.Blocks {
		p := fmt.Sprintf("v.blk.%d.", i)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			add(p+n+".weight", typ, v.Embd, v.Embd)
			add(p+n+".bias", gguf.TypeF32, v.Embd)
		}
		for _, n := range []string{"ln1", "ln2"} {
			add(p+n+".weight", gguf.TypeF32, v.Embd)
			add(p+n+".bias", gguf.TypeF32, v.Embd)
		}
		add(p+"ffn_up.weight", typ, v.Embd, v.FF)
		add(p+"ffn_up.bias", gguf.TypeF32, v.FF)
		add(p+"ffn_down.weight", typ, v.FF, v.Embd)
		add(p+"ffn_down.bias", gguf.TypeF32, v.Embd)
	}
	add("v.post_ln.weight", gguf.TypeF32, v.Embd)
	add("v.post_ln.bias", gguf.TypeF32, v.Embd)
	// Gemma 3 keeps the projection as a parameter, not a linear layer:
	// its first dimension is the text model's width, and clip transposes
	// it before the product.
	add("mm.input_projection.weight", typ, v.TextEmbd, v.Embd)
	add("mm.soft_emb_norm.weight", gguf.TypeF32, v.Embd)
	return b, ta.err
}

// ProjectorModel reads the header Projector writes, as the accountant
// sees it.
func ProjectorModel(v Vision, typ gguf.GGMLType) (*arch.Projector, error) {
	b, err := Projector(v, typ)
	if err != nil {
		return nil, err
	}
	m, err := b.Model()
	if err != nil {
		return nil, err
	}
	return arch.ProjectorFromGGUF(m)
}
