package graph

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file replays clip_graph_qwen2vl (tools/mtmd/models/qwen2vl.cpp),
// the encoder of Qwen2-VL's and Qwen2.5-VL's projectors, for a still
// image at clip's warm-up size (arch.VisionEncoder.Warmup).

// qwenMerge is the side of the patch squares the graph concatenates into
// one token: clip's graph is written for 2×2 (it reshapes by n_embd*4
// and n_patches/4 whatever spatial_merge_size says), so another merge
// is not replayed.
const qwenMerge = 2

// qwenReady checks that the header makes the graph: shapes ggml would
// accept in every product, so that an unexpected header falls back to
// the estimate instead of a wrong replay.
func (b *clipGB) qwenReady(v arch.VisionEncoder, qwen25 bool) bool {
	merge := v.SpatialMerge
	if merge == 0 {
		merge = qwenMerge
	}
	if merge != qwenMerge || v.Heads <= 0 || v.Embd%v.Heads != 0 ||
		v.Blocks <= 0 || v.Blocks > 1<<10 || v.WindowPattern < 0 || (qwen25 && v.WindowPattern == 0) {
		return false
	}
	embd := uint64(v.Embd)
	shaped := func(name string, ne ...uint64) bool {
		t, ok := b.tensors[name]
		if !ok || len(t.Shape) != len(ne) {
			return false
		}
		for i, d := range ne {
			if d != 0 && t.Shape[i] != d {
				return false
			}
		}
		return true
	}
	p := uint64(v.PatchSize)
	if !shaped("v.patch_embd.weight", p, p, 3, embd) || !shaped("v.patch_embd.weight.1", p, p, 3, embd) {
		return false
	}
	for il := range v.Blocks {
		pre := "v.blk." + strconv.Itoa(il) + "."
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			if !shaped(pre+n+".weight", embd, embd) {
				return false
			}
		}
		up, ok := b.tensors[pre+"ffn_up.weight"]
		if !ok || len(up.Shape) != 2 || up.Shape[0] != embd || !shaped(pre+"ffn_down.weight", up.Shape[1], embd) {
			return false
		}
		if _, gated := b.tensors[pre+"ffn_gate.weight"]; gated && !shaped(pre+"ffn_gate.weight", embd, up.Shape[1]) {
			return false
		}
	}
	mm0, ok := b.tensors["mm.0.weight"]
	return ok && shaped("mm.0.weight", 4*embd, 0) && shaped("mm.2.weight", mm0.Shape[1], 0)
}

// qwenVL is clip_graph_qwen2vl::build for a still image: both frames'
// patch kernels over the one image, the patches reordered so that each
// 2×2 square is contiguous, the ViT with 2D M-RoPE (in window order,
// with the window mask in the layers that are not full attention, where
// the file has a window pattern), then the merger's MLP over the
// squares, put back in raster order.
func (b *clipGB) qwenVL(v arch.VisionEncoder, qwen25, flash bool) *tensor {
	embd, n := int64(v.Embd), int64(v.Patches())
	x := b.qwenPatches(v)
	// M-RoPE takes four positions per patch (clip fills two).
	pos := b.Input("positions", gguf.TypeI32, 4*n)
	if b.weight("v.pre_ln.weight") != nil {
		x = b.norm(x, "v.pre_ln", qwen25)
	}
	var mask *tensor
	if v.WindowPattern > 0 {
		inv := b.Input("inv_window_idx", gguf.TypeI32, n/4)
		mask = b.Input("window_mask", gguf.TypeF32, n, n)
		if flash {
			// cast once here, and again (F16 to F16) by build_attn in
			// every windowed layer.
			mask = b.Cast(mask, gguf.TypeF16)
		}
		x = b.Reshape(x, 4*embd, n/4)
		x = b.GetRows(x, inv)
		x = b.Reshape(x, embd, n, 1)
	}
	// Qwen2-VL's plain feed-forward has quick GELU (clip's default): a
	// unary op like any other on the CPU.
	o := vitOpts{rms: qwen25, rope: func(t *tensor) *tensor { return b.Rope(t, pos, nil) }, flash: flash, act: ggml.UnaryOther}
	for il := range v.Blocks {
		o.mask = nil
		if v.WindowPattern > 0 && (il+1)%v.WindowPattern != 0 {
			o.mask = mask // a windowed layer; the others attend to the whole image
		}
		x = b.vitBlock(x, v, il, o)
	}
	if b.weight("v.post_ln.weight") != nil {
		x = b.norm(x, "v.post_ln", qwen25)
	}
	x = b.Reshape(x, 4*embd, n/4, 1)
	x = b.linear(x, "mm.0")
	x = b.UnaryOf(ggml.UnaryGELU, x)
	x = b.linear(x, "mm.2")
	if v.WindowPattern > 0 {
		out := x.Ne()[0]
		idx := b.Input("window_idx", gguf.TypeI32, n/4)
		x = b.Reshape(x, out, n/4)
		x = b.GetRows(x, idx)
		x = b.Reshape(x, out, n/4, 1)
	}
	return x
}

// qwenPatches is build_inp_with_temporal_merge for one image (the sum of
// the two kernels' convolutions) and the reorder that follows it: rows
// of patches, each 2×2 square's four patches one after another.
func (b *clipGB) qwenPatches(v arch.VisionEncoder) *tensor {
	size, patch, embd := int64(v.Warmup()), int64(v.PatchSize), int64(v.Embd)
	side := size / patch
	raw := b.Input("inp_raw", gguf.TypeF32, size, size, 3, 1)
	x := b.Add(b.conv2d(b.weight("v.patch_embd.weight"), raw, patch),
		b.conv2d(b.weight("v.patch_embd.weight.1"), raw, patch))
	x = b.Permute(x, 1, 2, 0, 3)
	x = b.Cont(x, 2*embd, side/2, side, 1)
	x = b.Reshape(x, 2*embd, side/2, 2, side/2)
	x = b.Permute(x, 0, 2, 1, 3)
	return b.Cont(x, embd, side*side, 1)
}
