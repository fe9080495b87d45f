package synth

import (
	"fmt"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// Qwen25VL7B is Qwen2.5-VL-7B-Instruct's vision tower (its public
// vision_config): 32 layers 1280 wide with 16 heads, a SwiGLU
// feed-forward 3420 wide, 14-pixel patches merged 2×2 into tokens for a
// 3584-wide text model, full attention in every 8th layer
// (fullatt_block_indexes 7, 15, 23, 31) and windows in the others.
// image_size is the converter's default (560): clip does not warm the
// encoder up at it.
var Qwen25VL7B = Vision{ImageSize: 560, PatchSize: 14, Embd: 1280, FF: 3420, Heads: 16, Blocks: 32, TextEmbd: 3584,
	Type: arch.ProjectorQwen25VL, WindowPattern: 8}

// qwenProjector is the mmproj layout convert_hf_to_gguf.py writes for
// Qwen2-VL and Qwen2.5-VL (Qwen2VLVisionModel): the 3D patch convolution
// split into two 2D kernels, Q, K and V split out of the fused QKV with
// their biases, the merger's MLP as mm.0 and mm.2 and its norm as
// v.post_ln. Qwen2.5-VL has RMS norms (weights only), a gated SiLU
// feed-forward and window attention; Qwen2-VL layer norms and a plain
// feed-forward with quick GELU (no activation key: clip's default).
func qwenProjector(v Vision, typ gguf.GGMLType) (*gguf.Builder, error) {
	qwen25 := v.Type == arch.ProjectorQwen25VL
	if qwen25 && v.WindowPattern <= 0 {
		// clip's loader requires the key for Qwen2.5-VL.
		return nil, fmt.Errorf("synth: a %s projector needs a window pattern", v.Type)
	}
	// CLIP's normalization, as Qwen's preprocessor_config.json has it.
	b := visionHeader(v, v.Type, 1e-6, []float32{0.48145466, 0.4578275, 0.40821073}, []float32{0.26862954, 0.26130258, 0.27577711})
	if qwen25 {
		b.Set("clip.use_silu", gguf.BoolValue(true))
		b.Set("clip.vision.n_wa_pattern", gguf.Uint32Value(uint32(v.WindowPattern)))
	}
	ta := &tensorAdder{b: b}
	add := ta.add
	// The temporal patch of two frames is two kernels; a still image
	// goes through both.
	add("v.patch_embd.weight", typ, v.PatchSize, v.PatchSize, 3, v.Embd)
	add("v.patch_embd.weight.1", typ, v.PatchSize, v.PatchSize, 3, v.Embd)
	norm := func(name string) {
		add(name+".weight", gguf.TypeF32, v.Embd)
		if !qwen25 {
			add(name+".bias", gguf.TypeF32, v.Embd)
		}
	}
	linear := func(name string, in, out int) {
		add(name+".weight", typ, in, out)
		add(name+".bias", gguf.TypeF32, out)
	}
	for i := range v.Blocks {
		p := fmt.Sprintf("v.blk.%d.", i)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			linear(p+n, v.Embd, v.Embd)
		}
		norm(p + "ln1")
		norm(p + "ln2")
		if qwen25 {
			linear(p+"ffn_gate", v.Embd, v.FF)
		}
		linear(p+"ffn_up", v.Embd, v.FF)
		linear(p+"ffn_down", v.FF, v.Embd)
	}
	norm("v.post_ln")
	// The merger concatenates 2×2 patches (4×Embd) before its MLP.
	linear("mm.0", 4*v.Embd, 4*v.Embd)
	linear("mm.2", 4*v.Embd, v.TextEmbd)
	return b, ta.err
}
