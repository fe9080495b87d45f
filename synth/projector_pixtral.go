package synth

import (
	"fmt"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// MistralVision is the image encoder of Mistral 3 (Ministral 3 3B): a
// Pixtral ViT at 14-pixel patches, 1024 wide in 24 layers of 16 heads,
// whose patch merger folds 2x2 patches into one token before the
// projection to the text model's width (mistralai/Ministral-3-3B-
// Instruct-2512 and Mistral-Small-3.1-24B vision_config as published:
// hidden_size 1024, intermediate_size 4096, 24 layers, 16 heads,
// patch_size 14, image_size 1540, spatial_merge_size 2; not read here).
var MistralVision = Vision{Type: arch.ProjectorPixtral, ImageSize: 1540, PatchSize: 14, Embd: 1024, FF: 4096, Heads: 16, Blocks: 24, TextEmbd: 3072, Merge: 2}

// pixtralProjector is clip's PROJECTOR_TYPE_PIXTRAL layout as llama.cpp's
// converter writes it for Pixtral and Mistral 3: RMS norms without
// biases, a gated SiLU feed-forward, no learned positions (2D RoPE), a
// patch merger where Merge > 1, a two-layer projection and the
// [IMG_BREAK] token's embedding.
func pixtralProjector(v Vision, typ gguf.GGMLType) (*gguf.Builder, error) {
	if v.Merge > 1 && (v.ImageSize/v.PatchSize)%v.Merge != 0 {
		return nil, fmt.Errorf("synth: a %d-patch side does not merge by %d", v.ImageSize/v.PatchSize, v.Merge)
	}
	// Pixtral's processor normalizes with CLIP's mean and spread.
	b := visionHeader(v, arch.ProjectorPixtral, 1e-5, []float32{0.48145466, 0.4578275, 0.40821073}, []float32{0.26862954, 0.26130258, 0.27577711})
	b.Set("clip.use_silu", gguf.BoolValue(true))
	if v.Merge > 1 {
		b.Set("clip.vision.spatial_merge_size", gguf.Uint32Value(uint32(v.Merge)))
	}
	ta := &tensorAdder{b: b}
	add := ta.add
	add("v.patch_embd.weight", typ, v.PatchSize, v.PatchSize, 3, v.Embd)
	add("v.pre_ln.weight", gguf.TypeF32, v.Embd)
	for i := range v.Blocks {
		p := fmt.Sprintf("v.blk.%d.", i)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			add(p+n+".weight", typ, v.Embd, v.Embd)
		}
		add(p+"ln1.weight", gguf.TypeF32, v.Embd)
		add(p+"ln2.weight", gguf.TypeF32, v.Embd)
		add(p+"ffn_gate.weight", typ, v.Embd, v.FF)
		add(p+"ffn_up.weight", typ, v.Embd, v.FF)
		add(p+"ffn_down.weight", typ, v.FF, v.Embd)
	}
	if v.Merge > 1 {
		add("mm.input_norm.weight", gguf.TypeF32, v.Embd)
		add("mm.patch_merger.weight", typ, v.Embd*v.Merge*v.Merge, v.Embd)
	}
	add("mm.1.weight", typ, v.Embd, v.TextEmbd)
	add("mm.2.weight", typ, v.TextEmbd, v.TextEmbd)
	add("v.token_embd.img_break", gguf.TypeF32, v.TextEmbd)
	return b, ta.err
}
