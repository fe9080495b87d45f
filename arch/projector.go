package arch

import (
	"fmt"

	"github.com/headroom-llm/headroom/gguf"
)

// Projector types (clip.projector_type) headroom replays or sizes by
// their own rules.
const (
	ProjectorGemma3  = "gemma3"
	ProjectorPixtral = "pixtral" // Pixtral's and Mistral 3's
	ProjectorQwen2VL = "qwen2vl_merger"
	// ProjectorQwen25VL is Qwen2.5-VL's.
	ProjectorQwen25VL = "qwen2.5vl_merger"
)

// Projector is a multimodal projector (an mmproj file, general.architecture
// "clip") as llama-server's --mmproj loads it through libmtmd: every tensor
// in one backend buffer, and an encoder graph reserved at a warm-up input.
type Projector struct {
	// Tensors are the file's tensors; all of them are loaded.
	Tensors []gguf.Tensor
	// Type is clip.projector_type ("gemma3", "mlp", ...), which picks the
	// encoder graph clip builds; "" where the file does not say.
	Type string
	// Vision is the image encoder, nil for an audio-only projector.
	Vision *VisionEncoder
	// Audio reports an audio encoder, whose compute buffer headroom does
	// not model.
	Audio bool
}

// VisionEncoder is a ViT-style image encoder's shape: the image it is
// warmed up with, cut into square patches, run through Blocks layers of
// Embd wide attention with Heads heads and an FF wide feed-forward.
type VisionEncoder struct {
	ImageSize, PatchSize, Embd, FF, Heads, Blocks int
	// Merge is clip.vision.projector.scale_factor, the side of the
	// patch squares some projectors pool or shuffle into one token; 0
	// where the file leaves it to the projector type's default.
	Merge int
	// SpatialMerge is clip.vision.spatial_merge_size, the side of the
	// patch squares Qwen's and Pixtral's (Mistral 3's) mergers fold into
	// one token; 0 where the file leaves it to the type's default (Qwen
	// 2, Pixtral 1).
	SpatialMerge int
	// WindowPattern is clip.vision.n_wa_pattern (Qwen2.5-VL): every
	// WindowPattern-th layer attends to the whole image, the others
	// within windows; 0 for full attention throughout.
	WindowPattern int
	// WarmupSize is the side of the square image clip reserves the
	// encoder's compute buffer with: ImageSize for most types, a fixed
	// number of tokens for those with dynamic resolution (Qwen's); 0
	// where unset, read as ImageSize.
	WarmupSize int
}

// Warmup is the side in pixels of clip's warm-up image.
func (v VisionEncoder) Warmup() int {
	if v.WarmupSize > 0 {
		return v.WarmupSize
	}
	return v.ImageSize
}

// Patches is the number of patches of the warm-up image.
func (v VisionEncoder) Patches() int {
	side := v.Warmup() / v.PatchSize
	return side * side
}

// qwenWarmupTokens is the side of the square of merged tokens clip warms
// Qwen2-VL and Qwen2.5-VL up with (set_warmup_n_tokens(46*46), "avoid
// OOM on warmup"): --image-min-tokens and --image-max-tokens bound the
// images it encodes later but not this one, in the pinned build.
const qwenWarmupTokens = 46

// pixtralWarmupTokens is the same for Pixtral and Mistral 3
// (set_warmup_n_tokens(256)), whose merge is 1 unless the file says.
const pixtralWarmupTokens = 16

// ImageTokensKeepWarmup reports whether clip warms a projector of type
// typ up at the same image whatever --image-min-tokens and
// --image-max-tokens say: measured with the pinned build for Gemma 3's
// (a fixed image), Pixtral's and Qwen's (a fixed token count; the bounds
// apply to the images encoded later). Other types set their warm-up from
// the bounds, or were not measured.
func ImageTokensKeepWarmup(typ string) bool {
	switch typ {
	case ProjectorGemma3, ProjectorPixtral, ProjectorQwen2VL, ProjectorQwen25VL:
		return true
	}
	return false
}

// warmupSize is the warm-up image side clip_model_loader picks for a
// vision encoder of projector type typ.
func warmupSize(typ string, v *VisionEncoder) int {
	merge := max(v.SpatialMerge, 1)
	switch typ {
	case ProjectorQwen2VL, ProjectorQwen25VL:
		if v.SpatialMerge == 0 {
			merge = 2
		}
		return qwenWarmupTokens * v.PatchSize * merge
	case ProjectorPixtral:
		return pixtralWarmupTokens * v.PatchSize * merge
	}
	return v.ImageSize
}

// ProjectorFromGGUF reads a projector's encoders and tensors from its header.
func ProjectorFromGGUF(m *gguf.Model) (*Projector, error) {
	if a := m.Architecture(); a != "clip" {
		return nil, &Incompatible{Reason: fmt.Sprintf("general.architecture is %q, expected \"clip\" for a multimodal projector (--mmproj)", a)}
	}
	p := &Projector{Tensors: m.Tensors}
	flag := func(key string) bool {
		v, ok := m.Lookup(key)
		if !ok {
			return false
		}
		b, ok := v.AsBool()
		return ok && b
	}
	if v, ok := m.Lookup("clip.projector_type"); ok {
		p.Type, _ = v.AsString()
	}
	p.Audio = flag("clip.has_audio_encoder")
	if flag("clip.has_vision_encoder") {
		h := hparams{m: m, prefix: "clip.vision."}
		v := &VisionEncoder{}
		for _, k := range []struct {
			key string
			dst *int
		}{
			{"image_size", &v.ImageSize}, {"patch_size", &v.PatchSize}, {"embedding_length", &v.Embd},
			{"feed_forward_length", &v.FF}, {"attention.head_count", &v.Heads}, {"block_count", &v.Blocks},
		} {
			n, err := h.need(k.key)
			if err != nil {
				return nil, err
			}
			*k.dst = n
		}
		merge, err := h.opt("projector.scale_factor", 0)
		if err != nil {
			return nil, err
		}
		v.Merge = merge
		if v.PatchSize <= 0 || v.ImageSize < v.PatchSize || v.ImageSize > 1<<16 {
			return nil, &Incompatible{Reason: fmt.Sprintf("clip.vision.image_size %d and patch_size %d do not make patches", v.ImageSize, v.PatchSize)}
		}
		if v.SpatialMerge, err = h.opt("spatial_merge_size", 0); err != nil {
			return nil, err
		}
		if v.WindowPattern, err = h.opt("n_wa_pattern", 0); err != nil {
			return nil, err
		}
		// clip refuses a merge of 65536 or more; a smaller bound keeps
		// the warm-up side far from overflowing.
		if v.SpatialMerge < 0 || v.SpatialMerge > 64 {
			return nil, &Incompatible{Reason: fmt.Sprintf("clip.vision.spatial_merge_size %d is out of range", v.SpatialMerge)}
		}
		v.WarmupSize = warmupSize(p.Type, v)
		p.Vision = v
	}
	if p.Vision == nil && !p.Audio {
		return nil, &Incompatible{Reason: "the projector has neither clip.has_vision_encoder nor clip.has_audio_encoder set"}
	}
	return p, nil
}
